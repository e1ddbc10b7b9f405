package cloudinit

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yaml11"
)

// SchemaVersion is the cloud-init release whose cloud-config schema
// CheckSchema applies (schema/README.md says where it comes from).
const SchemaVersion = "22.4.2"

// SchemaFinding is one thing `cloud-init schema` would report about a
// #cloud-config document: an error (cloud-init warns and the module
// concerned fails or misbehaves on the guest) or a deprecation.
type SchemaFinding struct {
	// Path is the key the finding is about, e.g. "users[0].sudo"; empty
	// for the document itself.
	Path string
	// Line is the line of that key in the document (1-based).
	Line       int
	Message    string
	Deprecated bool
}

func (f SchemaFinding) String() string {
	where := f.Path
	if where == "" {
		where = "document"
	}
	kind := ""
	if f.Deprecated {
		kind = "deprecated: "
	}
	return fmt.Sprintf("%s (line %d): %s%s", where, f.Line, kind, f.Message)
}

// CheckSchema checks a #cloud-config document against cloud-init's own
// JSON schema, as `cloud-init schema --config-file` does in cloud-init
// SchemaVersion: Draft 4, with byte strings (!!binary) counted as strings,
// only the "date" format asserted, and cloud-init's "deprecated"
// annotations reported for the branch of a oneOf/anyOf that the value
// takes. Keys the schema does not know are not findings, as in cloud-init.
// A value cloud-init's YAML loader reads as a Python object (an unquoted
// date) fails every "type", as in Python, and is reported as such.
//
// The validator is vminit's own (schema_node.go, schema_validate.go), not
// a JSON Schema library: the one vminit used (jsonschema/v6) compiled its
// meta-schemas in an init function, milliseconds of every vminit process,
// and took ~20 ms and 7.6 MB to compile this schema on the first check.
// Here the schema is Go data generated from its JSON (schema_tree.go):
// nothing to compile. Platforms run vminit once per VM.
//
// It returns an error, and no findings, when data is not a #cloud-config
// document cloud-init can load (CheckUserData says why).
func CheckSchema(data []byte) ([]SchemaFinding, error) {
	doc, err := schemaDocument(data)
	if doc == nil || err != nil {
		return nil, err
	}
	return schemaRoot.check(doc), nil
}

// schemaDocument is the #cloud-config document CheckSchema checks (and
// the test's jsonschema/v6 oracle with it), gunzipped and normalised; nil
// for an empty one.
func schemaDocument(data []byte) (*yaml.Node, error) {
	data, err := gunzip(data)
	if err != nil {
		return nil, err
	}
	return normalize(data)
}

// check finds what the schema root says about the loaded document doc.
func (root *schemaNode) check(doc *yaml.Node) []SchemaFinding {
	v := &schemaValue{lines: map[string]int{"": doc.Line}, objects: map[string]string{}}
	inst := v.convert(doc, nil)
	var out []SchemaFinding
	if verr := root.validate(inst, nil); verr != nil {
		for _, e := range leafErrors(verr) {
			msg := schemaMessage(e)
			if kind, ok := v.objects[strings.Join(e.loc, "\x00")]; ok {
				// Whatever the form wanted, a date or a set is none of them.
				msg = fmt.Sprintf("cloud-init's YAML loader reads this unquoted value as a %s, which no form here accepts: quote it", kind)
			}
			out = append(out, SchemaFinding{Path: fieldPath(e.loc), Line: v.line(e.loc), Message: msg})
		}
	}
	d := deprecationWalk{seen: map[string]bool{}}
	d.walk(root, inst, nil)
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
	return out
}

// leafErrors flattens a validation error to the causes a user can act on:
// for a oneOf/anyOf that no branch satisfies, the error itself (its
// branches' complaints would contradict each other), else its leaves.
func leafErrors(e *schemaError) []*schemaError {
	if len(e.causes) == 0 {
		return []*schemaError{e}
	}
	switch e.keyword {
	case "oneOf", "anyOf":
		// When only one form has the value's type (an object where a
		// string or an object is allowed), what is wrong inside it is
		// the useful finding; otherwise the choice itself is.
		var fits []*schemaError
		for _, c := range e.causes {
			if c.keyword != "type" {
				fits = append(fits, c)
			}
		}
		if len(fits) == 1 {
			return leafErrors(fits[0])
		}
		return []*schemaError{e}
	}
	var out []*schemaError
	for _, c := range e.causes {
		out = append(out, leafErrors(c)...)
	}
	return out
}

// schemaMessage words an error the way a cloud-config author reads it.
func schemaMessage(e *schemaError) string {
	msg := e.message
	switch e.keyword {
	case "oneOf", "anyOf":
		// Name what each branch wanted, briefly.
		var wants []string
		for _, c := range e.causes {
			if !slices.Contains(wants, c.message) {
				wants = append(wants, c.message)
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

// fieldPath writes an instance location as a field path: users[0].sudo.
func fieldPath(loc []string) string {
	var b strings.Builder
	for _, p := range loc {
		if _, err := strconv.Atoi(p); err == nil && b.Len() > 0 {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// schemaValue converts a normalized document into the values Python's
// jsonschema sees, remembering each location's line.
type schemaValue struct {
	lines   map[string]int
	objects map[string]string // locations of pyObjects, with their kind
}

// pyObject stands for a loaded value that is none of JSON's types (a
// date, a set): every "type" check fails on it, as in Python.
type pyObject struct{ kind, text string }

func (v *schemaValue) convert(n *yaml.Node, loc []string) any {
	v.lines[strings.Join(loc, "\x00")] = n.Line
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			child := append(slices.Clip(loc), k)
			v.lines[strings.Join(child, "\x00")] = n.Content[i].Line
			m[k] = v.convert(n.Content[i+1], child)
			// The key's line, not the value's, is where the finding is.
			v.lines[strings.Join(child, "\x00")] = n.Content[i].Line
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			s[i] = v.convert(c, append(slices.Clip(loc), strconv.Itoa(i)))
		}
		return s
	}
	tag, _ := yaml11.Tag(n)
	switch tag {
	case yaml11.Null:
		return nil
	case yaml11.Bool:
		return pyBool(n.Value)
	case yaml11.Int:
		if i, ok := pyInt(n.Value); ok {
			return json.Number(i.String())
		}
	case yaml11.Float:
		if f, ok := pyFloat(n.Value); ok {
			return f
		}
	case yaml11.Str, yaml11.Binary:
		// cloud-init's type checker takes bytes as strings.
		return n.Value
	}
	kind := strings.TrimPrefix(tag, "!!")
	if tag == yaml11.Timestamp {
		kind = "date and time"
		if _, err := time.Parse("2006-01-02", n.Value); err == nil {
			kind = "date"
		}
	}
	v.objects[strings.Join(loc, "\x00")] = kind
	return pyObject{kind, n.Value}
}

// line returns the line of a location, or of its nearest ancestor.
func (v *schemaValue) line(loc []string) int {
	for i := len(loc); i >= 0; i-- {
		if l, ok := v.lines[strings.Join(loc[:i], "\x00")]; ok {
			return l
		}
	}
	return 0
}

// deprecationWalk finds the "deprecated" annotations a value meets, with
// cloud-init's rules: every schema applied to the value counts, except
// that of a oneOf or anyOf only the first branch the value satisfies does.
type deprecationWalk struct {
	found []deprecation
	seen  map[string]bool
}

type deprecation struct {
	SchemaFinding
	loc []string
}

func (d *deprecationWalk) walk(n *schemaNode, v any, loc []string) {
	if n.ref != nil {
		// Draft 4: $ref replaces the rest of the schema.
		d.walk(n.ref, v, loc)
		return
	}
	if n.deprecated {
		d.note(n, loc)
	}
	for _, sub := range n.allOf {
		d.walk(sub, v, loc)
	}
	for _, choice := range [][]*schemaNode{n.oneOf, n.anyOf} {
		if i := slices.IndexFunc(choice, func(sub *schemaNode) bool { return sub.valid(v) }); i >= 0 {
			d.walk(choice[i], v, loc)
		}
	}
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			child := append(slices.Clip(loc), k)
			matched := false
			if p := n.property(k); p != nil {
				matched = true
				d.walk(p, t[k], child)
			}
			for _, pp := range n.patternProperties {
				if pp.re.MatchString(k) {
					matched = true
					d.walk(pp.node, t[k], child)
				}
			}
			if n.additionalProps != nil && !matched {
				d.walk(n.additionalProps, t[k], child)
			}
		}
	case []any:
		for i, x := range t {
			child := append(slices.Clip(loc), strconv.Itoa(i))
			switch {
			case n.items != nil:
				d.walk(n.items, x, child)
			case i < len(n.tupleItems):
				d.walk(n.tupleItems[i], x, child)
			case n.tupleItems != nil && n.additionalItems != nil:
				d.walk(n.additionalItems, x, child)
			}
		}
	}
}

// note records n's deprecation of the value at loc, once.
func (d *deprecationWalk) note(n *schemaNode, loc []string) {
	msg := "cloud-init marks this form as deprecated"
	if n.description != "" {
		msg = strings.TrimPrefix(n.description, "DEPRECATED: ")
	}
	key := strings.Join(loc, "\x00") + "\x01" + msg
	if !d.seen[key] {
		d.seen[key] = true
		d.found = append(d.found, deprecation{SchemaFinding{Path: fieldPath(loc), Message: msg, Deprecated: true}, slices.Clone(loc)})
	}
}
