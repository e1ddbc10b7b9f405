package ignition

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vminit/vminit/internal/testing/hostkeytest"
	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// spec.sshHostKeys become /etc/ssh/ssh_host_<type>_key (0600) and .pub
// (0644): the config passes the real ignition-validate, and the real
// ignition writes each private key as given and the public half
// ssh-keygen derives.
func TestSSHHostKeys(t *testing.T) {
	dir := t.TempDir()
	keys := hostkeytest.New(t, dir)
	doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: pinned\nspec:\n  agent: ignition\n  sshHostKeys:\n"
	for _, typ := range hostkeytest.Types {
		doc += "    " + typ + ": {file: ssh_host_" + typ + "_key}\n"
	}
	p := filepath.Join(dir, "instance.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Render(load(t, p), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.ign")
	if err := os.WriteFile(cfg, res.Config, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(testtools.Require(t, "ignition-validate"), cfg).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("ignition-validate: %v\n%s", err, out)
	}
	root := ignitiontest.Apply(t, res.Config)
	for typ, k := range keys {
		for _, f := range []struct {
			path string
			data string
			mode os.FileMode
		}{
			{"etc/ssh/ssh_host_" + typ + "_key", string(k.Private), 0o600},
			{"etc/ssh/ssh_host_" + typ + "_key.pub", k.Public + "\n", 0o644},
		} {
			got, err := os.ReadFile(filepath.Join(root, f.path))
			if err != nil {
				t.Errorf("%s: %v", f.path, err)
				continue
			}
			st, _ := os.Stat(filepath.Join(root, f.path))
			if string(got) != f.data || st.Mode().Perm() != f.mode {
				t.Errorf("%s: mode %v, %q; want %v, %q", f.path, st.Mode().Perm(), got, f.mode, f.data)
			}
		}
	}
}
