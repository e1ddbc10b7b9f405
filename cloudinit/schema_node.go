package cloudinit

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// schemaNode is one (sub)schema of cloud-init's cloud-config schema, as
// the Draft 4 validator in schema_validate.go applies it. Only the
// keywords that schema uses are here. The tree is Go data
// (schema_tree.go), generated from the schema's JSON by
// TestSchemaTreeIsGenerated, which refuses any keyword not here, so a new
// schema cannot be half applied. As plain data with no maps, the linker
// lays it out: nothing is decoded, compiled or allocated to use it, at
// start-up or on the first check.
type schemaNode struct {
	ref *schemaNode // $ref: in Draft 4 it stands for the whole node

	types   []string // "type", in jsonschema/v6's order (typeOrder)
	enum    []any    // strings, json.Numbers, bools, nil
	format  string   // an asserted format: "date", the only one
	pattern *schemaPattern
	minimum string // a JSON number; "" when absent

	properties        []schemaProperty // sorted by name
	patternProperties []schemaPatternProperty
	additionalProps   *schemaNode
	noAdditionalProps bool // additionalProperties: false
	minProperties     int
	required          []string

	items             *schemaNode
	tupleItems        []*schemaNode // items given as an array
	additionalItems   *schemaNode
	noAdditionalItems bool // additionalItems: false
	minItems          int
	maxItems          int
	hasMaxItems       bool
	uniqueItems       bool

	allOf, anyOf, oneOf []*schemaNode

	deprecated  bool   // cloud-init's own annotation
	description string // kept for deprecated nodes: the finding's message
}

type schemaProperty struct {
	name string
	node *schemaNode
}

type schemaPatternProperty struct {
	re   *schemaPattern
	node *schemaNode
}

// schemaPattern is a regular expression compiled on first use. Not
// lazyre.New: a call at init would be init work, where this struct is
// data the linker lays out.
type schemaPattern struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

// MatchString reports whether s holds a match, as Python's re.search.
// The schema's patterns are compiled by TestCloudConfigSchemaPatterns.
func (p *schemaPattern) MatchString(s string) bool {
	p.once.Do(func() { p.re = regexp.MustCompile(p.expr) })
	return p.re.MatchString(s)
}

func (p *schemaPattern) String() string { return p.expr }

// property is the schema of the property name, or nil.
func (n *schemaNode) property(name string) *schemaNode {
	i, ok := slices.BinarySearchFunc(n.properties, name, func(p schemaProperty, name string) int { return strings.Compare(p.name, name) })
	if !ok {
		return nil
	}
	return n.properties[i].node
}
