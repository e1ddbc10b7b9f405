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

// BenchmarkCheckSchemaCold is CheckSchema's first call in a process: the
// schema compiled, then one document checked. v6 is the jsonschema/v6
// implementation it replaced (its init-time meta-schema compile, paid by
// every process, is not in these figures).
func BenchmarkCheckSchemaCold(b *testing.B) {
	b.Run("draft4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			root, err := compileSchema(schemaJSON)
			if err != nil {
				b.Fatal(err)
			}
			doc, _ := normalize(benchDoc)
			root.check(doc)
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

// BenchmarkCheckSchemaWarm is every later call.
func BenchmarkCheckSchemaWarm(b *testing.B) {
	for name, check := range map[string]func([]byte) ([]SchemaFinding, error){"draft4": CheckSchema, "v6": checkSchemaV6} {
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
