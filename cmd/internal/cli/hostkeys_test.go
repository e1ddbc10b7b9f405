package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/hostkeytest"
)

// hostKeysSpec writes a spec with a host key of every type (from files
// beside it; ed25519's is the file named ed25519) into a new directory,
// and returns its path and the keys.
func hostKeysSpec(t *testing.T, agent, ed25519 string) (string, map[string]hostkeytest.Key) {
	t.Helper()
	dir := t.TempDir()
	keys := hostkeytest.New(t, dir)
	doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: web-1\nspec:\n  agent: " + agent +
		"\n  fqdn: web-1.example.com\n  metadataServer:\n    addresses: [10.0.0.5]\n  sshHostKeys:\n" +
		"    rsa: {file: ssh_host_rsa_key}\n    ecdsa: {file: ssh_host_ecdsa_key}\n    ed25519: {file: " + ed25519 + "}\n"
	p := filepath.Join(dir, "instance.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, keys
}

// render --known-hosts prints a line for each host key, which ssh-keygen
// finds under the VM's names and address.
func TestRenderKnownHosts(t *testing.T) {
	p, keys := hostKeysSpec(t, "cloud-init", "ssh_host_ed25519_key")
	code, stdout, stderr := run(t, "render", p, "--known-hosts")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var want []string
	for _, typ := range []string{"rsa", "ecdsa", "ed25519"} {
		want = append(want, "web-1,web-1.example.com,10.0.0.5 "+keys[typ].Public)
	}
	if got := strings.TrimSpace(stdout); got != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"web-1", "web-1.example.com", "10.0.0.5"} {
		out, err := exec.Command("ssh-keygen", "-F", host, "-f", kh).Output()
		if err != nil || strings.Count(string(out), "\n") < 4 {
			t.Errorf("ssh-keygen -F %s: %v\n%s", host, err, out)
		}
	}
	code, _, stderr = run(t, "render", "../../../examples/dev-vm.yaml", "--known-hosts")
	if code != ExitInvalid || !strings.Contains(stderr, "spec.sshHostKeys: no host keys") {
		t.Errorf("a spec without host keys: exit %d: %s", code, stderr)
	}
}

// Neither inspect nor validate prints a private host key: not for a
// valid spec or seed, nor for a key refused.
func TestHostKeysNeverPrinted(t *testing.T) {
	var outputs []string
	for _, agent := range []string{"cloud-init", "ignition"} {
		p, keys := hostKeysSpec(t, agent, "ssh_host_ed25519_key")
		bad, _ := hostKeysSpec(t, agent, "ssh_host_ecdsa_key") // an ECDSA key as the ed25519 key
		image := filepath.Join(t.TempDir(), "seed.iso")
		if agent == "ignition" {
			image = filepath.Join(t.TempDir(), "config.ign")
		}
		if code, _, stderr := run(t, "build", p, "-o", image); code != ExitOK {
			t.Fatalf("build: exit %d: %s", code, stderr)
		}
		for _, args := range [][]string{
			{"validate", p}, {"validate", p, "--json"}, {"validate", bad}, {"validate", bad, "--json"},
			{"build", bad, "-o", filepath.Join(t.TempDir(), "x")}, {"render", p, "--known-hosts"},
			{"inspect", image}, {"inspect", image, "--json"},
		} {
			if agent == "ignition" && args[0] == "inspect" {
				continue // inspect reads images; an Ignition build writes a config
			}
			code, stdout, stderr := run(t, args...)
			outputs = append(outputs, stdout+stderr)
			t.Logf("%s: exit %d", strings.Join(args, " "), code)
			for typ, k := range keys {
				body := strings.Split(string(k.Private), "\n")[1] // a line of the key itself
				if strings.Contains(stdout+stderr, "PRIVATE KEY") || strings.Contains(stdout+stderr, body) {
					t.Errorf("%s (%s) prints the %s private key:\n%s%s", strings.Join(args, " "), agent, typ, stdout, stderr)
				}
			}
		}
	}
	if len(outputs) == 0 {
		t.Fatal("nothing run")
	}
}
