package run

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/lib/qemu"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// qemuImg runs the real qemu-img in dir.
func qemuImg(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(testtools.Require(t, qemu.Img), args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// hostileImages builds, with the real qemu-img, the images of the attack:
// a host file (secret) given to the guest as a backing file or as the
// data file, an nbd:// backing that makes the host connect to listener,
// and a raw disk that starts with a qcow2 header naming the host file.
func hostileImages(t *testing.T, dir string, nbd net.Listener) map[string]string {
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-b", secret, "-F", "raw", "backing.qcow2")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-o", "data_file="+secret+",data_file_raw=on", "datafile.qcow2", "1M")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-o", "data_file=rel.raw", "reldatafile.qcow2", "1M")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-u", "-F", "raw", "-b", "nbd://"+nbd.Addr().String()+"/x", "nbd.qcow2", "1M")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", "backing.qcow2", "chain.qcow2")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-u", "-F", "qcow2", "-b", "nbd.qcow2", "chain-nbd.qcow2", "1M")
	header, err := os.ReadFile(filepath.Join(dir, "backing.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "disk.raw"), append(header, make([]byte, 1<<20)...), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"secret": secret}
}

// TestHostileImagesAreRefused: an image that names a host file (backing
// or data file) or a protocol is refused before QEMU opens anything,
// with each name said; the nbd:// server is never connected to; a raw
// disk with a qcow2 header is refused when probed and is plain raw data
// with --image-format raw; --allow-backing-files admits local files only.
func TestHostileImagesAreRefused(t *testing.T) {
	testtools.Require(t, qemu.System)
	dir := t.TempDir()
	nbd, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer nbd.Close()
	files := hostileImages(t, dir, nbd)
	dev := loadSpec(t, "../../../examples/dev-vm.yaml")
	for _, c := range []struct {
		image, format string
		allow         bool
		want          []string
	}{
		{"backing.qcow2", "", false, []string{`names the backing file "` + files["secret"] + `"`, "--allow-backing-files"}},
		{"datafile.qcow2", "", false, []string{`names the data file "` + files["secret"] + `"`}},
		{"reldatafile.qcow2", "", false, []string{`names the data file "rel.raw" (` + filepath.Join(dir, "rel.raw") + ")"}},
		{"nbd.qcow2", "", false, []string{`"nbd://` + nbd.Addr().String() + `/x" (a network or protocol source, not a file): vminit run never opens one`}},
		{"nbd.qcow2", "", true, []string{"never opens one"}},
		{"chain-nbd.qcow2", "", true, []string{"nbd.qcow2 names the backing file \"nbd://"}},
		{"chain.qcow2", "", false, []string{`names the backing file "backing.qcow2"`, `backing.qcow2 names the backing file "` + files["secret"]}},
		{"disk.raw", "", false, []string{`names the backing file "` + files["secret"] + `"`, "give --image-format raw"}},
		{"disk.raw", "qcow2", false, []string{"--allow-backing-files"}},
		{"secret", "qcow2", false, []string{"--image-format qcow2, but it has no qcow2 header"}},
	} {
		_, err := Start(context.Background(), Options{Instance: dev, Image: filepath.Join(dir, c.image), ImageFormat: c.format, AllowBackingFiles: c.allow})
		if err == nil {
			t.Errorf("%s (format %q, allow %v): started", c.image, c.format, c.allow)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s (format %q, allow %v): %v\nwant it to say %q", c.image, c.format, c.allow, err, w)
			}
		}
	}
	// No connection was made: one would be queued on the listener.
	nbd.(*net.TCPListener).SetDeadline(time.Now())
	if conn, err := nbd.Accept(); err == nil {
		conn.Close()
		t.Error("the host connected to the nbd:// backing")
	}

	// What is admitted: a raw disk read as raw, local backing files opted in.
	for _, c := range []struct {
		image, format string
		allow         bool
		wantFormat    string
	}{
		{"disk.raw", "raw", false, "raw"},
		{"backing.qcow2", "", true, "qcow2"},
		{"chain.qcow2", "qcow2", true, "qcow2"},
		{"datafile.qcow2", "", true, "qcow2"},
	} {
		cfg, err := configure(Options{Instance: dev, Image: filepath.Join(dir, c.image), ImageFormat: c.format, AllowBackingFiles: c.allow})
		if err != nil {
			t.Fatal(err)
		}
		img, err := cfg.checkInputs(context.Background())
		if err != nil || img.Format != c.wantFormat {
			t.Errorf("%s (format %q, allow %v): %v, %+v; want it admitted as %s", c.image, c.format, c.allow, err, img, c.wantFormat)
		}
	}
}

// TestKeptOverlayMayOnlyDependOnTheImage: a kept overlay is created 0600
// and reused; one that names a data file (the guest would write a host
// file through it) or another backing file is refused.
func TestKeptOverlayMayOnlyDependOnTheImage(t *testing.T) {
	testtools.Require(t, qemu.Img)
	dir := t.TempDir()
	base := mbrDisk(t, dir)
	img := &qemu.Image{Format: qemu.Raw}
	kept := filepath.Join(dir, "kept.qcow2")
	if err := overlay(context.Background(), img, base, kept); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(kept); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("kept overlay: %v, mode %v; want 0600", err, st.Mode())
	}
	if err := overlay(context.Background(), img, base, kept); err != nil {
		t.Errorf("reusing the kept overlay: %v", err)
	}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", "-o", "data_file="+victim, "writes-victim.qcow2")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-b", victim, "-F", "raw", "other-base.qcow2")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-b", base, "-F", "qcow2", "-u", "wrong-format.qcow2", "1M")
	for name, want := range map[string]string{
		"writes-victim.qcow2": `names the data file "` + victim + `"`,
		"other-base.qcow2":    `names the backing file "` + victim + `"`,
		"wrong-format.qcow2":  "is not a qcow2 overlay of " + base,
	} {
		err := overlay(context.Background(), img, base, filepath.Join(dir, name))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("kept overlay %s: %v; want it refused saying %q", name, err, want)
		}
	}
	// The same through Start, as `vminit run --overlay` gets it.
	_, err := Start(context.Background(), Options{Instance: loadSpec(t, "../../../examples/dev-vm.yaml"), Image: base, Overlay: filepath.Join(dir, "writes-victim.qcow2")})
	if err == nil || !strings.Contains(err.Error(), "names the data file") {
		t.Errorf("Start with a kept overlay naming a data file: %v", err)
	}
}

// TestAllowedChainsHoldOnlyFiles: --allow-backing-files admits local
// files, not what lies behind them: a backing file of another format than
// qcow2 or raw (a VMDK descriptor names extents, host files QEMU hands to
// the guest, which neither the headers read nor the backing chain show)
// is refused, and so is a backing or data file that is a FIFO (qemu-img
// would block opening it) or a device.
func TestAllowedChainsHoldOnlyFiles(t *testing.T) {
	testtools.Require(t, qemu.Img)
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	vmdk := "# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\n\nRW 2048 FLAT \"" + secret + "\" 0\n"
	if err := os.WriteFile(filepath.Join(dir, "extents.vmdk"), []byte(vmdk), 0o600); err != nil {
		t.Fatal(err)
	}
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-b", "extents.vmdk", "-F", "vmdk", "vmdk.qcow2")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-u", "-b", "fifo", "-F", "raw", "fifo.qcow2", "1M")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-u", "-b", "/dev/null", "-F", "raw", "device.qcow2", "1M")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-u", "-b", "fifo.qcow2", "-F", "qcow2", "chain-fifo.qcow2", "1M")
	// A data file swapped for a FIFO once the image is made.
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-o", "data_file=data", "fifo-data.qcow2", "1M")
	if err := os.Remove(filepath.Join(dir, "data")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "data"), 0o600); err != nil {
		t.Fatal(err)
	}
	for image, want := range map[string]string{
		"vmdk.qcow2":       `names the backing file "extents.vmdk" (` + filepath.Join(dir, "extents.vmdk") + `) of format vmdk`,
		"fifo.qcow2":       "a FIFO",
		"device.qcow2":     "a character device",
		"chain-fifo.qcow2": "a FIFO",
		"fifo-data.qcow2":  "a FIFO",
	} {
		// The timeout ends a qemu-img blocked on the FIFO, on the old code.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := checkImage(ctx, filepath.Join(dir, image), qemu.QCOW2, true)
		cancel()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s with --allow-backing-files: %v\nwant it refused saying %q", image, err, want)
		}
	}
}
