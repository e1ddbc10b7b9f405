package cloudinit

import (
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzMerge merges arbitrary documents into a generated one. It must never
// panic; when it succeeds, the result must be one YAML mapping that merges
// again (into an empty document) to itself, as cloud-init re-reads it.
func FuzzMerge(f *testing.F) {
	for _, c := range mergeCases {
		f.Add(c.overlay)
	}
	f.Add("#cloud-config\na: &x [1, *x]\n")
	f.Add("#cloud-config\n<<: {a: 1}\n<<: [{b: 2}]\n")
	f.Add("#cloud-config\n? [a, b]\n: c\n")
	f.Add("#cloud-config\nmerge_how: [[], {name: 1}]\n")
	f.Fuzz(func(t *testing.T, overlay string) {
		out, err := MergeCloudConfig([]byte(mergeBase), []byte(overlay))
		if err != nil {
			return
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(out, &doc); err != nil {
			t.Fatalf("merged output is not YAML: %v\n%s", err, out)
		}
		n, err := normalize(out)
		if err != nil {
			t.Fatalf("merged output does not load: %v\n%s", err, out)
		}
		if n == nil || kindOf(n) != pyDict {
			t.Fatalf("merged output is not a mapping:\n%s", out)
		}
		again, err := MergeCloudConfig([]byte("#cloud-config\n"), out)
		if err != nil {
			t.Fatalf("merged output does not merge again: %v\n%s", err, out)
		}
		if string(again) != string(out) {
			t.Fatalf("merging the output into nothing changes it:\n%s\n---\n%s", out, again)
		}
	})
}
