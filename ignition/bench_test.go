package ignition

import (
	"testing"

	"github.com/vminit/vminit/spec"
)

// BenchmarkRender renders and validates. Typical is a small config: a
// default-user key, a user with sudo, two files, a unit and a command.
// Large is the whole FCOS example (network keyfile, mount, units, drop-in,
// time zone). Merge adds a user Ignition config (declared 3.4.0, needing
// 3.0.0), which takes the version search; Butane adds a Butane document
// instead (translated by Butane to Ignition 3.3.0, needing 3.0.0).
func BenchmarkRender(b *testing.B) {
	typical := load(b, "../examples/fcos-server.yaml")
	typical.Spec.Network, typical.Spec.Mounts, typical.Spec.Timezone = nil, nil, ""
	typical.Spec.Units = typical.Spec.Units[:1]
	typical.Spec.Commands = typical.Spec.Commands[:1]
	for _, c := range []struct {
		name string
		inst *spec.Instance
	}{
		{"Typical", typical},
		{"Large", load(b, "../examples/fcos-server.yaml")},
		{"Merge", load(b, "testdata/specs/merge-config.yaml")},
		{"Butane", load(b, "testdata/specs/merge-butane.yaml")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(c.inst, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
