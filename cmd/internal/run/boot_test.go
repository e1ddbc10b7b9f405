package run

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/lib/qemu"
	"github.com/vminit/vminit/internal/testing/guesttest"
	"github.com/vminit/vminit/internal/testing/qemutest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
)

// bootKernel returns the qemutest kernel (a real Debian kernel), or skips.
func bootKernel(t *testing.T) string {
	t.Helper()
	testtools.Require(t, qemu.System)
	testtools.Require(t, qemu.Img)
	k := qemutest.FindKernel(t)
	if k == nil {
		t.FailNow()
	}
	return k.Image
}

// shortGrace shortens stopGrace for a test whose kernel has no userspace
// to handle the power button, until the test and its cleanups are done.
func shortGrace(t *testing.T, d time.Duration) {
	old := stopGrace
	stopGrace = d
	t.Cleanup(func() { stopGrace = old })
}

// mbrDisk writes a small raw disk with a partition table signature.
func mbrDisk(t *testing.T, dir string) string {
	t.Helper()
	b := make([]byte, 1<<20)
	b[510], b[511] = 0x55, 0xaa
	p := filepath.Join(dir, "base.raw")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func start(t *testing.T, o Options) *Guest {
	t.Helper()
	g, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Stop() })
	return g
}

// A kernel that waits for a root device that never comes: it boots, then
// nothing reports, and no panic ends the wait.
const waitForever = "console=ttyS0 root=/dev/nonexistent rootwait " + guesttest.NoTimerCheck

// TestGuestThatNeverReports boots a real kernel whose root never appears:
// WaitFirstBoot gives up at the timeout with the last console lines, Stop
// ends QEMU (the kernel ignores the power button without a userspace, so
// after the grace period) and removes the temporary directory.
func TestGuestThatNeverReports(t *testing.T) {
	kernel := bootKernel(t)
	shortGrace(t, 2*time.Second)
	var progress testtools.SyncBuffer
	g := start(t, Options{Instance: loadSpec(t, "../../../examples/dev-vm.yaml"), Image: mbrDisk(t, t.TempDir()),
		Kernel: kernel, Append: waitForever, Memory: "256M", CPUs: 1, Timeout: 15 * time.Second, Progress: &progress})
	res, err := g.WaitFirstBoot(context.Background())
	if !errors.Is(err, ErrTimeout) || res.Err != err {
		t.Fatalf("WaitFirstBoot: %v (result %+v); want ErrTimeout", err, res)
	}
	if !strings.Contains(err.Error(), "the kernel booted; cloud-init never started") {
		t.Errorf("error %q does not say how far the boot got", err)
	}
	if !strings.Contains(res.ConsoleTail, "Waiting for root device /dev/nonexistent") || strings.Count(res.ConsoleTail, "\n") >= consoleTailLines {
		t.Errorf("console tail (%d lines) lacks the kernel's last words:\n%s", strings.Count(res.ConsoleTail, "\n")+1, res.ConsoleTail)
	}
	dir := g.dir
	if _, err := os.Stat(filepath.Join(dir, "seed.iso")); err != nil {
		t.Errorf("the seed is not in the run's directory while it runs: %v", err)
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Stop left %s behind (%v)", dir, err)
	}
	if !bytes.Contains(g.Console(), []byte("Linux version")) {
		t.Error("Console() lost the start of the boot")
	}
	for _, want := range []string{"QEMU started: cloud-init, nocloud iso9660", "kernel 6.", "stopping the guest", "stopping QEMU"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	t.Logf("progress:\n%s", progress.String())
}

// TestKernelPanicEndsTheWait: a guest that panics has finished its boot,
// badly: the verdict comes at once, not at the timeout.
func TestKernelPanicEndsTheWait(t *testing.T) {
	kernel := bootKernel(t)
	shortGrace(t, 2*time.Second)
	g := start(t, Options{Instance: loadSpec(t, "../../../examples/fcos-server.yaml"),
		Kernel: kernel, Append: "console=ttyS0 " + guesttest.NoTimerCheck, Memory: "256M", CPUs: 1, Timeout: 3 * time.Minute})
	res, err := g.WaitFirstBoot(context.Background())
	if err != nil {
		t.Fatalf("WaitFirstBoot: %v", err)
	}
	if res.OK || len(res.Errors) != 1 || !strings.Contains(res.Errors[0], "kernel panic: VFS: Unable to mount root fs") || res.Agent != "ignition" {
		t.Errorf("result %+v; want one kernel panic error", res)
	}
}

// TestOverlayKeepsTheBaseImage boots an overlay of a raw disk, writes to
// the guest's disk through QEMU's own block layer (qemu-io from the
// monitor, as a guest's writes arrive), and checks that the base image's
// bytes are unchanged while the kept overlay holds the write, also after a
// second boot of the same overlay.
func TestOverlayKeepsTheBaseImage(t *testing.T) {
	kernel := bootKernel(t)
	shortGrace(t, 2*time.Second)
	dir := t.TempDir()
	base := mbrDisk(t, dir)
	before := sha(t, base)
	keep := filepath.Join(dir, "kept.qcow2")
	o := Options{Instance: loadSpec(t, "../../../examples/dev-vm.yaml"), Image: base, Overlay: keep,
		Kernel: kernel, Append: waitForever, Memory: "256M", CPUs: 1, Media: "vfat"}
	for boot := 1; boot <= 2; boot++ {
		g := start(t, o)
		if boot == 1 {
			// qemu-io prints on QEMU's standard output: the console.
			if _, err := hmp(g.qmp, `qemu-io virtio0 "write -P 0xab 4096 4096"`); err != nil {
				t.Fatal(err)
			}
			waitConsole(t, g, "wrote 4096/4096 bytes")
		}
		if err := g.Stop(); err != nil {
			t.Fatal(err)
		}
		if got := sha(t, base); got != before {
			t.Fatalf("boot %d changed the base image", boot)
		}
		raw := filepath.Join(dir, "flat.raw")
		if out, err := exec.Command("qemu-img", "convert", "-O", "raw", keep, raw).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img convert: %v\n%s", err, out)
		}
		b, _ := os.ReadFile(raw)
		if len(b) < 8192 || !bytes.Equal(b[4096:8192], bytes.Repeat([]byte{0xab}, 4096)) || b[510] != 0x55 {
			t.Fatalf("boot %d: the kept overlay does not hold the base plus the write", boot)
		}
	}
	// An overlay of another base is refused.
	o.Image = mbrDisk(t, t.TempDir())
	if _, err := Start(context.Background(), o); err == nil || !strings.Contains(err.Error(), "is not a qcow2 overlay of") {
		t.Errorf("an overlay of another image: %v", err)
	}
}

func sha(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestErrorsAUserHits checks the messages for the mistakes a user makes
// before any guest runs: no QEMU on PATH, a seed given as the disk image,
// a bare filesystem without a kernel.
func TestErrorsAUserHits(t *testing.T) {
	dev := loadSpec(t, "../../../examples/dev-vm.yaml")
	dir := t.TempDir()
	t.Run("no QEMU", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := Start(context.Background(), Options{Instance: dev, Image: mbrDisk(t, dir)})
		if err == nil || !strings.Contains(err.Error(), "qemu-system-x86_64 not found on PATH") || !strings.Contains(err.Error(), "qemu-system-x86") {
			t.Errorf("%v", err)
		}
	})
	testtools.Require(t, qemu.System)
	t.Run("a seed as the image", func(t *testing.T) {
		s, err := seed.Build(dev, seed.NoCloud, seed.Options{})
		if err != nil {
			t.Fatal(err)
		}
		iso := filepath.Join(dir, "seed.iso")
		f, _ := os.Create(iso)
		media.Write(f, s, media.ISO9660, media.Options{})
		f.Close()
		_, err = Start(context.Background(), Options{Instance: dev, Image: iso})
		if !errors.Is(err, qemu.ErrNotDiskImage) || !strings.Contains(err.Error(), "ISO9660") {
			t.Errorf("%v", err)
		}
	})
	t.Run("a bare filesystem without a kernel", func(t *testing.T) {
		mkfs, err := exec.LookPath("mkfs.ext4")
		if err != nil {
			t.Skip("no mkfs.ext4")
		}
		e := filepath.Join(dir, "root.ext4")
		if out, err := exec.Command(mkfs, "-q", "-F", e, "8M").CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		_, err = Start(context.Background(), Options{Instance: dev, Image: e})
		if err == nil || !strings.Contains(err.Error(), "without a boot loader: give the kernel") {
			t.Errorf("%v", err)
		}
	})
}

// waitConsole waits until the guest's console shows want.
func waitConsole(t *testing.T, g *Guest, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !bytes.Contains(g.Console(), []byte(want)) {
		select {
		case <-g.exited:
			t.Fatalf("QEMU exited before the console showed %q: %v%s\n%s", want, g.exitStatus(), g.qemuSaid(), tail(g.Console(), 20))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console never showed %q:\n%s", want, tail(g.Console(), 20))
		}
	}
}

// TestServeBootsWithTheDialectsSMBIOS boots QEMU with each serve mode's
// command line (user network, guestfwd relay, SMBIOS) and reads back, from
// the real kernel's boot log, the system vendor and product the guest's
// cloud-init will see.
func TestServeBootsWithTheDialectsSMBIOS(t *testing.T) {
	kernel := bootKernel(t)
	shortGrace(t, time.Second)
	dev := loadSpec(t, "../../../examples/dev-vm.yaml")
	for _, c := range []struct{ dialect, dmi string }{
		{"ec2", "DMI: Amazon EC2 vminit"},
		{"openstack", "DMI: OpenStack Foundation OpenStack Nova"},
		{"nocloud", "DMI: QEMU Standard PC"},
	} {
		g := start(t, Options{Instance: dev, Serve: true, Dialect: c.dialect, SSHPort: testtools.FreePort(t),
			Kernel: kernel, Append: waitForever, Memory: "256M", CPUs: 1})
		waitConsole(t, g, c.dmi)
		if err := g.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRelativePathsBoot: the image, the kept overlay and the kernel given
// relative to the working directory, as docs/run.md's example does, boot
// (QEMU runs in the temporary directory, so run makes them absolute).
func TestRelativePathsBoot(t *testing.T) {
	kernel := bootKernel(t)
	shortGrace(t, time.Second)
	dev := loadSpec(t, "../../../examples/dev-vm.yaml")
	dir := t.TempDir()
	mbrDisk(t, dir)
	t.Chdir(dir)
	relKernel, err := filepath.Rel(dir, kernel)
	if err != nil {
		t.Fatal(err)
	}
	g := start(t, Options{Instance: dev, Image: "base.raw", Overlay: "kept.qcow2",
		Kernel: relKernel, Append: waitForever, Memory: "256M", CPUs: 1})
	waitConsole(t, g, "Linux version")
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kept.qcow2")); err != nil {
		t.Errorf("the kept overlay is not where --overlay said: %v", err)
	}
}

// TestKilledRunIsReaped kills a process running a guest with SIGKILL,
// which no cleanup survives: its temporary directory (with the seed) is
// left, QEMU dies with it, and the next Start removes the directory. A
// directory whose run is alive, and one without a pid file, are kept.
func TestKilledRunIsReaped(t *testing.T) {
	kernel := bootKernel(t)
	shortGrace(t, time.Second)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunHelperProcess$")
	cmd.Env = append(os.Environ(), "VMINIT_RUN_HELPER_KERNEL="+kernel)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	dir, ok := strings.CutPrefix(strings.TrimSpace(line), "STARTED ")
	cmd.Process.Kill()
	cmd.Wait()
	if !ok {
		t.Fatalf("the helper said %q", line)
	}
	if _, err := os.Stat(filepath.Join(dir, "seed.iso")); err != nil {
		t.Fatalf("SIGKILL left no seed to reap (%v): the test proves nothing", err)
	}
	live := filepath.Join(tmp, runDirPrefix+"live")
	creating := filepath.Join(tmp, runDirPrefix+"creating")
	os.Mkdir(live, 0o700)
	os.WriteFile(filepath.Join(live, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600)
	os.Mkdir(creating, 0o700)

	g := start(t, Options{Instance: loadSpec(t, "../../../examples/dev-vm.yaml"), Kernel: kernel, Append: waitForever, Memory: "256M", CPUs: 1})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the killed run's %s is still there (%v)", dir, err)
	}
	for _, d := range []string{live, creating, g.dir} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}

// TestRunHelperProcess is the process TestKilledRunIsReaped kills: it
// starts a guest, says where its directory is, and waits.
func TestRunHelperProcess(t *testing.T) {
	kernel := os.Getenv("VMINIT_RUN_HELPER_KERNEL")
	if kernel == "" {
		t.Skip("the process TestKilledRunIsReaped starts and kills")
	}
	g, err := Start(context.Background(), Options{Instance: loadSpec(t, "../../../examples/dev-vm.yaml"), Kernel: kernel, Append: waitForever, Memory: "256M", CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("STARTED %s\n", g.dir)
	select {}
}
