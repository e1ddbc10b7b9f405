package cloudinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/vminit/vminit/internal/lib/lazyre"
)

// schemaNode is one (sub)schema of cloud-init's cloud-config schema,
// compiled for the Draft 4 validator in schema_validate.go. Only the
// keywords that schema uses are here: compileSchema refuses any other, so
// a new schema cannot be half applied.
type schemaNode struct {
	ptr string      // JSON pointer of the node in the schema, for errors about the schema
	ref *schemaNode // $ref: in Draft 4 it stands for the whole node

	types   []string // "type", in jsonschema/v6's order (see typeOrder)
	enum    []any
	format  string // an asserted format: "date", the only one
	pattern *lazyre.Regexp
	minimum *big.Rat

	properties        map[string]*schemaNode
	patternProperties []patternProperty // sorted by pattern
	additionalProps   *schemaNode
	noAdditionalProps bool // additionalProperties: false
	minProperties     int  // -1 when absent, as the other bounds
	required          []string

	items             *schemaNode
	tupleItems        []*schemaNode // items given as an array
	additionalItems   *schemaNode
	noAdditionalItems bool // additionalItems: false
	minItems          int
	maxItems          int
	uniqueItems       bool

	allOf, anyOf, oneOf []*schemaNode

	deprecated  bool // cloud-init's own annotation
	description string
}

type patternProperty struct {
	re   *lazyre.Regexp
	node *schemaNode
}

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

// cloudConfigSchema is the compiled schema, built on the first CheckSchema:
// decoding and compiling it costs about a millisecond that a process
// checking no #cloud-config should not pay.
var cloudConfigSchema = sync.OnceValues(func() (*schemaNode, error) {
	return compileSchema(schemaJSON)
})

// schemaCompiler turns the decoded JSON into schemaNodes, each pointer
// compiled once however many $refs reach it.
type schemaCompiler struct {
	root  any
	nodes map[string]*schemaNode
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
	c := &schemaCompiler{root: root, nodes: map[string]*schemaNode{}, refs: map[*schemaNode]string{}}
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

func (c *schemaCompiler) fail(ptr, format string, args ...any) {
	c.errs = append(c.errs, "#"+ptr+": "+fmt.Sprintf(format, args...))
}

// node compiles the schema object raw found at ptr.
func (c *schemaCompiler) node(raw any, ptr string) *schemaNode {
	if n, ok := c.nodes[ptr]; ok {
		return n
	}
	n := &schemaNode{ptr: ptr, minProperties: -1, minItems: -1, maxItems: -1}
	c.nodes[ptr] = n
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
		n.pattern = lazyre.New(c.str(v, ptr))
	case "minimum":
		num, _ := v.(json.Number)
		if n.minimum, _ = new(big.Rat).SetString(string(num)); n.minimum == nil {
			c.fail(ptr, "minimum must be a number")
		}
	case "properties":
		n.properties = map[string]*schemaNode{}
		for name, sub := range c.object(v, ptr) {
			n.properties[name] = c.node(sub, ptr+"/"+escapePointer(name))
		}
	case "patternProperties":
		obj := c.object(v, ptr)
		for _, pat := range slices.Sorted(maps.Keys(obj)) {
			n.patternProperties = append(n.patternProperties, patternProperty{lazyre.New(pat), c.node(obj[pat], ptr+"/"+escapePointer(pat))})
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
		n.maxItems = c.count(v, ptr)
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
		c.fail(n.ptr, "$ref %q is not in this document", ref)
		return
	}
	cur := c.root
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, _ := cur.(map[string]any)
		if cur, ok = m[tok]; !ok {
			c.fail(n.ptr, "$ref %q leads nowhere", ref)
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
		c.fail(n.ptr, "applies itself to the same value again, endlessly")
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
	for _, name := range slices.Sorted(maps.Keys(n.properties)) {
		out = append(out, n.properties[name])
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
