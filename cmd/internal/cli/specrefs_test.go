package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const refSpec = `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: db
spec:
  users:
    - name: ops
      passwordHashFrom:
        secretKeyRef: {name: ops, key: hash}
`

const refHash = "$6$vminitTestSalt$bxoxYrnKoMYX7SNV.Nxk54vzUsBV9eSOhZtT4XP8XaipbIH8rFb4WkkeVTUwN7ya1I90C069s2n6lDSIK14JS1"

// A spec's Secret reference on the command line: without a place to read
// it from, the error names the field and the flags to pass; with
// --objects it is read in the command's namespace only.
func TestSpecSecretRefOnCommandLine(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "instance.yaml")
	objects := filepath.Join(dir, "secrets.yaml")
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ops\n  namespace: %s\nstringData:\n  hash: '" + refHash + "'\n"
	write := func(path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(p, refSpec)
	code, _, stderr := run(t, "build", p, "-o", filepath.Join(dir, "a.iso"))
	if code != ExitInvalid || !strings.Contains(stderr, "spec.users[0].passwordHashFrom.secretKeyRef: ") || !strings.Contains(stderr, "--kubeconfig") || !strings.Contains(stderr, "file:") {
		t.Errorf("without --kubeconfig: exit %d: %s", code, stderr)
	}

	write(objects, strings.Replace(secret, "%s", "default", 1))
	out := filepath.Join(dir, "seed")
	if code, _, stderr := run(t, "render", p, "--objects", objects, "-o", out); code != ExitOK {
		t.Fatalf("with --objects: exit %d: %s", code, stderr)
	}
	ud, _ := os.ReadFile(filepath.Join(out, "user-data"))
	if !strings.Contains(string(ud), refHash) {
		t.Errorf("user-data lacks the Secret's hash:\n%s", ud)
	}

	// The Secret is in another namespace than the command's.
	write(objects, strings.Replace(secret, "%s", "other", 1))
	code, _, stderr = run(t, "validate", p, "--objects", objects, "-n", "default")
	if code != ExitInvalid || !strings.Contains(stderr, `spec.users[0].passwordHashFrom.secretKeyRef: secret "ops" not found in namespace "default"`) {
		t.Errorf("a Secret of another namespace: exit %d: %s", code, stderr)
	}
}
