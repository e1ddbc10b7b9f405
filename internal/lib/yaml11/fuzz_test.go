package yaml11

import (
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzString checks that every string survives String and Marshal, as a
// value and as a key, read back by yaml.v3 (TestStringRoundTrip checks
// the interesting ones against PyYAML).
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "a", "\n", "\na", "a\n", " a\nb", "a \nb", "\n\n", "\ta\n", "- a\n", "# x\ny", "a\r\nb", "\u2028x\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		doc := Mapping("k", String(s), "l", Flow(Strings([]string{s, "x"})))
		if s != "k" && s != "l" {
			AddPair(doc, s, String("v"))
		}
		out, err := Marshal(doc)
		if err != nil {
			return // invalid UTF-8 is refused
		}
		var got map[string]any
		if err := yaml.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: %v\n%s", s, err, out)
		}
		l, _ := got["l"].([]any)
		if got["k"] != s || len(l) != 2 || l[0] != s || (s != "k" && s != "l" && got[s] != "v") {
			t.Fatalf("%q came back as %q / %q / %q:\n%s", s, got["k"], l, got[s], out)
		}
	})
}

// FuzzEncodes holds encodable to Marshal: a tree it admits always
// encodes, and Encodes reports what Marshal does. The trees are the
// fuzzer's YAML as yaml.v3 parses it (anchors, aliases, comments, tags:
// Encodes falls back to Marshal), the same stripped to the subset, and
// this package's nodes around a raw string (invalid UTF-8 included).
func FuzzEncodes(f *testing.F) {
	for _, s := range []string{"a: b", "- x\n- &a y\n- *a", "k: !!binary aGk=", "# c\nk: v # d", "!!python/object x", "? [a]\n: b", "{a: [1, 2.5, null, true, 2024-01-02]}", "\xff: \xfe", "k: !custom v"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		same := func(what string, n *yaml.Node) {
			t.Helper()
			_, err := Marshal(n)
			if encodable(n) && err != nil {
				t.Fatalf("%s: encodable, but Marshal fails: %v", what, err)
			}
			if e := Encodes(n); (e == nil) != (err == nil) || e != nil && e.Error() != err.Error() {
				t.Fatalf("%s: Encodes = %v, Marshal = %v", what, e, err)
			}
		}
		same("nodes", Mapping("k", String(s), "t", &yaml.Node{Kind: yaml.ScalarNode, Tag: Int, Value: s}, "l", Flow(Strings([]string{s, "x"})), s, NullNode()))
		var doc yaml.Node
		if yaml.Unmarshal([]byte(s), &doc) != nil || len(doc.Content) != 1 {
			return
		}
		root := doc.Content[0]
		same("parsed", root)
		strip(root)
		same("stripped", root)
	})
}

// strip removes what encodable refuses but for tags, invalid UTF-8 and
// non-scalar keys.
func strip(n *yaml.Node) {
	n.Anchor, n.HeadComment, n.LineComment, n.FootComment = "", "", "", ""
	for i, c := range n.Content {
		if c.Kind == yaml.AliasNode {
			n.Content[i] = &yaml.Node{Kind: yaml.ScalarNode, Tag: Str, Value: c.Value}
			continue
		}
		strip(c)
	}
}
