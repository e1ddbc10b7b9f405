package cloudinit

// The jsonschema/v6 CheckSchema, test-only: TestCheckSchemaMatchesV6 and
// FuzzCheckSchema hold the hand-written validator to it, so the library
// stays out of every binary (a _test.go file never links into one) while
// still checking the replacement.

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// checkSchemaV6 is CheckSchema as it was with jsonschema/v6, kept as the
// differential tests' oracle (see schema_v6_test.go). It checks a #cloud-config document against cloud-init's own
// JSON schema, as `cloud-init schema --config-file` does in cloud-init
// SchemaVersion: Draft 4, with byte strings (!!binary) counted as strings,
// only the "date" format asserted, and cloud-init's "deprecated"
// annotations reported for the branch of a oneOf/anyOf that the value
// takes. Keys the schema does not know are not findings, as in cloud-init.
//
// It returns an error, and no findings, when data is not a #cloud-config
// document cloud-init can load (CheckUserData says why).
func checkSchemaV6(data []byte) ([]SchemaFinding, error) {
	doc, err := schemaDocument(data)
	if doc == nil || err != nil {
		return nil, err
	}
	s, err := v6LoadSchema()
	if err != nil {
		return nil, err
	}
	v := &schemaValue{lines: map[string]int{"": doc.Line}, objects: map[string]string{}}
	inst := v.convert(doc, nil)
	var out []SchemaFinding
	if verr, ok := s.compiled.Validate(inst).(*jsonschema.ValidationError); ok {
		v6SortAdditional(verr)
		for _, e := range v6LeafErrors(verr) {
			loc := e.InstanceLocation
			msg := v6Message(e)
			if kind, ok := v.objects[strings.Join(loc, "\x00")]; ok && v6Keyword(e) == "type" {
				msg = fmt.Sprintf("cloud-init's YAML loader reads this unquoted value as a %s, which no form here accepts: quote it", kind)
			}
			out = append(out, SchemaFinding{Path: fieldPath(loc), Line: v.line(loc), Message: msg})
		}
	} else if verr != nil {
		return nil, verr
	}
	d := v6DeprecationWalk{s: s, seen: map[string]bool{}}
	d.walk(s.root, "", inst, nil)
	for _, f := range d.found {
		f.Line = v.line(f.loc)
		out = append(out, f.SchemaFinding)
	}
	slices.SortStableFunc(out, func(a, b SchemaFinding) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out, nil
}

// v6Schema is the compiled schema and its raw JSON, which the
// deprecation walk follows.
type v6Schema struct {
	compiler *jsonschema.Compiler
	compiled *jsonschema.Schema
	root     map[string]any

	mu  sync.Mutex
	sub map[string]*jsonschema.Schema // compiled subschemas by JSON pointer
}

const v6SchemaURL = "https://vminit.dev/cloud-init/schema-cloud-config-v1.json"

var v6LoadSchema = sync.OnceValues(v6Compile)

func v6Compile() (*v6Schema, error) {
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("cloud-init schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	// cloud-init validates with jsonschema's FormatChecker(), which checks
	// "date" but not "uri" or "hostname" (those need optional Python
	// packages that Debian's cloud-init does not pull in).
	c.AssertFormat()
	for _, name := range []string{"uri", "hostname"} {
		c.RegisterFormat(&jsonschema.Format{Name: name, Validate: func(any) error { return nil }})
	}
	if err := c.AddResource(v6SchemaURL, raw); err != nil {
		return nil, fmt.Errorf("cloud-init schema: %w", err)
	}
	compiled, err := c.Compile(v6SchemaURL)
	if err != nil {
		return nil, fmt.Errorf("cloud-init schema: %w", err)
	}
	root, _ := raw.(map[string]any)
	return &v6Schema{compiler: c, compiled: compiled, root: root, sub: map[string]*jsonschema.Schema{}}, nil
}

// valid reports whether v satisfies the subschema at the JSON pointer ptr.
func (s *v6Schema) valid(ptr string, v any) bool {
	s.mu.Lock()
	sch, ok := s.sub[ptr]
	if !ok {
		var err error
		if sch, err = s.compiler.Compile(v6SchemaURL + "#" + ptr); err != nil {
			sch = nil
		}
		s.sub[ptr] = sch
	}
	s.mu.Unlock()
	return sch != nil && sch.Validate(v) == nil
}

// v6LeafErrors flattens a validation error to the causes a user can act on:
// for a oneOf/anyOf that no branch satisfies, the error itself (its
// branches' complaints would contradict each other), else its leaves.
func v6LeafErrors(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	switch v6Keyword(e) {
	case "oneOf", "anyOf":
		// When only one form has the value's type (an object where a
		// string or an object is allowed), what is wrong inside it is
		// the useful finding; otherwise the choice itself is.
		var fits []*jsonschema.ValidationError
		for _, c := range e.Causes {
			if v6Keyword(c) != "type" {
				fits = append(fits, c)
			}
		}
		if len(fits) == 1 {
			return v6LeafErrors(fits[0])
		}
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, v6LeafErrors(c)...)
	}
	return out
}

var v6English = message.NewPrinter(language.English)

// keyword is the schema keyword that failed, e.g. "type" or "oneOf".
func v6Keyword(e *jsonschema.ValidationError) string {
	if e.ErrorKind == nil {
		return ""
	}
	p := e.ErrorKind.KeywordPath()
	if len(p) == 0 {
		return ""
	}
	return p[len(p)-1]
}

// v6Message words an error the way a cloud-config author reads it.
func v6Message(e *jsonschema.ValidationError) string {
	msg := e.ErrorKind.LocalizedString(v6English)
	switch v6Keyword(e) {
	case "oneOf", "anyOf":
		// Name what each branch wanted, briefly.
		var wants []string
		for _, c := range e.Causes {
			if w := c.ErrorKind.LocalizedString(v6English); !slices.Contains(wants, w) {
				wants = append(wants, w)
			}
		}
		if len(wants) > 0 && len(wants) <= 4 {
			msg = "matches none of the forms cloud-init accepts (" + strings.Join(wants, "; ") + ")"
		} else {
			msg = "matches none of the forms cloud-init accepts"
		}
	}
	return msg + " [cloud-init " + SchemaVersion + " schema]"
}

// v6DeprecationWalk finds the "deprecated" annotations a value meets, with
// cloud-init's rules: every schema applied to the value counts, except
// that of a oneOf or anyOf only the first branch the value satisfies does.
type v6DeprecationWalk struct {
	s     *v6Schema
	found []v6Deprecation
	seen  map[string]bool
	depth int
}

type v6Deprecation struct {
	SchemaFinding
	loc []string
}

func (d *v6DeprecationWalk) walk(sch map[string]any, ptr string, v any, loc []string) {
	if sch == nil || d.depth > 64 {
		return
	}
	d.depth++
	defer func() { d.depth-- }()
	if ref, ok := sch["$ref"].(string); ok {
		// Draft 4: $ref replaces the rest of the schema.
		if target, p := d.resolve(ref); target != nil {
			d.walk(target, p, v, loc)
		}
		return
	}
	if dep, _ := sch["deprecated"].(bool); dep {
		msg := "cloud-init marks this form as deprecated"
		if desc, _ := sch["description"].(string); desc != "" {
			msg = strings.TrimPrefix(desc, "DEPRECATED: ")
		}
		key := strings.Join(loc, "\x00") + "\x01" + msg
		if !d.seen[key] {
			d.seen[key] = true
			d.found = append(d.found, v6Deprecation{SchemaFinding{Path: fieldPath(loc), Message: msg, Deprecated: true}, slices.Clone(loc)})
		}
	}
	for i, sub := range v6List(sch["allOf"]) {
		d.walk(sub, fmt.Sprintf("%s/allOf/%d", ptr, i), v, loc)
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		for i, sub := range v6List(sch[kw]) {
			p := fmt.Sprintf("%s/%s/%d", ptr, kw, i)
			if d.s.valid(p, v) {
				d.walk(sub, p, v, loc)
				break
			}
		}
	}
	switch t := v.(type) {
	case map[string]any:
		props, _ := sch["properties"].(map[string]any)
		patterns, _ := sch["patternProperties"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(t)) {
			child := append(slices.Clip(loc), k)
			matched := false
			if p, ok := props[k].(map[string]any); ok {
				matched = true
				d.walk(p, ptr+"/properties/"+escapePointer(k), t[k], child)
			}
			for _, pat := range slices.Sorted(maps.Keys(patterns)) {
				if re, err := regexp.Compile(pat); err == nil && re.MatchString(k) {
					matched = true
					p, _ := patterns[pat].(map[string]any)
					d.walk(p, ptr+"/patternProperties/"+escapePointer(pat), t[k], child)
				}
			}
			if ap, ok := sch["additionalProperties"].(map[string]any); ok && !matched {
				d.walk(ap, ptr+"/additionalProperties", t[k], child)
			}
		}
	case []any:
		switch items := sch["items"].(type) {
		case map[string]any:
			for i, x := range t {
				d.walk(items, ptr+"/items", x, append(slices.Clip(loc), strconv.Itoa(i)))
			}
		case []any:
			for i, x := range t {
				child := append(slices.Clip(loc), strconv.Itoa(i))
				if i < len(items) {
					p, _ := items[i].(map[string]any)
					d.walk(p, fmt.Sprintf("%s/items/%d", ptr, i), x, child)
				} else if ai, ok := sch["additionalItems"].(map[string]any); ok {
					d.walk(ai, ptr+"/additionalItems", x, child)
				}
			}
		}
	}
}

// resolve follows a local reference ("#/$defs/x") in the root schema.
func (d *v6DeprecationWalk) resolve(ref string) (map[string]any, string) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, ""
	}
	var cur any = d.s.root
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, ""
			}
			cur = c[i]
		default:
			return nil, ""
		}
	}
	m, _ := cur.(map[string]any)
	return m, ptr
}

func v6List(v any) []map[string]any {
	items, _ := v.([]any)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		m, _ := it.(map[string]any)
		out = append(out, m)
	}
	return out
}

// v6SortAdditional sorts the names in "additional properties" errors,
// which jsonschema/v6 lists in map order and CheckSchema sorted.
func v6SortAdditional(e *jsonschema.ValidationError) {
	if k, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
		slices.Sort(k.Properties)
	}
	for _, c := range e.Causes {
		v6SortAdditional(c)
	}
}

// TestCheckSchemaMatchesV6: on every document of the tests and the fuzz
// corpus, CheckSchema's findings (paths, lines, messages) are those of
// the jsonschema/v6 implementation it replaced, except where it departs
// from v6 on purpose to follow cloud-init (v6Departs).
func TestCheckSchemaMatchesV6(t *testing.T) {
	docs := maps.Clone(schemaCases)
	for _, f := range corpusDocs(t, "FuzzCheckSchema") {
		docs[filepath.Base(f.name)] = f.doc
	}
	compared := 0
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		if compareWithV6(t, docs[name]) {
			compared++
		}
	}
	t.Logf("%d of %d documents compared", compared, len(docs))
}

// compareWithV6 fails t when CheckSchema and checkSchemaV6 disagree on
// doc; it reports whether it compared them.
func compareWithV6(t *testing.T, doc string) bool {
	t.Helper()
	got, err := CheckSchema([]byte(doc))
	if err != nil || v6Departs(doc) {
		return false
	}
	want, err := checkSchemaV6([]byte(doc))
	if err != nil {
		t.Fatalf("v6 fails where CheckSchema does not: %v\n%s", err, doc)
	}
	sortFindings(got)
	sortFindings(want)
	if !slices.Equal(got, want) {
		t.Errorf("document:\n%s\nCheckSchema: %q\nv6:          %q", doc, got, want)
	}
	return true
}

func sortFindings(fs []SchemaFinding) {
	slices.SortFunc(fs, func(a, b SchemaFinding) int {
		return cmp.Or(a.Line-b.Line, strings.Compare(a.Path, b.Path), strings.Compare(a.Message, b.Message))
	})
}

// v6Departs reports whether doc holds a value on which CheckSchema follows
// cloud-init rather than jsonschema/v6: a value loaded as a Python object
// (a date: v6 failed every schema on it, even one without "type"), or a
// float with an integer value, an infinity or NaN (v6 took 1.0 for an
// integer, and NaN against a minimum panics it; Python's Draft 4 says 1.0
// is a float). TestCheckSchemaMatchesCloudInit covers these.
func v6Departs(doc string) bool {
	n, err := normalize([]byte(doc))
	if err != nil || n == nil {
		return false
	}
	v := &schemaValue{lines: map[string]int{}, objects: map[string]string{}}
	var departs func(x any) bool
	departs = func(x any) bool {
		switch x := x.(type) {
		case pyObject:
			return true
		case float64:
			return math.IsNaN(x) || math.IsInf(x, 0) || x == math.Trunc(x)
		case []any:
			return slices.ContainsFunc(x, departs)
		case map[string]any:
			for _, m := range x {
				if departs(m) {
					return true
				}
			}
		}
		return false
	}
	return departs(v.convert(n, nil))
}

// TestCheckSchemaMatchesV6Generated: the same on documents generated from
// the schema (docGen), which reach every module's keys.
func TestCheckSchemaMatchesV6Generated(t *testing.T) {
	docs := generatedDocs(t, 3000)
	compared := 0
	for _, name := range slices.Sorted(maps.Keys(docs)) {
		if compareWithV6(t, docs[name]) {
			compared++
		}
	}
	t.Logf("%d of %d documents compared", compared, len(docs))
	if compared < len(docs)/2 {
		t.Errorf("only %d of %d generated documents compared", compared, len(docs))
	}
}
