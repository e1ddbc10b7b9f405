package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// capiWorkers is a KubeadmConfigTemplate as Cluster API's OpenStack
// provider publishes its workers' (templates/cluster-template.yaml): the
// node named by cloud-init's Jinja, no discovery (CABPK fills it in).
const capiWorkers = `apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata:
  name: corpus-md-0
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          kubeletExtraArgs:
          - name: provider-id
            value: openstack:///'{{ instance_id }}'
          name: '{{ local_hostname }}'
`

// TestCAPIMachineFlags: --machine, --bootstrap-token,
// --control-plane-endpoint and --ca-cert-hash reach the Cluster API
// conversion from build, render, convert and validate (run shares their
// flags); the machine's name is its host name; the Jinja template is
// kept, and its spec builds the same bytes; a join without discovery is
// refused naming the flags, and writes nothing.
func TestCAPIMachineFlags(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	dir := t.TempDir()
	in := filepath.Join(dir, "workers.yaml")
	if err := os.WriteFile(in, []byte(capiWorkers), 0o644); err != nil {
		t.Fatal(err)
	}
	join := []string{"--machine", "corpus-md-0-x7k2p", "--bootstrap-token", "abcdef.0123456789abcdef", "--control-plane-endpoint", "192.0.2.10:6443",
		"--ca-cert-hash", "sha256:" + strings.Repeat("0f", 32)}

	out := filepath.Join(dir, "seed")
	if code, _, stderr := run(t, append([]string{"render", in, "-o", out}, join...)...); code != 0 {
		t.Fatalf("render: %s", stderr)
	}
	ud, _ := os.ReadFile(filepath.Join(out, "user-data"))
	md, _ := os.ReadFile(filepath.Join(out, "meta-data"))
	if !bytes.HasPrefix(ud, []byte("## template: jinja\n#cloud-config\n")) || !bytes.Contains(ud, []byte("token: abcdef.0123456789abcdef")) {
		t.Errorf("user-data:\n%s", ud)
	}
	if !bytes.Contains(md, []byte("local-hostname: corpus-md-0-x7k2p")) {
		t.Errorf("meta-data:\n%s", md)
	}

	a, b, specPath := filepath.Join(dir, "a.iso"), filepath.Join(dir, "b.iso"), filepath.Join(dir, "instance.yaml")
	if code, _, stderr := run(t, append([]string{"build", in, "-o", a}, join...)...); code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("build: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run(t, append([]string{"convert", in, "--to", "spec", "-o", specPath}, join...)...); code != 0 {
		t.Fatalf("convert: %s", stderr)
	}
	if code, _, stderr := run(t, "build", specPath, "-o", b); code != 0 {
		t.Fatalf("build %s: %s", specPath, stderr)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Errorf("building the template and its spec differ (%d and %d bytes)", len(da), len(db))
	}
	if code, _, stderr := run(t, append([]string{"validate", in}, join...)...); code != 0 {
		t.Errorf("validate: exit %d: %s", code, stderr)
	}

	_, _, stderr := run(t, append([]string{"validate", in}, join[2:]...)...)
	if !strings.Contains(stderr, `every machine built from this template without --machine gets the host name and instance id "corpus-md-0"`) {
		t.Errorf("no warning without --machine: %s", stderr)
	}
	unjoined := filepath.Join(dir, "unjoined.iso")
	code, _, stderr := run(t, "build", in, "-o", unjoined, "--machine", "corpus-md-0-x7k2p")
	if code != ExitInvalid || !strings.Contains(stderr, "workers.yaml:8: spec.template.spec.joinConfiguration.discovery:") || !strings.Contains(stderr, "--bootstrap-token") {
		t.Errorf("exit %d, want %d naming the field and --bootstrap-token: %s", code, ExitInvalid, stderr)
	}
	if _, err := os.Stat(unjoined); err == nil {
		t.Errorf("%s written despite the error", unjoined)
	}
	if _, help, _ := run(t, "run", "--help"); !strings.Contains(help, "--machine") || !strings.Contains(help, "--bootstrap-token") {
		t.Errorf("run has no --machine or --bootstrap-token:\n%s", help)
	}
}
