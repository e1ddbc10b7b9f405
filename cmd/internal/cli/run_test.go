package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	vmrun "github.com/vminit/vminit/cmd/internal/run"
	"github.com/vminit/vminit/internal/lib/qemu"
	"github.com/vminit/vminit/internal/testing/qemutest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// TestRunRefusesWhatItCannotBoot: the mistakes a user makes get their
// message and exit status before any guest starts.
func TestRunRefusesWhatItCannotBoot(t *testing.T) {
	dir := t.TempDir()
	seedISO := filepath.Join(dir, "seed.iso")
	if code, _, stderr := run(t, "build", "../../../examples/dev-vm.yaml", "-o", seedISO); code != ExitOK {
		t.Fatal(stderr)
	}
	code, _, stderr := run(t, "run", "../../../examples/dev-vm.yaml")
	if code != ExitUsage || !strings.Contains(stderr, "--image DISK is required") {
		t.Errorf("no image: exit %d\n%s", code, stderr)
	}
	code, _, stderr = run(t, "run", "../../../examples/dev-vm.yaml", "--image", seedISO, "--datasource", "fwcfg")
	if code != ExitInvalid || !strings.Contains(stderr, `datasource "fwcfg": cloud-init reads nocloud or configdrive`) {
		t.Errorf("fwcfg for cloud-init: exit %d\n%s", code, stderr)
	}
	testtools.Require(t, qemu.System)
	code, _, stderr = run(t, "run", "../../../examples/dev-vm.yaml", "--image", seedISO)
	if code != ExitInvalid || !strings.Contains(stderr, "not a disk image: it looks like an ISO9660 image") {
		t.Errorf("a seed as the image: exit %d\n%s", code, stderr)
	}
	t.Setenv("PATH", dir)
	code, _, stderr = run(t, "run", "../../../examples/dev-vm.yaml", "--image", seedISO)
	if code != ExitInvalid || !strings.Contains(stderr, "apt-get install --no-install-recommends qemu-system-x86") {
		t.Errorf("no QEMU: exit %d\n%s", code, stderr)
	}
}

// TestRunReportsAFailedBoot boots a real kernel with no root: it panics,
// and run says so (--json) with exit status 1.
func TestRunReportsAFailedBoot(t *testing.T) {
	testtools.Require(t, qemu.System)
	k := qemutest.FindKernel(t)
	if k == nil {
		t.FailNow()
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	code, stdout, stderr := run(t, "run", "../../../examples/dev-vm.yaml", "--kernel", k.Image, "--append", "console=ttyS0",
		"--memory", "256M", "--cpus", "1", "--timeout", "3m", "--json")
	var rep runReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s\n%s", err, stdout, stderr)
	}
	if code != ExitInvalid || rep.OK || rep.Agent != "cloud-init" || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], "kernel panic") ||
		!strings.Contains(rep.Panic, "VFS") {
		t.Errorf("exit %d, report %+v\n%s", code, rep, stderr)
	}
	for _, want := range []string{"QEMU started", "kernel 6.", "kernel panic"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	// Without --json, the panic is said as one.
	_, _, stderr = run(t, "run", "../../../examples/dev-vm.yaml", "--kernel", k.Image, "--append", "console=ttyS0",
		"--memory", "256M", "--cpus", "1", "--timeout", "3m")
	if !strings.Contains(stderr, "dev: the guest's kernel panicked after") || strings.Contains(stderr, "first boot finished") {
		t.Errorf("a panic reported as:\n%s", stderr)
	}
	// Nothing is left behind in the temporary directory.
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left behind in $TMPDIR: %v", left)
	}
}

// TestRunCompletionsFromTheLibrary: --datasource, --media, --dialect and
// --accel offer the run and qemu packages' lists.
func TestRunCompletionsFromTheLibrary(t *testing.T) {
	for flag, want := range map[string][]string{
		"--datasource": {"nocloud", "configdrive", "fwcfg"},
		"--media":      vmrun.Media,
		"--dialect":    {"ec2", "openstack", "nocloud", "aws"},
		"--accel":      qemu.Accelerators,
	} {
		code, stdout, _ := run(t, "__complete", "run", "x.yaml", flag, "")
		got := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != ExitOK || len(got) < 2 || !slices.Equal(got[:len(got)-1], want) {
			t.Errorf("%s completes to %q, want %q", flag, got, want)
		}
	}
}

// TestRunFIFOsFailAtOnce: a FIFO given as the image, the overlay, the
// kernel or the initrd is refused at once, naming the flag, where run
// used to block on it (and ignore SIGTERM meanwhile).
func TestRunFIFOsFailAtOnce(t *testing.T) {
	testtools.Require(t, qemu.System)
	testtools.Require(t, qemu.Img)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(dir, "disk.raw")
	b := make([]byte, 1<<20)
	b[510], b[511] = 0x55, 0xaa
	os.WriteFile(disk, b, 0o600)
	kernel := filepath.Join(dir, "vmlinuz")
	os.WriteFile(kernel, []byte("not run"), 0o600)
	const spec = "../../../examples/dev-vm.yaml"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--image", fifo}, "--image"},
		{[]string{"--image", disk, "--overlay", fifo}, "overlay " + fifo},
		{[]string{"--kernel", fifo}, "--kernel"},
		{[]string{"--kernel", kernel, "--initrd", fifo}, "--initrd"},
	} {
		code, _, stderr := runWithin(t, append([]string{"run", spec}, c.args...)...)
		if code == ExitOK || !strings.Contains(stderr, "not a regular file (a FIFO)") || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d %s", c.args, code, stderr)
		}
	}
}
