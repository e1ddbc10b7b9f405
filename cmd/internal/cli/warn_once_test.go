package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestIgnoredUserDataWarnedOnce: the KubeVirt quick-start VM's user data
// ("Hi."), which cloud-init ignores, is warned of once, by the conversion,
// at its field's line, by build, render and validate: the check's own
// warning on the spec's field is the same problem (its cause), dropped
// where it is located in the object (platform.Result.Locate).
func TestIgnoredUserDataWarnedOnce(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	vm := corpusFile("kubevirt/kvio-labs-manifests-vm.yaml")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"build", vm, "-o", filepath.Join(dir, "seed.iso")},
		{"render", vm, "-o", filepath.Join(dir, "out")},
		{"validate", vm},
	} {
		code, _, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", args[0], code, stderr)
		}
		if n := strings.Count(stderr, "ignores it"); n != 1 {
			t.Errorf("%s: %d warnings that cloud-init ignores the user data, want 1:\n%s", args[0], n, stderr)
		}
		if want := vm + ":38: spec.template.spec.volumes[1].cloudInitNoCloud.userDataBase64: "; !strings.Contains(stderr, want) {
			t.Errorf("%s: no warning at %q:\n%s", args[0], want, stderr)
		}
	}
}
