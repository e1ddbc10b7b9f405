package guesttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/lib/qemu"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// Bounds of the disks a storage test gives a guest: sparse on the host, but
// the guest may fill them (run's Options.Disks attaches at most 8).
const (
	MaxDisks    = 8
	MaxDiskSize = 4 << 30 // bytes, per extra disk
	MaxRootGrow = 4 << 30 // bytes added to a root disk
)

// Disks creates n empty sparse raw disks of size bytes under t.TempDir(),
// for run.Options.Disks. They are kept until the test ends, so a second
// boot with the same paths sees what the first wrote.
func Disks(t testing.TB, n int, size int64) []string {
	t.Helper()
	if n < 1 || n > MaxDisks || size < 1<<20 || size > MaxDiskSize {
		t.Fatalf("guesttest.Disks(%d, %d): want 1 to %d disks of 1 MiB to %d bytes", n, size, MaxDisks, int64(MaxDiskSize))
	}
	dir := t.TempDir()
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("disk%d.raw", i+1))
		f, err := os.OpenFile(paths[i], os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			err = f.Truncate(size) // a hole: no blocks until the guest writes
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// GrownOverlay creates, under t.TempDir(), a qcow2 overlay of the qcow2
// image base whose disk is grow bytes larger than base's: the root
// partition and file system on it are then smaller than their disk, for
// growpart or Ignition's resize to grow. Give it as run.Options.Overlay
// (run boots an existing overlay of its image as is); a second Start with
// the same Overlay boots the same disk again.
func GrownOverlay(t testing.TB, base string, grow int64) string {
	t.Helper()
	if grow < 1<<20 || grow > MaxRootGrow {
		t.Fatalf("guesttest.GrownOverlay(%d): want 1 MiB to %d bytes", grow, int64(MaxRootGrow))
	}
	img := testtools.Require(t, qemu.Img)
	path := filepath.Join(t.TempDir(), "root.qcow2")
	for _, args := range [][]string{
		{"create", "-q", "-f", qemu.QCOW2, "-F", qemu.QCOW2, "-b", base, path},
		{"resize", "-q", "-f", qemu.QCOW2, path, "+" + strconv.FormatInt(grow, 10)},
	} {
		if out, err := exec.Command(img, args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return path
}
