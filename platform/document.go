package platform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	kjson "sigs.k8s.io/json"
	kyaml "sigs.k8s.io/yaml"

	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/spec"
)

// MaxDocumentSize bounds one object; Kubernetes itself stores at most
// 1.5 MiB per object.
const MaxDocumentSize = 16 << 20

// Format is how a document is written.
type Format string

// The formats Split recognises.
const (
	YAML Format = "yaml" // YAML or JSON, as kubectl reads it
	XML  Format = "xml"  // oVirt's REST representation
)

// Document is one object as read from a file.
type Document struct {
	// File is the file it came from ("" for standard input or memory).
	File string
	// Line is the document's first line in the file (1-based).
	Line   int
	Format Format
	// Raw is the document's text.
	Raw []byte
	// JSON is a YAML document converted to JSON as kubectl converts it
	// (sigs.k8s.io/yaml, YAML 1.1 scalars); nil for XML.
	JSON []byte
	// APIVersion, Kind, Name and Namespace identify a Kubernetes-style
	// object ("" when it has none).
	APIVersion, Kind, Name, Namespace string

	node *yaml.Node // the YAML document, for lines; nil when not YAML
	// refused are the problems that keep the document from being
	// decoded at all (lists or mappings past spec.MaxListEntries); Decode returns them.
	refused spec.Errors
	lines   map[string]int // lines of paths, for documents that are not YAML
	// within is where a Part is in its file's document ("items[0].",
	// "spec.template."), prefixed to the fields of its problems.
	within string
	// object names the object in its problems (Object).
	object string
}

// Object names the object for its problems, as --object picks it:
// KIND/NAME ("Pod/cirros-vm"), the kind alone when it has no name; for a
// Part without a kind of its own (a Deployment's pod template), its
// owner's; "" when the document has no kind.
func (d *Document) Object() string { return d.object }

// SetObject names the object for the problems found from now on, for
// documents a platform package identifies itself (oVirt's XML: "vm/myvm").
func (d *Document) SetObject(name string) { d.object = name }

// objectName is KIND/NAME, KIND, or "" without a kind.
func objectName(kind, name string) string {
	switch {
	case kind == "":
		return ""
	case name == "":
		return kind
	}
	return kind + "/" + name
}

// kindRE and nameRE find a document's kind and name in its text, for a
// problem that keeps it from being parsed (a syntax error): the kind at
// the top level, the name one level down (metadata's).
var (
	kindRE = lazyre.New(`(?m)^kind:[ \t]*["']?([A-Za-z0-9]+)["']?[ \t]*(?:#.*)?$`)
	nameRE = lazyre.New(`(?m)^metadata:[ \t]*\n(?:[ \t]+.*\n|[ \t]*\n)*?[ \t]+name:[ \t]*["']?([A-Za-z0-9._-]+)["']?[ \t]*(?:#.*)?$`)
)

// guessObject names the object whose text does not parse, from its text.
func guessObject(text []byte) string {
	k := kindRE.FindSubmatch(text)
	if k == nil {
		return ""
	}
	var name string
	if n := nameRE.FindSubmatch(text); n != nil {
		name = string(n[1])
	}
	return objectName(string(k[1]), name)
}

// SetLine records the line (1-based, within the document) of the field at
// path, for documents a platform package decodes itself (oVirt's XML).
func (d *Document) SetLine(path string, line int) {
	if d.lines == nil {
		d.lines = map[string]int{}
	}
	d.lines[path] = d.Line + line - 1
}

// ErrorPositioner finds the line of an object path in documents that are
// not YAML (oVirt's XML).
type ErrorPositioner interface{ Line(path string) int }

// Split splits a file into its documents: YAML documents separated by
// "---" lines (JSON is YAML), or one XML document. Empty documents are
// dropped.
func Split(file string, data []byte) ([]*Document, error) {
	if len(data) > MaxDocumentSize*4 {
		return nil, fmt.Errorf("%s: %d bytes; the limit is %d", file, len(data), MaxDocumentSize*4)
	}
	if t := bytes.TrimLeft(data, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '<' {
		return []*Document{{File: file, Line: 1, Format: XML, Raw: data}}, nil
	}
	var docs []*Document
	line, start := 1, 0
	startLine := 1
	flush := func(end int) error {
		chunk := data[start:end]
		if len(bytes.TrimSpace(stripComments(chunk))) == 0 {
			return nil
		}
		d, err := parseYAML(file, startLine, chunk)
		if err != nil {
			return err
		}
		docs = append(docs, d)
		return nil
	}
	for i := 0; i < len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		next := len(data)
		if end >= 0 {
			next = i + end + 1
		}
		l := bytes.TrimRight(data[i:next], "\r\n")
		if bytes.Equal(l, []byte("---")) || bytes.HasPrefix(l, []byte("--- ")) || bytes.Equal(l, []byte("...")) {
			if err := flush(i); err != nil {
				return nil, err
			}
			start, startLine = next, line+1
		}
		line++
		i = next
	}
	if err := flush(len(data)); err != nil {
		return nil, err
	}
	return docs, nil
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, t...)
		}
	}
	return out
}

func parseYAML(file string, line int, chunk []byte) (*Document, error) {
	d := &Document{File: file, Line: line, Format: YAML, Raw: chunk}
	var n yaml.Node
	if err := yaml.Unmarshal(chunk, &n); err != nil {
		return nil, d.syntaxError(err)
	}
	d.node = &n
	// sigs.k8s.io/yaml expands aliases into its JSON: bound them first.
	if err := yamlbound.Check(&n, yamlbound.Limits{Bytes: MaxDocumentSize}); err != nil {
		return nil, d.boundError(err)
	}
	// Converting and checking an object goes over its lists, some
	// against each other (volumes and disks): bound them as a spec's are,
	// before any of that work. The document is still recognised by its
	// kind, so that the refusal is the object's, naming its fields.
	if d.refused = d.longCollections(&n); len(d.refused) > 0 {
		d.identify()
		for _, e := range d.refused {
			e.Object = d.object
		}
		return d, nil
	}
	j, err := kyaml.YAMLToJSON(chunk)
	if err != nil {
		return nil, d.syntaxError(err)
	}
	d.JSON = j
	var meta objectMeta
	if bytes.HasPrefix(bytes.TrimSpace(j), []byte("{")) {
		json.Unmarshal(j, &meta) // best effort: Decode reports type problems
	}
	d.APIVersion, d.Kind = meta.APIVersion, meta.Kind
	d.Name, d.Namespace = meta.Metadata.Name, meta.Metadata.Namespace
	d.object = objectName(d.Kind, d.Name)
	return d, nil
}

var yamlLineRE = lazyre.New(`^(?:yaml: )?line (\d+): (.*)$`)

func (d *Document) syntaxError(err error) error {
	msg := err.Error()
	line := 0
	if m := yamlLineRE.FindStringSubmatch(strings.TrimPrefix(msg, "error converting YAML to JSON: ")); m != nil {
		n, _ := strconv.Atoi(m[1])
		line, msg = d.Line+n-1, m[2]
	}
	return spec.Errors{{File: d.File, Line: line, Object: guessObject(d.Raw), Message: "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ") + " (kubectl cannot read the file either)"}}
}

// identify sets the object's apiVersion, kind, name and namespace from
// its YAML tree, for a document never converted to JSON.
func (d *Document) identify() {
	top := d.node.Content
	if len(top) == 0 {
		return
	}
	value := func(m *yaml.Node, key string) *yaml.Node {
		for i := 0; m != nil && m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		return nil
	}
	text := func(n *yaml.Node) string {
		if n == nil || n.Kind != yaml.ScalarNode {
			return ""
		}
		return n.Value
	}
	meta := value(top[0], "metadata")
	d.APIVersion, d.Kind = text(value(top[0], "apiVersion")), text(value(top[0], "kind"))
	d.Name, d.Namespace = text(value(meta, "name")), text(value(meta, "namespace"))
	d.object = objectName(d.Kind, d.Name)
}

// longCollections returns spec.LongCollections' errors for the object
// (every list or mapping past a spec's limit), placed in its file.
func (d *Document) longCollections(n *yaml.Node) spec.Errors {
	es := spec.LongCollections(n)
	for _, e := range es {
		e.File, e.Line = d.File, d.Line+e.Line-1
	}
	return es
}

// boundError is yamlbound.Check's refusal on the field where the
// expansion crossed the limit.
func (d *Document) boundError(err error) error {
	var be *yamlbound.Error
	if !errors.As(err, &be) {
		return d.syntaxError(err)
	}
	return spec.Errors{{File: d.File, Line: d.Line + be.Line - 1, Field: be.Path, Object: guessObject(d.Raw),
		Message: fmt.Sprintf("aliases expand the object past %d bytes, the limit of one object; write it out without anchors and aliases, or make it smaller", be.Limit)}}
}

// Where names the object's field at path for a message: "vm.yaml:12:
// spec.template.spec.hostname".
func (d *Document) Where(path string) string {
	e := d.Error(path, "")
	e.Object = ""
	return strings.TrimSuffix(e.Error(), ": ")
}

// Error makes a problem with the object's field at path, with the file
// and the line of the field when it can be found, naming the object.
func (d *Document) Error(path, msg string) *spec.FieldError {
	return &spec.FieldError{File: d.File, Line: d.LineOf(path), Field: d.field(path), Message: msg, Object: d.object}
}

// LineOf returns the line of the field at path (as the Field of errors
// spells it: spec.volumes[1].name, metadata.annotations["a/b"]), or of its
// nearest ancestor present in the document; 0 when unknown.
func (d *Document) LineOf(path string) int {
	if d.lines != nil {
		for p := path; p != ""; p = parent(p) {
			if l, ok := d.lines[p]; ok {
				return l
			}
		}
	}
	line, _ := d.find(path)
	if line == 0 {
		return 0
	}
	return d.Line + line - 1
}

// find walks the YAML document along path and returns the line (within
// the document) of the deepest field found, and the field's value when
// the whole path was found.
func (d *Document) find(path string) (int, *yaml.Node) {
	if d.node == nil || len(d.node.Content) == 0 {
		return 0, nil
	}
	n := d.node.Content[0]
	best := n.Line
	for _, seg := range splitPath(path) {
		var next *yaml.Node
		switch {
		case n.Kind == yaml.MappingNode && !seg.index:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg.key {
					best = n.Content[i].Line
					next = n.Content[i+1]
				}
			}
		case n.Kind == yaml.SequenceNode && seg.index:
			if seg.n < len(n.Content) {
				next = n.Content[seg.n]
				best = next.Line
			}
		}
		if next == nil {
			return best, nil
		}
		n = next
	}
	return best, n
}

// TextPosition maps a position in the string value of the field at path
// (line and column, 1-based, as a parser of that text reports them: the
// JSON of an annotation, say) to the file's line and column, when the
// value is written so that its lines are the file's: a literal block
// (|), a plain scalar on one line, or an XML element's text (whose first
// line's column is unknown: fileCol is 0). ok is false otherwise (a quoted
// or folded value), and the caller names the field's own line.
func (d *Document) TextPosition(path string, line, col int) (fileLine, fileCol int, ok bool) {
	if line < 1 {
		return 0, 0, false
	}
	if d.Format == XML {
		// An element's text starts on the line its start tag ends, and
		// keeps its lines; only the first line's column is unknown.
		l, ok := d.LineOfKnown(path)
		if !ok {
			return 0, 0, false
		}
		if line > 1 {
			fileCol = col
		}
		return l + line - 1, fileCol, true
	}
	_, v := d.find(path)
	if v == nil || v.Kind != yaml.ScalarNode {
		return 0, 0, false
	}
	switch {
	case v.Style == yaml.LiteralStyle:
		// The text starts on the line after the indicator, at the block's
		// indentation (that of its first non-empty line).
		lines := bytes.Split(d.Raw, []byte("\n"))
		indent := 0
		for i := v.Line; i < len(lines); i++ {
			if t := bytes.TrimLeft(lines[i], " "); len(bytes.TrimSpace(t)) > 0 {
				indent = len(lines[i]) - len(t)
				break
			}
		}
		return d.Line + v.Line - 1 + line, indent + col, true
	case v.Style == 0 && line == 1 && !strings.Contains(v.Value, "\n"):
		return d.Line + v.Line - 1, v.Column + col - 1, true
	}
	return 0, 0, false
}

// LineOfKnown returns the line SetLine recorded for path.
func (d *Document) LineOfKnown(path string) (int, bool) {
	l, ok := d.lines[path]
	return l, ok
}

// parent is path without its last segment.
func parent(path string) string {
	if i := strings.LastIndexAny(path, ".["); i > 0 {
		return path[:i]
	}
	return ""
}

type pathSeg struct {
	key   string
	index bool
	n     int
}

// splitPath splits spec.volumes[1].cloudInitNoCloud and
// metadata.annotations["kubevirt.io/ignitiondata"] into segments.
func splitPath(p string) []pathSeg {
	var segs []pathSeg
	for p != "" {
		switch {
		case p[0] == '.':
			p = p[1:]
		case strings.HasPrefix(p, `["`):
			end := strings.Index(p, `"]`)
			if end < 0 {
				return segs
			}
			k, err := strconv.Unquote(p[1 : end+1])
			if err != nil {
				return segs
			}
			segs = append(segs, pathSeg{key: k})
			p = p[end+2:]
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return segs
			}
			n, err := strconv.Atoi(p[1:end])
			if err != nil {
				return segs
			}
			segs = append(segs, pathSeg{index: true, n: n})
			p = p[end+1:]
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			segs = append(segs, pathSeg{key: p[:end]})
			p = p[end:]
		}
	}
	return segs
}

// Decode decodes the document into v (a platform's Go API type) strictly,
// as the API server's strict field validation does: an unknown or
// duplicated field, or a value of the wrong type, is an error naming its
// path and line. Every such problem is returned at once.
func (d *Document) Decode(v any) error {
	if len(d.refused) > 0 {
		return d.refused
	}
	if d.JSON == nil {
		return spec.Errors{d.Error("", "not a YAML or JSON document")}
	}
	strict, err := kjson.UnmarshalStrict(d.JSON, v)
	var es spec.Errors
	if err != nil {
		es = append(es, d.jsonError(err))
	}
	seen := map[string]bool{}
	if d.node != nil && len(d.node.Content) > 0 {
		// YAML to JSON keeps the last of two equal keys silently; the API
		// server's strict validation refuses them, as here.
		for _, p := range duplicateKeys(d.node.Content[0], "", nil, 0) {
			seen[d.field(p)] = true
			es = append(es, d.Error(p, "given twice"))
		}
	}
	for _, s := range strict {
		e := d.strictError(s)
		if seen[e.Field] {
			continue
		}
		seen[e.Field] = true
		es = append(es, e)
	}
	if err == nil {
		for _, f := range unknownFields(d.JSON, reflect.TypeOf(v)) {
			if !seen[d.field(f)] {
				es = append(es, d.Error(f, "unknown field"))
			}
		}
	}
	if len(es) > 0 {
		return es
	}
	return nil
}

var strictRE = lazyre.New(`^(unknown|duplicate) field "(.*)"$`)

func (d *Document) strictError(err error) *spec.FieldError {
	if m := strictRE.FindStringSubmatch(err.Error()); m != nil {
		if m[1] == "unknown" {
			return d.Error(m[2], "unknown field")
		}
		return d.Error(m[2], "given twice")
	}
	return d.Error("", err.Error())
}

func (d *Document) jsonError(err error) *spec.FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return d.Error(d.indexPath(te.Field, te.Value), fmt.Sprintf("want %s, not a JSON %s", te.Type, te.Value))
	}
	msg := err.Error()
	if i := strings.Index(msg, "Go struct field "); i >= 0 {
		// sigs.k8s.io/json: "json: cannot unmarshal X into Go struct field T.a.b of type Y"
		rest := msg[i+len("Go struct field "):]
		field, typ, _ := strings.Cut(rest, " of type ")
		if _, after, ok := strings.Cut(field, "."); ok {
			field = after
		}
		return d.Error(field, fmt.Sprintf("wrong type (want %s): %s", typ, msg[:i]))
	}
	return d.Error("", strings.TrimPrefix(msg, "json: "))
}

// indexPath puts into path, a JSON decoder's field path that has no list
// indices (spec.files.permissions), the index of the first item whose
// value at the rest of the path is of the JSON kind the decoder refused
// (spec.files[2].permissions): the field it means, and so its line rather
// than the list's. path stays as it is when no item fits.
func (d *Document) indexPath(path, kind string) string {
	if d.node == nil || len(d.node.Content) == 0 {
		return path
	}
	if p, ok := indexIn(d.node.Content[0], splitPath(path), "", kind); ok {
		return p
	}
	return path
}

func indexIn(n *yaml.Node, segs []pathSeg, at, kind string) (string, bool) {
	if len(segs) == 0 {
		return at, jsonKind(n) == kind
	}
	seg := segs[0]
	switch {
	case n.Kind == yaml.SequenceNode && !seg.index:
		for i, item := range n.Content {
			if p, ok := indexIn(item, segs, fmt.Sprintf("%s[%d]", at, i), kind); ok {
				return p, true
			}
		}
	case n.Kind == yaml.SequenceNode && seg.n < len(n.Content):
		return indexIn(n.Content[seg.n], segs[1:], fmt.Sprintf("%s[%d]", at, seg.n), kind)
	case n.Kind == yaml.MappingNode && !seg.index:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == seg.key {
				return indexIn(n.Content[i+1], segs[1:], FieldPath(at, seg.key), kind)
			}
		}
	}
	return "", false
}

// jsonKind is the JSON kind sigs.k8s.io/yaml makes of a YAML node, as
// encoding/json's UnmarshalTypeError.Value names it.
func jsonKind(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.SequenceNode:
		return "array"
	case n.Kind == yaml.MappingNode:
		return "object"
	case n.Tag == "!!int" || n.Tag == "!!float":
		return "number"
	case n.Tag == "!!bool":
		return "bool"
	case n.Tag == "!!str":
		return "string"
	}
	return ""
}

// duplicateKeys returns the paths of mapping keys given twice in n.
func duplicateKeys(n *yaml.Node, path string, out []string, depth int) []string {
	if depth > 100 {
		return out
	}
	switch n.Kind {
	case yaml.MappingNode:
		keys := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			p := FieldPath(path, k)
			if keys[k] {
				out = append(out, p)
			}
			keys[k] = true
			out = duplicateKeys(n.Content[i+1], p, out, depth+1)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			out = duplicateKeys(c, fmt.Sprintf("%s[%d]", path, i), out, depth+1)
		}
	}
	return out
}

// FieldPath appends key k to path as errors spell it: a.b, or a["k/x"]
// for a key that is not a plain name.
func FieldPath(path, k string) string {
	plain := k != ""
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return fmt.Sprintf("%s[%q]", path, k)
	case path == "":
		return k
	}
	return path + "." + k
}

// IsReferenced reports whether doc is a kind objects refer to, that a
// Resolver finds: a Secret or a ConfigMap.
func IsReferenced(doc *Document) bool {
	return doc.APIVersion == "v1" && (doc.Kind == "Secret" || doc.Kind == "ConfigMap")
}
