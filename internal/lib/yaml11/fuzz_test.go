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
