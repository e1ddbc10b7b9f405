package qemutest

import (
	"bytes"
	"crypto/rand"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// seedFiles is the tree both reference images carry.
var seedFiles = map[string]string{
	"user-data":      "#cloud-config\nhostname: qemutest\nruncmd:\n  - [sh, -c, 'echo hello > /run/hello']\n",
	"meta-data":      "instance-id: iid-qemutest-0001\nlocal-hostname: qemutest\n",
	"network-config": "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n",
	"scripts/per-boot/a-rather-long-script-name.sh": "#!/bin/sh\necho per-boot\n",
	"scripts/empty": "",
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "tree")
	for p, s := range files {
		f := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(f, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, mode); err != nil { // umask-proof
			t.Fatal(err)
		}
	}
	return root
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
}

// referenceISO builds the seed with genisoimage, the reference tool.
func referenceISO(t *testing.T, label string) string {
	genisoimage := testtools.Require(t, "genisoimage")
	root := writeTree(t, seedFiles)
	iso := filepath.Join(t.TempDir(), label+".iso")
	run(t, genisoimage, "-quiet", "-o", iso, "-V", label, "-J", "-R", root)
	return iso
}

// referenceVFAT builds the seed with mkfs.vfat and mtools.
func referenceVFAT(t *testing.T) string {
	mkfs := testtools.Require(t, "mkfs.vfat")
	mcopy := testtools.Require(t, "mcopy")
	mmd := testtools.Require(t, "mmd")
	img := filepath.Join(t.TempDir(), "seed.img")
	run(t, mkfs, "-n", "CIDATA", "-C", img, "2048")
	dirs := map[string]bool{}
	var paths []string
	for p := range seedFiles {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	root := writeTree(t, seedFiles)
	for _, p := range paths {
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds) // parents first
	for _, d := range ds {
		run(t, mmd, "-i", img, "::/"+d)
	}
	for _, p := range paths {
		run(t, mcopy, "-i", img, filepath.Join(root, filepath.FromSlash(p)), "::/"+p)
	}
	return img
}

// wantTree is seedFiles plus its directories.
func wantTree() map[string]bool {
	w := map[string]bool{}
	for p := range seedFiles {
		w[p] = true
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			w[d] = true
		}
	}
	return w
}

func checkTree(t *testing.T, what string, f *FS) {
	t.Helper()
	want := wantTree()
	for p := range want {
		if _, ok := f.Files[p]; !ok {
			t.Errorf("%s: kernel does not show %q", what, p)
		}
	}
	for p := range f.Files {
		if !want[p] {
			t.Errorf("%s: kernel shows unexpected %q", what, p)
		}
	}
	for p, s := range seedFiles {
		e, ok := f.Files[p]
		if !ok {
			continue
		}
		if !e.Mode.IsRegular() {
			t.Errorf("%s: %q has mode %v, want a regular file", what, p, e.Mode)
		}
		if e.Size != int64(len(s)) || !bytes.Equal(e.Data, []byte(s)) {
			t.Errorf("%s: %q is %d bytes %q, want %d bytes %q", what, p, e.Size, e.Data, len(s), s)
		}
	}
	for p := range want {
		if _, isFile := seedFiles[p]; !isFile {
			if e, ok := f.Files[p]; ok && !e.Mode.IsDir() {
				t.Errorf("%s: %q has mode %v, want a directory", what, p, e.Mode)
			}
		}
	}
}

// TestReferenceImages proves the harness in one boot: the guest kernel mounts
// a genisoimage ISO through its Rock Ridge, Joliet and plain ISO 9660 views
// (as a CD-ROM) and as a virtio disk, an mkfs.vfat+mtools image, and reads a
// 100 KiB fw_cfg blob.
func TestReferenceImages(t *testing.T) {
	iso := referenceISO(t, "cidata")
	configDrive := referenceISO(t, "config-2") // OpenStack's config drive label
	vfat := referenceVFAT(t)
	blob := make([]byte, 100<<10)
	rand.Read(blob)
	blobFile := filepath.Join(t.TempDir(), "config.ign")
	if err := os.WriteFile(blobFile, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	const fwName = "opt/com.coreos/config"

	start := time.Now()
	rep := Inspect(t, Probe{
		Mounts: []Mount{
			{Image: iso, View: ISO9660, Label: "cidata"},
			{Image: iso, View: Joliet},
			{Image: iso, View: ISO9660Plain},
			{Image: vfat, View: VFAT, Label: "CIDATA"},
			{Image: configDrive, View: ISO9660, Disk: true, Label: "config-2"},
		},
		FwCfg: map[string]string{fwName: blobFile},
	})
	t.Logf("boot took %v (kernel %s)", time.Since(start), rep.Result.Kernel)
	rock, joliet, plain, fat, isoDisk := rep.FS[0], rep.FS[1], rep.FS[2], rep.FS[3], rep.FS[4]

	t.Run("RockRidge", func(t *testing.T) {
		checkTree(t, "iso9660", rock)
		if !strings.Contains(rock.MountLine, " iso9660 ro") {
			t.Errorf("mount line %q", rock.MountLine)
		}
		// Rock Ridge carries the POSIX permissions genisoimage -R recorded.
		if m := rock.Files["scripts/per-boot/a-rather-long-script-name.sh"].Mode; m != 0o755 {
			t.Errorf("script mode %v, want -rwxr-xr-x", m)
		}
		if m := rock.Files["user-data"].Mode; m != 0o644 {
			t.Errorf("user-data mode %v, want -rw-r--r--", m)
		}
		if !rock.LabelFound {
			t.Errorf("findfs LABEL=cidata found %q, not %s", rock.LabelDevice, rock.Device)
		}
	})
	t.Run("Joliet", func(t *testing.T) {
		checkTree(t, "iso9660 norock", joliet)
		if !strings.Contains(joliet.MountLine, "norock") {
			t.Errorf("mount line %q lacks norock", joliet.MountLine)
		}
		// Without Rock Ridge the kernel makes up the permissions.
		if m := joliet.Files["user-data"].Mode; m == 0o644 {
			t.Errorf("Joliet view shows the Rock Ridge mode %v; is it really norock?", m)
		}
	})
	t.Run("PlainISO9660", func(t *testing.T) {
		if _, ok := plain.Files["user-data"]; ok {
			t.Errorf("plain ISO 9660 view shows the long name user-data: %v", plain.Paths())
		}
		if len(plain.Regular()) != len(seedFiles) {
			t.Errorf("plain view has %d files, want %d: %v", len(plain.Regular()), len(seedFiles), plain.Paths())
		}
		t.Logf("8.3 names: %v", plain.Paths())
	})
	t.Run("VFAT", func(t *testing.T) {
		checkTree(t, "vfat", fat)
		if !strings.Contains(fat.MountLine, " vfat ro") {
			t.Errorf("mount line %q", fat.MountLine)
		}
		if !fat.LabelFound {
			t.Errorf("findfs LABEL=CIDATA found %q, not %s", fat.LabelDevice, fat.Device)
		}
	})
	t.Run("ISOOnDisk", func(t *testing.T) {
		checkTree(t, "iso9660 on virtio disk", isoDisk)
		if !strings.HasPrefix(isoDisk.MountLine, "/dev/vd") {
			t.Errorf("mount line %q: not a virtio disk", isoDisk.MountLine)
		}
		if !isoDisk.LabelFound {
			t.Errorf("findfs LABEL=config-2 found %q, not %s", isoDisk.LabelDevice, isoDisk.Device)
		}
	})
	t.Run("FwCfg", func(t *testing.T) {
		if got := rep.FwCfg[fwName]; !bytes.Equal(got, blob) {
			t.Errorf("fw_cfg %s: read back %d bytes, differ from the %d written", fwName, len(got), len(blob))
		}
	})
	for i, f := range rep.FS {
		if strings.TrimSpace(f.Dmesg) != "" {
			t.Logf("mount %d (%s) kernel messages:\n%s", i, f.View, f.Dmesg)
		}
	}
}

// TestFailures checks in one boot that the harness reports a guest failure
// instead of passing: mounting a file that is no ISO 9660 image.
func TestFailures(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk.iso")
	if err := os.WriteFile(junk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Run(t, Machine{
		CDROMs: []string{junk},
		Script: `qt_mountdump 0 "$(qt_cdrom 0)" iso9660 ro`,
	})
	if err == nil {
		t.Fatalf("mounting zeros as iso9660 succeeded: %+v", res.Records)
	}
	if !strings.Contains(err.Error(), "mount -t iso9660") {
		t.Errorf("error does not name the failed mount: %v", err)
	}
}

// TestTimeout checks that a hung guest is killed at Machine.Timeout.
func TestTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM that hangs")
	}
	start := time.Now()
	_, err := Run(t, Machine{Script: "sleep 600", Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Run returned after %v, want ~5s", d)
	}
}
