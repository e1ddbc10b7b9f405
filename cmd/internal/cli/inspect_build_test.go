package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectAcceptsWhatBuildWrote: KubeVirt's quick-start VM (user data
// "Hi.", which cloud-init ignores) builds with a warning; inspect on that
// seed names the same warning and exits 0; --strict makes it an error in
// both.
func TestInspectAcceptsWhatBuildWrote(t *testing.T) {
	file := corpusFile("kubevirt/kvio-labs-manifests-vm.yaml")
	dir := t.TempDir()
	for _, ds := range []string{"nocloud", "configdrive"} {
		out := filepath.Join(dir, ds+".iso")
		code, _, stderr := run(t, "build", file, "--datasource", ds, "-o", out)
		if code != ExitOK || !strings.Contains(stderr, "warning:") || !strings.Contains(stderr, "ignores it") {
			t.Fatalf("build --datasource %s: exit %d, want 0 with a warning that cloud-init ignores the user data:\n%s", ds, code, stderr)
		}
		code, stdout, stderr := run(t, "inspect", out)
		if code != ExitOK || !strings.Contains(stdout, "warnings:") || !strings.Contains(stdout, "does not recognise this data") || !strings.Contains(stdout, "checks:") {
			t.Errorf("inspect of what build wrote (%s): exit %d, want 0 with the warning:\n%s%s", ds, code, stdout, stderr)
		}
		if code, stdout, _ := run(t, "inspect", out, "--strict"); code == ExitOK || !strings.Contains(stdout, "does not recognise this data") {
			t.Errorf("inspect --strict (%s): exit %d, want the warning as a problem:\n%s", ds, code, stdout)
		}
		if code, _, _ := run(t, "build", file, "--datasource", ds, "--strict", "-o", filepath.Join(dir, ds+"-strict.iso")); code == ExitOK {
			t.Errorf("build --strict (%s): exit 0, want the warning as an error", ds)
		}
	}
}
