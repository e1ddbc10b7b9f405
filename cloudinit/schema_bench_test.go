package cloudinit

import (
	"testing"
)

// benchDoc is a #cloud-config as the KubeVirt and CAPI importers carry.
var benchDoc = []byte(`#cloud-config
hostname: web
users:
  - default
  - name: ops
    groups: [wheel]
    sudo: ALL=(ALL) NOPASSWD:ALL
    ssh_authorized_keys: [ssh-ed25519 AAAA ops@example]
write_files:
  - path: /etc/motd
    permissions: '0644'
    content: hello
packages: [git, curl]
runcmd:
  - [systemctl, enable, --now, nginx]
  - echo done
ssh_pwauth: false
`)

// BenchmarkCheckSchemaCold is CheckSchema's first call in a process.
// "tree" is the generated tree, with its patterns not yet compiled (the
// only work it defers); "v6" compiles the schema with jsonschema/v6, as
// CheckSchema did (its init-time meta-schema compile, paid by every
// process, is not in these figures).
func BenchmarkCheckSchemaCold(b *testing.B) {
	b.Run("tree", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			resetPatterns(&schemaRoot, map[*schemaNode]bool{})
			b.StartTimer()
			if _, err := CheckSchema(benchDoc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("v6", func(b *testing.B) {
		defer func(load func() (*v6Schema, error)) { v6LoadSchema = load }(v6LoadSchema)
		b.ReportAllocs()
		for b.Loop() {
			s, err := v6Compile()
			if err != nil {
				b.Fatal(err)
			}
			v6LoadSchema = func() (*v6Schema, error) { return s, nil }
			if _, err := checkSchemaV6(benchDoc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// resetPatterns makes the tree's patterns uncompiled again.
func resetPatterns(n *schemaNode, seen map[*schemaNode]bool) {
	if seen[n] {
		return
	}
	seen[n] = true
	if n.pattern != nil {
		*n.pattern = schemaPattern{expr: n.pattern.expr}
	}
	for _, pp := range n.patternProperties {
		*pp.re = schemaPattern{expr: pp.re.expr}
	}
	for _, sub := range append(n.sameValue(), n.children()...) {
		resetPatterns(sub, seen)
	}
}

// BenchmarkCheckSchemaWarm is every later call.
func BenchmarkCheckSchemaWarm(b *testing.B) {
	for name, check := range map[string]func([]byte) ([]SchemaFinding, error){"tree": CheckSchema, "v6": checkSchemaV6} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := check(benchDoc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
