package spec

import (
	"errors"
	"testing"
)

// A YAML indentation error is reported on the line that breaks the
// block, not on the line where the block starts (yaml.v3's own line).
func TestYAMLIndentationErrorNamesTheBadLine(t *testing.T) {
	head := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: x\n"
	for _, c := range []struct {
		name, doc string
		line      int
	}{
		{"list item key too shallow", head + "spec:\n  users:\n    - name: a\n     groups: [x]\n  hostname: h\n", 8},
		{"file key too shallow", head + "spec:\n  hostname: h\n  files:\n  - path: /etc/a\n    content: |\n      hello\n   mode: 0644\n  users: []\n", 11},
		{"key too deep", head + "spec:\n  hostname: a\n   users: []\n", 7},
		{"a quoted scalar over lines, then a bad key", head + "spec:\n  hostname: \"a\n    b\"\n  users:\n    - name: a\n     groups: [x]\n", 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Decode([]byte(c.doc))
			var es Errors
			if !errors.As(err, &es) || len(es) != 1 {
				t.Fatalf("got %v", err)
			}
			if es[0].Line != c.line {
				t.Errorf("line %d, want %d: %v", es[0].Line, c.line, es[0])
			}
		})
	}
}
