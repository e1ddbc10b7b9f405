package cloudinit

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yaml11"
)

// SchemaVersion is the cloud-init release whose cloud-config schema
// CheckSchema applies (schema/README.md says where it comes from).
const SchemaVersion = "22.4.2"

//go:embed schema/schema-cloud-config-v1.json
var schemaJSON []byte

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
//
// It returns an error, and no findings, when data is not a #cloud-config
// document cloud-init can load (CheckUserData says why).
func CheckSchema(data []byte) ([]SchemaFinding, error) {
	data, err := gunzip(data)
	if err != nil {
		return nil, err
	}
	doc, err := normalize(data)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, nil
	}
	s, err := loadSchema()
	if err != nil {
		return nil, err
	}
	v := &schemaValue{lines: map[string]int{"": doc.Line}, objects: map[string]string{}}
	inst := v.convert(doc, nil)
	var out []SchemaFinding
	if verr, ok := s.compiled.Validate(inst).(*jsonschema.ValidationError); ok {
		for _, e := range leafErrors(verr) {
			loc := e.InstanceLocation
			msg := schemaMessage(e)
			if kind, ok := v.objects[strings.Join(loc, "\x00")]; ok && keyword(e) == "type" {
				msg = fmt.Sprintf("cloud-init's YAML loader reads this unquoted value as a %s, which no form here accepts: quote it", kind)
			}
			out = append(out, SchemaFinding{Path: fieldPath(loc), Line: v.line(loc), Message: msg})
		}
	} else if verr != nil {
		return nil, verr
	}
	d := deprecationWalk{s: s, seen: map[string]bool{}}
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

// cloudSchema is the compiled schema and its raw JSON, which the
// deprecation walk follows.
type cloudSchema struct {
	compiler *jsonschema.Compiler
	compiled *jsonschema.Schema
	root     map[string]any

	mu  sync.Mutex
	sub map[string]*jsonschema.Schema // compiled subschemas by JSON pointer
}

const schemaURL = "https://vminit.dev/cloud-init/schema-cloud-config-v1.json"

var loadSchema = sync.OnceValues(func() (*cloudSchema, error) {
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
	if err := c.AddResource(schemaURL, raw); err != nil {
		return nil, fmt.Errorf("cloud-init schema: %w", err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("cloud-init schema: %w", err)
	}
	root, _ := raw.(map[string]any)
	return &cloudSchema{compiler: c, compiled: compiled, root: root, sub: map[string]*jsonschema.Schema{}}, nil
})

// valid reports whether v satisfies the subschema at the JSON pointer ptr.
func (s *cloudSchema) valid(ptr string, v any) bool {
	s.mu.Lock()
	sch, ok := s.sub[ptr]
	if !ok {
		var err error
		if sch, err = s.compiler.Compile(schemaURL + "#" + ptr); err != nil {
			sch = nil
		}
		s.sub[ptr] = sch
	}
	s.mu.Unlock()
	return sch != nil && sch.Validate(v) == nil
}

// leafErrors flattens a validation error to the causes a user can act on:
// for a oneOf/anyOf that no branch satisfies, the error itself (its
// branches' complaints would contradict each other), else its leaves.
func leafErrors(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	switch keyword(e) {
	case "oneOf", "anyOf":
		// When only one form has the value's type (an object where a
		// string or an object is allowed), what is wrong inside it is
		// the useful finding; otherwise the choice itself is.
		var fits []*jsonschema.ValidationError
		for _, c := range e.Causes {
			if keyword(c) != "type" {
				fits = append(fits, c)
			}
		}
		if len(fits) == 1 {
			return leafErrors(fits[0])
		}
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leafErrors(c)...)
	}
	return out
}

var english = message.NewPrinter(language.English)

// keyword is the schema keyword that failed, e.g. "type" or "oneOf".
func keyword(e *jsonschema.ValidationError) string {
	if e.ErrorKind == nil {
		return ""
	}
	p := e.ErrorKind.KeywordPath()
	if len(p) == 0 {
		return ""
	}
	return p[len(p)-1]
}

// schemaMessage words an error the way a cloud-config author reads it.
func schemaMessage(e *jsonschema.ValidationError) string {
	msg := e.ErrorKind.LocalizedString(english)
	switch keyword(e) {
	case "oneOf", "anyOf":
		// Name what each branch wanted, briefly.
		var wants []string
		for _, c := range e.Causes {
			if w := c.ErrorKind.LocalizedString(english); !slices.Contains(wants, w) {
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
type pyObject struct{ kind string }

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
	return pyObject{kind}
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
	s     *cloudSchema
	found []deprecation
	seen  map[string]bool
	depth int
}

type deprecation struct {
	SchemaFinding
	loc []string
}

func (d *deprecationWalk) walk(sch map[string]any, ptr string, v any, loc []string) {
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
			d.found = append(d.found, deprecation{SchemaFinding{Path: fieldPath(loc), Message: msg, Deprecated: true}, slices.Clone(loc)})
		}
	}
	for i, sub := range list(sch["allOf"]) {
		d.walk(sub, fmt.Sprintf("%s/allOf/%d", ptr, i), v, loc)
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		for i, sub := range list(sch[kw]) {
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
func (d *deprecationWalk) resolve(ref string) (map[string]any, string) {
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

func list(v any) []map[string]any {
	items, _ := v.([]any)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		m, _ := it.(map[string]any)
		out = append(out, m)
	}
	return out
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
