package cloudinit

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yaml11"
)

// docGen writes #cloud-config documents from the schema itself: mostly
// the forms it asks for, now and then a wrong one, so that the
// differential tests meet every module's keys, valid and not.
type docGen struct {
	r     *rand.Rand
	depth int
}

// generatedDocs returns n documents, the same every run.
func generatedDocs(t testing.TB, n int) map[string]string {
	t.Helper()
	root := &schemaRoot
	g := &docGen{r: rand.New(rand.NewPCG(21, 3))}
	docs := map[string]string{}
	for i := range n {
		out, err := yaml11.Marshal(g.root(root))
		if err != nil {
			t.Fatal(err)
		}
		docs[fmt.Sprintf("generated-%04d", i)] = "#cloud-config\n" + string(out)
	}
	return docs
}

// root merges the mappings of a few of the modules' schemas (the root is
// an allOf of them).
func (g *docGen) root(n *schemaNode) *yaml.Node {
	m := yaml11.Mapping()
	for range 1 + g.r.IntN(3) {
		part := g.value(n.allOf[g.r.IntN(len(n.allOf))])
		if part.Kind == yaml.MappingNode {
			m.Content = append(m.Content, part.Content...)
		}
	}
	return m
}

func (g *docGen) value(n *schemaNode) *yaml.Node {
	for n.ref != nil {
		n = n.ref
	}
	if g.depth > 6 || g.r.IntN(15) == 0 {
		return g.wrong()
	}
	g.depth++
	defer func() { g.depth-- }()
	switch {
	case n.enum != nil:
		return g.scalar(n.enum[g.r.IntN(len(n.enum))])
	case n.oneOf != nil:
		return g.value(n.oneOf[g.r.IntN(len(n.oneOf))])
	case n.anyOf != nil:
		return g.value(n.anyOf[g.r.IntN(len(n.anyOf))])
	case n.allOf != nil:
		return g.value(n.allOf[g.r.IntN(len(n.allOf))])
	}
	t := "object"
	if n.types != nil {
		t = n.types[g.r.IntN(len(n.types))]
	} else if n.items != nil || n.tupleItems != nil {
		t = "array"
	}
	switch t {
	case "object":
		return g.object(n)
	case "array":
		return g.array(n)
	}
	return g.typed(t)
}

func (g *docGen) object(n *schemaNode) *yaml.Node {
	m := yaml11.Mapping()
	for _, p := range n.properties {
		if slices.Contains(n.required, p.name) || g.r.IntN(4) == 0 {
			yaml11.AddPair(m, p.name, g.value(p.node))
		}
	}
	for _, pp := range n.patternProperties {
		for range g.r.IntN(3) {
			yaml11.AddPair(m, g.pick("x", "group1", "a b", "0", "eth0"), g.value(pp.node))
		}
	}
	if n.additionalProps != nil || g.r.IntN(10) == 0 {
		sub := n.additionalProps
		if sub == nil {
			sub = &schemaNode{}
		}
		yaml11.AddPair(m, g.pick("no_such", "name2"), g.value(sub))
	}
	return m
}

func (g *docGen) array(n *schemaNode) *yaml.Node {
	s := yaml11.Sequence()
	for i := range g.r.IntN(4) {
		item := n.items
		if i < len(n.tupleItems) {
			item = n.tupleItems[i]
		} else if item == nil {
			item = n.additionalItems
		}
		if item == nil {
			item = &schemaNode{types: []string{"string"}}
		}
		s.Content = append(s.Content, g.value(item))
	}
	return s
}

func (g *docGen) typed(t string) *yaml.Node {
	switch t {
	case "string":
		return yaml11.String(g.pick("x", "", "10", "now", "+5", "2024-01-02", "tomorrow", "a:b", "1G", "http://x", "tag_1,tag2", "ALL=(ALL) ALL", "/dev/vdb"))
	case "integer":
		return yaml11.IntNode(int64(g.r.IntN(8) - 2))
	case "number":
		return &yaml.Node{Kind: yaml.ScalarNode, Value: g.pick("1.5", "-0.5", "3")}
	case "boolean":
		return yaml11.BoolNode(g.r.IntN(2) == 0)
	}
	return yaml11.NullNode()
}

// wrong is a value of any shape, right or wrong where it lands.
func (g *docGen) wrong() *yaml.Node {
	switch g.r.IntN(6) {
	case 0:
		return yaml11.Sequence(g.typed("string"), g.typed("integer"))
	case 1:
		return yaml11.Mapping("a", g.typed("string"))
	case 2:
		// Plain scalars as a user would type them, YAML 1.1 meanings and all.
		return &yaml.Node{Kind: yaml.ScalarNode, Value: g.pick("yes", "off", "0644", "1.0", "2024-01-02", "~", "0x1F", "1_000", ".nan", "-.inf")}
	}
	return g.typed(g.pick("string", "integer", "number", "boolean", "null"))
}

func (g *docGen) scalar(v any) *yaml.Node {
	switch v := v.(type) {
	case string:
		return yaml11.String(v)
	case bool:
		return yaml11.BoolNode(v)
	case json.Number:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: string(v)}
	case nil:
		return yaml11.NullNode()
	}
	return yaml11.String(strconv.Quote(fmt.Sprint(v)))
}

func (g *docGen) pick(choices ...string) string { return choices[g.r.IntN(len(choices))] }
