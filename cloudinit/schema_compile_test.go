package cloudinit

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCompileSchemaRefuses: a schema using a keyword the validator does
// not implement, a format it does not know, a $ref it cannot follow or a
// loop that never reaches the value is refused at compile time, every
// problem named by its place in the schema, rather than half applied.
func TestCompileSchemaRefuses(t *testing.T) {
	cases := map[string]struct{ schema, want string }{
		"keyword": {`{"properties": {"a": {"type": "string", "maxLength": 3}, "b": {"not": {}}}}`,
			`#/properties/a/maxLength: keyword "maxLength" is not implemented by vminit's validator; #/properties/b/not: keyword "not" is not implemented`},
		"format": {`{"format": "email"}`, `#/format: format "email" is not implemented`},
		"type":   {`{"type": ["string", "date"]}`, `#/type: unknown type "date"`},
		"ref":    {`{"$ref": "#/$defs/none"}`, `#: $ref "#/$defs/none" leads nowhere`},
		"remote": {`{"$ref": "https://example.com/s.json"}`, `is not in this document`},
		"loop":   {`{"$defs": {"a": {"oneOf": [{"$ref": "#/$defs/b"}]}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}`, `applies itself to the same value again`},
		"shape":  {`{"minItems": "2", "required": "a"}`, `#/minItems: must be a non-negative integer; #/required: must be an array`},
		"json":   {`{`, `cloud-init schema: unexpected EOF`},
	}
	for name, c := range cases {
		_, err := compileSchema([]byte(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: compileSchema(%s) = %v, want an error with %q", name, c.schema, err, c.want)
		}
	}
	// Recursion through a member is fine: each step goes down the value.
	if _, err := compileSchema([]byte(`{"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"}`)); err != nil {
		t.Errorf("a recursive list: %v", err)
	}
}

// TestCloudConfigSchemaPatterns: the generated tree's patterns compile
// (on first use) and every node is reached.
func TestCloudConfigSchemaPatterns(t *testing.T) {
	seen := map[*schemaNode]bool{}
	var visit func(n *schemaNode)
	visit = func(n *schemaNode) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		if n.pattern != nil {
			n.pattern.MatchString("") // panics on a bad pattern
		}
		for _, pp := range n.patternProperties {
			pp.re.MatchString("")
		}
		for _, sub := range append(n.sameValue(), n.children()...) {
			visit(sub)
		}
	}
	visit(&schemaRoot)
	if len(seen) < 500 {
		t.Errorf("only %d schema nodes reached", len(seen))
	}
}

// TestNoSchemaLibrary: the package links no JSON Schema library, whose
// init and compile costs CheckSchema's own validator exists to avoid
// (jsonschema/v6 is the differential tests' oracle, in _test.go files).
func TestNoSchemaLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "jsonschema") {
			t.Errorf("cloudinit links %s", p)
		}
	}
}
