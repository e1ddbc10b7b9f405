package platform

import (
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/laughs"
	"github.com/vminit/vminit/spec"
)

// TestSplitLaughs: an object whose aliases expand to 1 GB is refused
// before sigs.k8s.io/yaml expands them, naming the field and the alias's
// line in the file (the object is the file's second document).
func TestSplitLaughs(t *testing.T) {
	doc := "kind: ConfigMap\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n" + laughs.Mapping(2, laughs.IssueScalar, laughs.IssueWidth)
	_, err := Split("cm.yaml", []byte(doc))
	errs := spec.AsErrors(err)
	if len(errs) != 1 || errs[0].Line != 9 || errs[0].Field != "data.c[0]" || !strings.Contains(errs[0].Message, "aliases expand the object past 16777216 bytes") {
		t.Fatalf("%v", err)
	}
}
