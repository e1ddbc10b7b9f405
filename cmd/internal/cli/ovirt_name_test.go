package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOVirtStartActionName: an oVirt start action names no VM (the VM is
// in the URL). The Go SDK's published body (platform's oVirt corpus),
// without its host_name, is refused naming --name and writes nothing;
// with --name it builds, and converting it to a spec with the same flag
// builds the same bytes.
func TestOVirtStartActionName(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	body, err := os.ReadFile(filepath.Join("..", "..", "..", "platform", "testdata", "corpus", "ovirt", "go-start-vm-with-cloudinit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "start.xml")
	if err := os.WriteFile(in, bytes.Replace(body, []byte("<host_name>myvm.example.com</host_name>"), nil, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	salt := []string{"--password-salt", "corpussalt"}
	unnamed := filepath.Join(dir, "unnamed.iso")
	code, _, stderr := run(t, append([]string{"build", in, "-o", unnamed}, salt...)...)
	if code != ExitInvalid || !strings.Contains(stderr, "action.vm.name: required") || !strings.Contains(stderr, "pass --name NAME") {
		t.Fatalf("exit %d, want %d naming --name; stderr %s", code, ExitInvalid, stderr)
	}
	if _, err := os.Stat(unnamed); err == nil {
		t.Errorf("%s written despite the error", unnamed)
	}

	named := append([]string{"--name", "myvm"}, salt...)
	a, b, specPath := filepath.Join(dir, "a.iso"), filepath.Join(dir, "b.iso"), filepath.Join(dir, "instance.yaml")
	if code, _, stderr := run(t, append([]string{"build", in, "-o", a}, named...)...); code != 0 {
		t.Fatalf("build --name: %s", stderr)
	}
	if code, _, stderr := run(t, append([]string{"convert", in, "--to", "spec", "-o", specPath}, named...)...); code != 0 {
		t.Fatalf("convert --name: %s", stderr)
	}
	if s, _ := os.ReadFile(specPath); !strings.Contains(string(s), "name: myvm") {
		t.Errorf("the spec is not named myvm:\n%s", s)
	}
	if code, _, stderr := run(t, "build", specPath, "-o", b); code != 0 {
		t.Fatalf("build %s: %s", specPath, stderr)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Errorf("building the body and its spec differ (%d and %d bytes)", len(da), len(db))
	}
}
