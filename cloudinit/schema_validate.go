package cloudinit

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
)

// schemaError is a keyword a value fails, with the errors under it: the
// branches of a oneOf, or the several errors of a node (keyword ""). The
// tree has the shape jsonschema/v6's errors had, which leafErrors and
// schemaMessage turn into findings, and the same messages.
type schemaError struct {
	loc     []string
	keyword string
	message string
	causes  []*schemaError
}

// valid reports whether v satisfies n.
func (n *schemaNode) valid(v any) bool { return n.validate(v, nil) == nil }

// validate checks v, found at loc in the document, against n: Draft 4, as
// cloud-init's validator applies it. A $ref stands for the whole node (the
// cloud-config schema puts a "type" beside some, which Draft 4 ignores).
// As in jsonschema/v6, whose errors these reproduce, a value of the wrong
// type, outside an enum or of a bad format is told only that.
func (n *schemaNode) validate(v any, loc []string) *schemaError {
	if n.ref != nil {
		err := n.ref.validate(v, loc)
		if err == nil {
			return nil
		}
		wrap := n.failWith(loc, "$ref", "validation failed", []*schemaError{err})
		if err.keyword == "" {
			wrap.causes = err.causes
		}
		return wrap
	}
	if !n.typeOK(v) {
		return n.fail(loc, "type", "got %s, want %s", jsonType(v), strings.Join(n.types, " or "))
	}
	if n.enum != nil && !slices.ContainsFunc(n.enum, func(e any) bool { return equalValues(v, e) }) {
		return n.fail(loc, "enum", "%s", enumMessage(n.enum))
	}
	if s, ok := v.(string); ok && n.format == "date" {
		if _, err := time.Parse("2006-01-02", s); err != nil {
			return n.fail(loc, "format", "%s is not valid %s: %v", display(s), n.format, err)
		}
	}
	var errs []*schemaError
	switch v := v.(type) {
	case map[string]any:
		errs = n.validateObject(v, loc)
	case []any:
		errs = n.validateArray(v, loc)
	case string:
		if n.pattern != nil && !n.pattern.MatchString(v) {
			errs = append(errs, n.fail(loc, "pattern", "%s does not match pattern %s", quote(v), quote(n.pattern.String())))
		}
	case json.Number, float64:
		errs = n.validateNumber(v, loc, errs)
	}
	errs = append(errs, n.validateChoices(v, loc)...)
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	group := n.fail(loc, "", "validation failed")
	group.causes = errs
	return group
}

func (n *schemaNode) fail(loc []string, keyword, format string, args ...any) *schemaError {
	return &schemaError{loc: slices.Clone(loc), keyword: keyword, message: fmt.Sprintf(format, args...)}
}

func (n *schemaNode) validateObject(obj map[string]any, loc []string) []*schemaError {
	var errs []*schemaError
	if len(obj) < n.minProperties {
		errs = append(errs, n.fail(loc, "minProperties", "minProperties: got %d, want %d", len(obj), n.minProperties))
	}
	var missing []string
	for _, name := range n.required {
		if _, ok := obj[name]; !ok {
			missing = append(missing, name)
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		errs = append(errs, n.fail(loc, "required", "missing property %s", quote(missing[0])))
	default:
		errs = append(errs, n.fail(loc, "required", "missing properties %s", joinQuoted(missing)))
	}
	var extra []string
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		at := append(slices.Clip(loc), name)
		matched := false
		if sub := n.property(name); sub != nil {
			matched = true
			errs = appendError(errs, sub.validate(obj[name], at))
		}
		for _, pp := range n.patternProperties {
			if pp.re.MatchString(name) {
				matched = true
				errs = appendError(errs, pp.node.validate(obj[name], at))
			}
		}
		switch {
		case matched:
		case n.additionalProps != nil:
			errs = appendError(errs, n.additionalProps.validate(obj[name], at))
		case n.noAdditionalProps:
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		errs = append(errs, n.fail(loc, "additionalProperties", "additional properties %s not allowed", joinQuoted(extra)))
	}
	return errs
}

func (n *schemaNode) validateArray(arr []any, loc []string) []*schemaError {
	var errs []*schemaError
	if len(arr) < n.minItems {
		errs = append(errs, n.fail(loc, "minItems", "minItems: got %d, want %d", len(arr), n.minItems))
	}
	if n.hasMaxItems && len(arr) > n.maxItems {
		errs = append(errs, n.fail(loc, "maxItems", "maxItems: got %d, want %d", len(arr), n.maxItems))
	}
	if n.uniqueItems {
		if i, j, dup := duplicate(arr); dup {
			errs = append(errs, n.fail(loc, "uniqueItems", "items at %d and %d are equal", i, j))
		}
	}
	for i, item := range arr {
		at := append(slices.Clip(loc), strconv.Itoa(i))
		switch {
		case n.items != nil:
			errs = appendError(errs, n.items.validate(item, at))
		case n.tupleItems == nil:
		case i < len(n.tupleItems):
			errs = appendError(errs, n.tupleItems[i].validate(item, at))
		case n.additionalItems != nil:
			errs = appendError(errs, n.additionalItems.validate(item, at))
		}
	}
	// Draft 4: additionalItems only counts when items is an array.
	if n.noAdditionalItems && n.tupleItems != nil && len(arr) > len(n.tupleItems) {
		errs = append(errs, n.fail(loc, "additionalItems", "last %d additionalItem(s) not allowed", len(arr)-len(n.tupleItems)))
	}
	return errs
}

// validateNumber checks minimum, comparing as Python does: exactly, NaN
// never below anything.
func (n *schemaNode) validateNumber(v any, loc []string, errs []*schemaError) []*schemaError {
	if n.minimum == "" {
		return errs
	}
	minimum, _ := new(big.Rat).SetString(n.minimum)
	var got float64
	below := false
	switch v := v.(type) {
	case json.Number:
		r, _ := new(big.Rat).SetString(string(v))
		below = r.Cmp(minimum) < 0
		got, _ = r.Float64()
	case float64:
		got = v
		if math.IsInf(v, -1) {
			below = true
		} else if !math.IsNaN(v) && !math.IsInf(v, 1) {
			below = new(big.Rat).SetFloat64(v).Cmp(minimum) < 0
		}
	}
	if below {
		want, _ := minimum.Float64()
		errs = append(errs, n.fail(loc, "minimum", "minimum: got %v, want %v", got, want))
	}
	return errs
}

// validateChoices checks allOf, anyOf and oneOf, in that order.
func (n *schemaNode) validateChoices(v any, loc []string) []*schemaError {
	var errs []*schemaError
	var failed []*schemaError
	for _, sub := range n.allOf {
		failed = appendError(failed, sub.validate(v, loc))
	}
	if len(failed) > 0 {
		errs = append(errs, n.failWith(loc, "allOf", "'allOf' failed", failed))
	}
	if n.anyOf != nil {
		failed = nil
		for _, sub := range n.anyOf {
			err := sub.validate(v, loc)
			if err == nil {
				failed = nil
				break
			}
			failed = append(failed, err)
		}
		if failed != nil {
			errs = append(errs, n.failWith(loc, "anyOf", "'anyOf' failed", failed))
		}
	}
	if n.oneOf != nil {
		errs = appendError(errs, n.validateOneOf(v, loc))
	}
	return errs
}

func (n *schemaNode) validateOneOf(v any, loc []string) *schemaError {
	var failed []*schemaError
	first := -1
	for i, sub := range n.oneOf {
		if first >= 0 {
			if sub.valid(v) {
				return n.fail(loc, "oneOf", "'oneOf' failed, subschemas %d, %d matched", first, i)
			}
			continue
		}
		if err := sub.validate(v, loc); err != nil {
			failed = append(failed, err)
		} else {
			first = i
		}
	}
	if first < 0 {
		return n.failWith(loc, "oneOf", "'oneOf' failed, none matched", failed)
	}
	return nil
}

func (n *schemaNode) failWith(loc []string, keyword, message string, causes []*schemaError) *schemaError {
	err := n.fail(loc, keyword, "%s", message)
	err.causes = causes
	return err
}

func appendError(errs []*schemaError, err *schemaError) []*schemaError {
	if err != nil {
		errs = append(errs, err)
	}
	return errs
}

// typeOK applies "type" as Python's Draft 4 checker does: an integer is
// an int (1.0 is a float, not an integer), bytes count as strings (the
// document's !!binary values are strings here), and no type takes a
// pyObject.
func (n *schemaNode) typeOK(v any) bool {
	if n.types == nil {
		return true
	}
	t := jsonType(v)
	for _, want := range n.types {
		if want == t || want == "integer" && isInt(v) {
			return true
		}
	}
	return false
}

// jsonType names v's JSON type as jsonschema/v6's messages did ("number"
// for integers too), or the kind of Python object it is.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case pyObject:
		return v.kind
	}
	return fmt.Sprintf("%T", v)
}

// isInt: the document's integers are json.Numbers (pyInt), its floats
// float64s (pyFloat).
func isInt(v any) bool {
	_, ok := v.(json.Number)
	return ok
}

// equalValues is Python's ==, as enum and uniqueItems use it, with bools
// apart from numbers (as jsonschema keeps them): numbers by value, lists
// and dicts member by member.
func equalValues(a, b any) bool {
	return valueKey(a) == valueKey(b)
}

// valueKey is a text equal for equal values and different for others.
func valueKey(v any) string {
	switch v := v.(type) {
	case nil:
		return "n"
	case bool:
		return "b" + strconv.FormatBool(v)
	case string:
		return "s" + strconv.Quote(v)
	case json.Number:
		r, _ := new(big.Rat).SetString(string(v))
		return "r" + r.String()
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "f" + strconv.FormatFloat(v, 'g', -1, 64)
		}
		return "r" + new(big.Rat).SetFloat64(v).String()
	case []any:
		var b strings.Builder
		b.WriteString("[")
		for _, x := range v {
			b.WriteString(valueKey(x) + ",")
		}
		return b.String() + "]"
	case map[string]any:
		var b strings.Builder
		b.WriteString("{")
		for _, k := range slices.Sorted(maps.Keys(v)) {
			b.WriteString(strconv.Quote(k) + ":" + valueKey(v[k]) + ",")
		}
		return b.String() + "}"
	case pyObject:
		return "o" + v.kind + ":" + v.text
	}
	return fmt.Sprintf("?%T", v)
}

// duplicate finds the first item equal to an earlier one, and that one:
// in linear time, so that a long list costs no more than reading it.
func duplicate(arr []any) (first, second int, found bool) {
	seen := make(map[string]int, len(arr))
	for i, x := range arr {
		k := valueKey(x)
		if j, ok := seen[k]; ok {
			if !isNaN(x) {
				return j, i, true
			}
		}
		seen[k] = i
	}
	return 0, 0, false
}

func isNaN(v any) bool {
	f, ok := v.(float64)
	return ok && math.IsNaN(f)
}

// enumMessage is jsonschema/v6's: the allowed values, when all are scalars.
func enumMessage(values []any) string {
	var want []string
	for _, v := range values {
		switch v.(type) {
		case []any, map[string]any:
			return "'enum' failed"
		}
		want = append(want, display(v))
	}
	if len(want) == 1 {
		return "value must be " + want[0]
	}
	return "value must be one of " + strings.Join(want, ", ")
}

func display(v any) string {
	if s, ok := v.(string); ok {
		return quote(s)
	}
	return fmt.Sprint(v)
}

// quote single-quotes s as jsonschema/v6 did.
func quote(s string) string {
	s = strconv.Quote(s)
	s = strings.ReplaceAll(s, `\"`, `"`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s[1:len(s)-1] + "'"
}

func joinQuoted(names []string) string {
	quoted := make([]string, len(names))
	for i, s := range names {
		quoted[i] = quote(s)
	}
	return strings.Join(quoted, ", ")
}
