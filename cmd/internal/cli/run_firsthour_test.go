package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vmrun "github.com/vminit/vminit/cmd/internal/run"
	"github.com/vminit/vminit/spec"
)

// A kernel panic is reported as one, not as the agent's errors.
func TestRunResultSaysPanic(t *testing.T) {
	var w bytes.Buffer
	printRunResult(&w, "dev", &vmrun.Result{Agent: "cloud-init", Errors: []string{"kernel panic: VFS: Unable to mount root fs on unknown-block(0,0)"},
		Panic: "VFS: Unable to mount root fs on unknown-block(0,0)", Elapsed: 4 * time.Second})
	got := w.String()
	if !strings.Contains(got, "dev: the guest's kernel panicked after 4s: VFS: Unable to mount root fs") || strings.Contains(got, "first boot finished") {
		t.Errorf("a panic reported as:\n%s", got)
	}
}

// --ssh-key FILE adds the file's keys to the default user's for the run.
func TestRunSSHKeyFile(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "id_ed25519.pub")
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKVjXzWJjf8vIbiPbVh9a6Bql4d9bpB2g8zw8bq8M7QX me@laptop"
	os.WriteFile(pub, []byte("# mine\n"+key+"\n\n"), 0o644)
	inst := &spec.Instance{}
	inst.Spec.SSHAuthorizedKeys = []string{"ssh-rsa AAAA existing"}
	if err := addSSHKeys(inst, []string{pub}); err != nil {
		t.Fatal(err)
	}
	if got := inst.Spec.SSHAuthorizedKeys; len(got) != 2 || got[1] != key {
		t.Errorf("keys %q", got)
	}
	code, _, stderr := run(t, "run", "../../../examples/dev-vm.yaml", "--kernel", pub, "--ssh-key", filepath.Join(dir, "missing.pub"))
	if code == ExitOK || !strings.Contains(stderr, "--ssh-key") || !strings.Contains(stderr, "missing.pub") {
		t.Errorf("a missing --ssh-key file: exit %d %s", code, stderr)
	}
	nokey := filepath.Join(dir, "empty.pub")
	os.WriteFile(nokey, []byte("# nothing\n"), 0o644)
	if err := addSSHKeys(inst, []string{nokey}); err == nil || !strings.Contains(err.Error(), "empty.pub") {
		t.Errorf("a file without keys: %v", err)
	}
}

// After first-boot-done run stops QEMU at once unless --power-off (or a
// kept --overlay) asks for the guest to power off by itself.
func TestRunPowerOffFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--power-off"}, true}, {[]string{"--overlay", "x.qcow2"}, true}, {[]string{"--overlay", "x.qcow2", "--power-off=false"}, false}} {
		cmd := newRunCommand()
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		if got := powerOffAfterBoot(cmd); got != c.want {
			t.Errorf("%v: power off %v, want %v", c.args, got, c.want)
		}
	}
}
