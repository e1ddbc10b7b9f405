package ignition

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/laughs"
)

// TestButaneLaughs: Butane whose aliases expand to 1 GB is refused naming
// the field and the alias's line before Butane's translator expands them.
func TestButaneLaughs(t *testing.T) {
	inst := load(t, "../examples/fcos-server.yaml")
	// 100 files, each appending the same 100 resources of 100 KB.
	var b strings.Builder
	b.WriteString("variant: fcos\nversion: 1.4.0\nstorage:\n  files:\n")
	b.WriteString("    - path: /f0\n      contents: &r {inline: " + strings.Repeat("x", laughs.IssueScalar) + "}\n")
	b.WriteString("      append: &b [" + strings.TrimSuffix(strings.Repeat("*r, ", laughs.IssueWidth), ", ") + "]\n")
	for i := 1; i < laughs.IssueWidth; i++ {
		fmt.Fprintf(&b, "    - {path: /f%d, append: *b}\n", i)
	}
	inst.Spec.Ignition.Butane = b.String()
	_, err := Render(inst, Options{})
	const want = "spec.ignition.butane: line 8: aliases expand the document past 16777216 bytes at storage.files[1].append"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
}
