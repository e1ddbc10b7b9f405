package spec

import (
	"bytes"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzNodeBound holds nodeBound's premise to yaml.v3: the nodes of every
// document it builds from data number at most 2 + 2×(separator bytes).
func FuzzNodeBound(f *testing.F) {
	for _, d := range fastCases {
		f.Add([]byte(d))
	}
	for _, d := range []string{"a", "? a", "? a\n? b\n", "{a}", "{a, b, c}", "[a: b]", "[: ]", "[?]", "[?, ?, ?]",
		"[a: b, c: d]", "a\n---\nb", "a\n...\nb\n...\nc\n", "- ? : \n", "&a [*a, *a, *a]", "!!map {}", "[{a: b}: c]",
		"? - a\n  - b\n: - c\n", "[\n a,\n b\n]\n", "{? a: b, c}", "- - - a\n", "a: !t\n", "--- !t\n--- !t\n"} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes := 0
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc yaml.Node
			if dec.Decode(&doc) != nil {
				break // the end, or a syntax error: the tree is dropped
			}
			nodes += countNodes(&doc)
		}
		if nodes > 0 && boundPassed(data, nodes-1) == 0 {
			t.Fatalf("%d nodes, past the bound counted by separators:\n%q", nodes, data)
		}
	})
}

func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}
