package run

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// TestPrepareDisks: --disk SIZE is a sparse raw file of that size in the
// run's directory; --disk FILE is attached as raw unless it is a qcow2,
// whose chain is checked as the image's; a missing file, a FIFO and a
// qcow2 naming a backing file are refused, each naming the disk.
func TestPrepareDisks(t *testing.T) {
	testtools.Require(t, "qemu-img")
	dir, runDir := t.TempDir(), t.TempDir()
	data := filepath.Join(dir, "data.img")
	if err := os.WriteFile(data, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "blank.qcow2", "64M")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", "blank.qcow2", "backed.qcow2")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}

	c := &config{Options: Options{Disks: []string{"2GiB", data, filepath.Join(dir, "blank.qcow2")}}}
	got, err := c.prepareDisks(context.Background(), runDir)
	if err != nil {
		t.Fatal(err)
	}
	want := []extraDisk{{filepath.Join(runDir, "disk1.raw"), "raw"}, {data, "raw"}, {filepath.Join(dir, "blank.qcow2"), "qcow2"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("disks %v, want %v", got, want)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(runDir, "disk1.raw"), &st); err != nil || st.Size != 2<<30 || st.Blocks > 8 {
		t.Errorf("disk1.raw: %d bytes, %d blocks (%v); want 2 GiB, sparse", st.Size, st.Blocks, err)
	}

	for d, want := range map[string]string{
		filepath.Join(dir, "missing"):      "missing: no such file (a size is written like 10GiB or 512MiB)",
		"10G":                              "10G: no such file (a size is written like 10GiB",
		filepath.Join(dir, "fifo"):         "not a disk image",
		filepath.Join(dir, "backed.qcow2"): "blank.qcow2",
	} {
		c := &config{Options: Options{Disks: []string{d}}}
		if _, err := c.prepareDisks(context.Background(), t.TempDir()); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--disk") {
			t.Errorf("--disk %s: %v; want an error saying %q", d, err, want)
		}
	}
}

func TestConfigureDisksBounded(t *testing.T) {
	dev := loadSpec(t, "../../../examples/dev-vm.yaml")
	disks := make([]string, MaxDisks+1)
	for i := range disks {
		disks[i] = "1GiB"
	}
	if _, err := configure(Options{Instance: dev, Image: "x", Disks: disks}); err == nil || !strings.Contains(err.Error(), "disk: 9 extra disks; at most 8") {
		t.Errorf("%v", err)
	}
}
