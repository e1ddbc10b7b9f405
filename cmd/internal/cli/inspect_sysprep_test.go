package cli

import (
	"path/filepath"
	"regexp"
	"testing"
)

// vminit inspect reads the sysprep answer-file disc vminit build writes
// for a KubeVirt VM: no cloud-init seed is missing from it.
func TestInspectReadsTheSysprepDisc(t *testing.T) {
	vm := filepath.Join("..", "..", "..", "platform", "testdata", "kubevirt-sysprep.yaml")
	dir := t.TempDir()
	// The VM has a sysprep volume alone: build's output is its disc.
	sysprep := filepath.Join(dir, "sysprep.iso")
	if code, _, stderr := run(t, "build", vm, "-o", sysprep); code != ExitOK {
		t.Fatalf("build: exit %d %s", code, stderr)
	}
	code, stdout, stderr := run(t, "inspect", sysprep)
	if code != ExitOK || !regexp.MustCompile(`datasource:\s+sysprep\n`).MatchString(stdout) || !regexp.MustCompile(`checks:\s+ok\n`).MatchString(stdout) {
		t.Errorf("inspect: exit %d\n%s%s", code, stdout, stderr)
	}
}
