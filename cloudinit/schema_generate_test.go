package cloudinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	_ "embed"

	"github.com/vminit/vminit/internal/testing/gentest"
)

// annotation reports whether k is a keyword that says nothing about
// validity: JSON Schema's own, cloud-init's documentation ones ("label",
// "hidden"), and prefixItems, a Draft 2020-12 keyword cloud-init 22.4's
// schema uses that its Draft 4 validator ignores. (Switches, not maps:
// a package-level map is built at init, in every vminit process.)
func annotation(k string) bool {
	switch k {
	case "$schema", "$defs", "definitions", "description", "default", "title",
		"examples", "$comment", "label", "hidden", "prefixItems":
		return true
	}
	return false
}

// formatAsserted reports whether cloud-init's validator checks a format,
// and known whether this one knows it. cloud-init passes FormatChecker(),
// whose "uri" and "hostname" checks need Python packages Debian's
// cloud-init does not depend on, so they accept anything.
func formatAsserted(format string) (asserted, known bool) {
	switch format {
	case "date":
		return true, true
	case "uri", "hostname":
		return false, true
	}
	return false, false
}

// typeOrder is the order jsonschema/v6 names wanted types in, kept so
// that messages read as they always have.
var typeOrder = []string{"null", "boolean", "number", "integer", "string", "array", "object"}

// schemaJSON is cloud-init's schema, from which schema_tree.go is
// generated.
//
//go:embed schema/schema-cloud-config-v1.json
var schemaJSON []byte

// schemaCompiler turns the decoded JSON into schemaNodes, each pointer
// compiled once however many $refs reach it.
type schemaCompiler struct {
	root  any
	nodes map[string]*schemaNode
	ptrs  map[*schemaNode]string // each node's JSON pointer, for errors
	// withRef are the nodes with a $ref, in the order met, and refs
	// their targets: resolved once the node that holds them is compiled.
	withRef []*schemaNode
	refs    map[*schemaNode]string
	errs    []string
}

func compileSchema(data []byte) (*schemaNode, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("cloud-init schema: %w", err)
	}
	c := &schemaCompiler{root: root, nodes: map[string]*schemaNode{}, ptrs: map[*schemaNode]string{}, refs: map[*schemaNode]string{}}
	top := c.node(root, "")
	// Resolving a $ref compiles its target, which may hold more of them.
	for i := 0; i < len(c.withRef); i++ {
		c.resolve(c.withRef[i])
	}
	if len(c.errs) == 0 {
		c.findLoops(top, map[*schemaNode]bool{}, map[*schemaNode]bool{})
	}
	if len(c.errs) > 0 {
		return nil, errors.New("cloud-init schema: " + strings.Join(c.errs, "; "))
	}
	return top, nil
}

// pattern is expr, which must be a Go regular expression: the validator
// compiles it on first use.
func (c *schemaCompiler) pattern(expr, ptr string) *schemaPattern {
	if _, err := regexp.Compile(expr); err != nil {
		c.fail(ptr, "%v", err)
	}
	return &schemaPattern{expr: expr}
}

func (c *schemaCompiler) fail(ptr, format string, args ...any) {
	c.errs = append(c.errs, "#"+ptr+": "+fmt.Sprintf(format, args...))
}

// node compiles the schema object raw found at ptr.
func (c *schemaCompiler) node(raw any, ptr string) *schemaNode {
	if n, ok := c.nodes[ptr]; ok {
		return n
	}
	n := &schemaNode{}
	c.nodes[ptr] = n
	c.ptrs[n] = ptr
	m, ok := raw.(map[string]any)
	if !ok {
		c.fail(ptr, "a schema must be an object, not %T", raw)
		return n
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		c.keyword(n, k, m[k], ptr+"/"+escapePointer(k))
	}
	return n
}

// keyword compiles one keyword of n; the value v is at ptr.
func (c *schemaCompiler) keyword(n *schemaNode, k string, v any, ptr string) {
	switch k {
	case "$ref":
		c.refs[n] = c.str(v, ptr)
		c.withRef = append(c.withRef, n)
	case "type":
		c.types(n, v, ptr)
	case "enum":
		if n.enum, _ = v.([]any); n.enum == nil {
			c.fail(ptr, "enum must be an array")
		}
	case "format":
		format := c.str(v, ptr)
		asserted, known := formatAsserted(format)
		if !known {
			c.fail(ptr, "format %q is not implemented", format)
		}
		if asserted {
			n.format = format
		}
	case "pattern":
		n.pattern = c.pattern(c.str(v, ptr), ptr)
	case "minimum":
		num, _ := v.(json.Number)
		if _, ok := new(big.Rat).SetString(string(num)); !ok {
			c.fail(ptr, "minimum must be a number")
		}
		n.minimum = string(num)
	case "properties":
		obj := c.object(v, ptr)
		for _, name := range slices.Sorted(maps.Keys(obj)) {
			n.properties = append(n.properties, schemaProperty{name, c.node(obj[name], ptr+"/"+escapePointer(name))})
		}
	case "patternProperties":
		obj := c.object(v, ptr)
		for _, pat := range slices.Sorted(maps.Keys(obj)) {
			n.patternProperties = append(n.patternProperties, schemaPatternProperty{c.pattern(pat, ptr), c.node(obj[pat], ptr+"/"+escapePointer(pat))})
		}
	case "additionalProperties":
		n.additionalProps, n.noAdditionalProps = c.schemaOrFalse(v, ptr)
	case "additionalItems":
		n.additionalItems, n.noAdditionalItems = c.schemaOrFalse(v, ptr)
	case "items":
		if list, ok := v.([]any); ok {
			n.tupleItems = c.list(list, ptr)
		} else {
			n.items = c.node(v, ptr)
		}
	case "minProperties":
		n.minProperties = c.count(v, ptr)
	case "minItems":
		n.minItems = c.count(v, ptr)
	case "maxItems":
		n.maxItems, n.hasMaxItems = c.count(v, ptr), true
	case "uniqueItems":
		n.uniqueItems = c.bool(v, ptr)
	case "required":
		for i, name := range c.array(v, ptr) {
			n.required = append(n.required, c.str(name, ptr+"/"+strconv.Itoa(i)))
		}
	case "allOf":
		n.allOf = c.list(c.array(v, ptr), ptr)
	case "anyOf":
		n.anyOf = c.list(c.array(v, ptr), ptr)
	case "oneOf":
		n.oneOf = c.list(c.array(v, ptr), ptr)
	case "deprecated":
		n.deprecated = c.bool(v, ptr)
	case "description":
		n.description = c.str(v, ptr)
	default:
		if !annotation(k) {
			c.fail(ptr, "keyword %q is not implemented by vminit's validator", k)
		}
	}
}

func (c *schemaCompiler) types(n *schemaNode, v any, ptr string) {
	names, ok := v.([]any)
	if !ok {
		names = []any{v}
	}
	for _, name := range names {
		s := c.str(name, ptr)
		if !slices.Contains(typeOrder, s) {
			c.fail(ptr, "unknown type %q", s)
		}
		if !slices.Contains(n.types, s) {
			n.types = append(n.types, s)
		}
	}
	slices.SortFunc(n.types, func(a, b string) int { return slices.Index(typeOrder, a) - slices.Index(typeOrder, b) })
}

// resolve points n at the target of its $ref, a pointer into this
// document ("#/$defs/name").
func (c *schemaCompiler) resolve(n *schemaNode) {
	ref := c.refs[n]
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		c.fail(c.ptrs[n], "$ref %q is not in this document", ref)
		return
	}
	cur := c.root
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, _ := cur.(map[string]any)
		if cur, ok = m[tok]; !ok {
			c.fail(c.ptrs[n], "$ref %q leads nowhere", ref)
			return
		}
	}
	n.ref = c.node(cur, ptr)
}

// findLoops refuses a schema that applies itself to the same value again
// through $ref, allOf, anyOf or oneOf without going down into it: its
// validation would never end. onPath holds the nodes applied to the value
// on the way to n; done, those already known to be free of such loops.
func (c *schemaCompiler) findLoops(n *schemaNode, onPath, done map[*schemaNode]bool) {
	if onPath[n] {
		c.fail(c.ptrs[n], "applies itself to the same value again, endlessly")
		return
	}
	if done[n] {
		return
	}
	onPath[n] = true
	for _, sub := range n.sameValue() {
		c.findLoops(sub, onPath, done)
	}
	delete(onPath, n)
	done[n] = true
	for _, sub := range n.children() {
		c.findLoops(sub, map[*schemaNode]bool{}, done)
	}
}

// sameValue are the schemas n applies to the value n is applied to.
func (n *schemaNode) sameValue() []*schemaNode {
	same := slices.Concat(n.allOf, n.anyOf, n.oneOf)
	if n.ref != nil {
		same = append(same, n.ref)
	}
	return same
}

// children are the schemas n applies to the members of its value.
func (n *schemaNode) children() []*schemaNode {
	var out []*schemaNode
	for _, p := range n.properties {
		out = append(out, p.node)
	}
	for _, pp := range n.patternProperties {
		out = append(out, pp.node)
	}
	out = append(out, n.tupleItems...)
	for _, sub := range []*schemaNode{n.additionalProps, n.items, n.additionalItems} {
		if sub != nil {
			out = append(out, sub)
		}
	}
	return out
}

func (c *schemaCompiler) schemaOrFalse(v any, ptr string) (*schemaNode, bool) {
	if b, ok := v.(bool); ok {
		return nil, !b
	}
	return c.node(v, ptr), false
}

func (c *schemaCompiler) list(raw []any, ptr string) []*schemaNode {
	out := make([]*schemaNode, len(raw))
	for i, sub := range raw {
		out[i] = c.node(sub, ptr+"/"+strconv.Itoa(i))
	}
	return out
}

func (c *schemaCompiler) str(v any, ptr string) string {
	s, ok := v.(string)
	if !ok {
		c.fail(ptr, "must be a string")
	}
	return s
}

func (c *schemaCompiler) bool(v any, ptr string) bool {
	b, ok := v.(bool)
	if !ok {
		c.fail(ptr, "must be a boolean")
	}
	return b
}

func (c *schemaCompiler) count(v any, ptr string) int {
	num, _ := v.(json.Number)
	i, err := strconv.Atoi(string(num))
	if err != nil || i < 0 {
		c.fail(ptr, "must be a non-negative integer")
	}
	return i
}

func (c *schemaCompiler) array(v any, ptr string) []any {
	a, ok := v.([]any)
	if !ok {
		c.fail(ptr, "must be an array")
	}
	return a
}

func (c *schemaCompiler) object(v any, ptr string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		c.fail(ptr, "must be an object")
	}
	return m
}

// escapePointer writes s as a JSON pointer token. (ReplaceAll returns s
// itself, unallocated, when there is nothing to replace: the common case.)
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

var writeSchemaTree = flag.String("write-schema-tree", "", "write what schema/schema-cloud-config-v1.json compiles to into this file (make generate: scripts/generate.sh)")

// TestSchemaTreeIsGenerated: schema_tree.go is what the compiler makes of
// the schema's JSON, so a new schema file cannot be left unapplied, and a
// keyword the validator lacks fails here. It is also the tree's generator:
// `make generate` (scripts/generate.sh) runs it with -write-schema-tree,
// and so regenerates the tree with the repository's other generated files.
func TestSchemaTreeIsGenerated(t *testing.T) {
	root, err := compileSchema(schemaJSON)
	if err != nil {
		t.Fatal(err)
	}
	src, err := emitSchemaTree(root)
	if err != nil {
		t.Fatal(err)
	}
	gentest.Check(t, *writeSchemaTree, "schema_tree.go", src, "schema-cloud-config-v1.json compiled")
}

// emitSchemaTree writes the compiled tree as Go: one variable per node
// (schemaRoot, then sn1, sn2… in the order a walk meets them), each field
// given only when it is not its zero value.
func emitSchemaTree(root *schemaNode) ([]byte, error) {
	e := &treeEmitter{names: map[*schemaNode]string{}, onPath: map[*schemaNode]bool{}, done: map[*schemaNode]bool{}}
	e.name(root)
	e.emit(root)
	if e.err != nil {
		return nil, e.err
	}
	header := schemaTreeHeader
	if bytes.Contains(e.b.Bytes(), []byte("json.Number(")) {
		header += "import \"encoding/json\"\n\n"
	}
	return format.Source(append([]byte(header), e.b.Bytes()...))
}

// schemaTreeHeader says, in the one line Go's tools read, that the file
// is generated; the schema's provenance and licence follow, apart from
// the package clause so that they are not taken for the package's doc.
const schemaTreeHeader = `// Code generated by TestSchemaTreeIsGenerated (make generate) from schema/schema-cloud-config-v1.json. DO NOT EDIT.

// The schema is cloud-init 22.4.2's, under the Apache License 2.0
// (schema/README.md).

package cloudinit

`

type treeEmitter struct {
	b      bytes.Buffer
	names  map[*schemaNode]string
	onPath map[*schemaNode]bool
	done   map[*schemaNode]bool
	err    error
}

// name is n's variable, given on first meeting.
func (e *treeEmitter) name(n *schemaNode) string {
	if name, ok := e.names[n]; ok {
		return name
	}
	name := "schemaRoot"
	if len(e.names) > 0 {
		name = fmt.Sprintf("sn%d", len(e.names))
	}
	e.names[n] = name
	return name
}

// emit writes n's variable after those of the nodes it points to. A node
// met again on its own path would be a schema that contains itself, which
// Go's package variables cannot (an initialisation cycle).
func (e *treeEmitter) emit(n *schemaNode) {
	if e.onPath[n] {
		e.err = fmt.Errorf("the schema contains itself at %s: a generated tree cannot hold it", e.names[n])
		return
	}
	if e.done[n] {
		return
	}
	e.onPath[n] = true
	subs := append(n.sameValue(), n.children()...)
	for _, sub := range subs {
		e.name(sub)
	}
	for _, sub := range subs {
		e.emit(sub)
	}
	delete(e.onPath, n)
	e.done[n] = true
	fmt.Fprintf(&e.b, "var %s = schemaNode{%s}\n\n", e.names[n], strings.Join(e.fields(n), ", "))
}

func (e *treeEmitter) fields(n *schemaNode) []string {
	var f []string
	add := func(ok bool, name, value string) {
		if ok {
			f = append(f, name+": "+value)
		}
	}
	add(n.ref != nil, "ref", "&"+e.names[n.ref])
	add(n.types != nil, "types", fmt.Sprintf("%#v", n.types))
	add(n.enum != nil, "enum", goValues(n.enum))
	add(n.format != "", "format", strconv.Quote(n.format))
	add(n.pattern != nil, "pattern", fmt.Sprintf("&schemaPattern{expr: %q}", n.pattern))
	add(n.minimum != "", "minimum", strconv.Quote(n.minimum))
	add(n.properties != nil, "properties", e.properties(n.properties))
	add(n.patternProperties != nil, "patternProperties", e.patternProperties(n.patternProperties))
	add(n.additionalProps != nil, "additionalProps", "&"+e.names[n.additionalProps])
	add(n.noAdditionalProps, "noAdditionalProps", "true")
	add(n.minProperties != 0, "minProperties", strconv.Itoa(n.minProperties))
	add(n.required != nil, "required", fmt.Sprintf("%#v", n.required))
	add(n.items != nil, "items", "&"+e.names[n.items])
	add(n.tupleItems != nil, "tupleItems", e.nodes(n.tupleItems))
	add(n.additionalItems != nil, "additionalItems", "&"+e.names[n.additionalItems])
	add(n.noAdditionalItems, "noAdditionalItems", "true")
	add(n.minItems != 0, "minItems", strconv.Itoa(n.minItems))
	add(n.hasMaxItems, "maxItems", strconv.Itoa(n.maxItems))
	add(n.hasMaxItems, "hasMaxItems", "true")
	add(n.uniqueItems, "uniqueItems", "true")
	add(n.allOf != nil, "allOf", e.nodes(n.allOf))
	add(n.anyOf != nil, "anyOf", e.nodes(n.anyOf))
	add(n.oneOf != nil, "oneOf", e.nodes(n.oneOf))
	add(n.deprecated, "deprecated", "true")
	add(n.deprecated && n.description != "", "description", strconv.Quote(n.description))
	return f
}

func (e *treeEmitter) nodes(ns []*schemaNode) string {
	var b strings.Builder
	b.WriteString("[]*schemaNode{")
	for i, n := range ns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("&" + e.names[n])
	}
	return b.String() + "}"
}

func (e *treeEmitter) properties(ps []schemaProperty) string {
	var b strings.Builder
	b.WriteString("[]schemaProperty{")
	for _, p := range ps {
		fmt.Fprintf(&b, "\n{%q, &%s},", p.name, e.names[p.node])
	}
	return b.String() + "\n}"
}

func (e *treeEmitter) patternProperties(ps []schemaPatternProperty) string {
	var b strings.Builder
	b.WriteString("[]schemaPatternProperty{")
	for _, p := range ps {
		fmt.Fprintf(&b, "\n{&schemaPattern{expr: %q}, &%s},", p.re, e.names[p.node])
	}
	return b.String() + "\n}"
}

// goValues writes an enum's values as Go: JSON numbers stay json.Numbers,
// as the compiler decoded them.
func goValues(vs []any) string {
	var b strings.Builder
	b.WriteString("[]any{")
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		switch v := v.(type) {
		case json.Number:
			fmt.Fprintf(&b, "json.Number(%q)", string(v))
		case nil:
			b.WriteString("nil")
		default:
			fmt.Fprintf(&b, "%#v", v)
		}
	}
	return b.String() + "}"
}
