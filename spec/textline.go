package spec

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yamlbound"
)

// TextLine is the 1-based line, in text (a YAML or JSON document a field
// holds: network-config, a cloud-config, an Ignition config), of the
// value at path (config[0], passwd.users[1].sshAuthorizedKeys[0]), or of
// its nearest ancestor there; 0 when text does not parse. It lets a
// problem found inside the text name its line (FieldError.TextLine).
func TextLine(text, path string) int {
	root, err := yamlbound.Parse([]byte(text), FieldYAML)
	if err != nil || root == nil || len(root.Content) == 0 {
		return 0
	}
	n := root.Content[0]
	line := n.Line
	for _, seg := range strings.FieldsFunc(strings.ReplaceAll(path, "[", ".["), func(r rune) bool { return r == '.' }) {
		var next *yaml.Node
		if i, err := strconv.Atoi(strings.Trim(seg, "[]")); err == nil && strings.HasPrefix(seg, "[") {
			if n.Kind == yaml.SequenceNode && i < len(n.Content) {
				next, line = n.Content[i], n.Content[i].Line
			}
		} else if n.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == seg {
					next, line = n.Content[j+1], n.Content[j].Line
				}
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}
