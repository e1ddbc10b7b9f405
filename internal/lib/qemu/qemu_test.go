package qemu

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

func TestFindNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for name, pkg := range map[string]string{System: "qemu-system-x86", Img: "qemu-utils"} {
		_, err := Find(name)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "apt-get install --no-install-recommends "+pkg) {
			t.Errorf("Find(%s) without QEMU: %v; want ErrNotFound naming %s", name, err, pkg)
		}
	}
}

func TestAccelChoices(t *testing.T) {
	if a, err := Accel("/nonexistent/qemu", "tcg"); err != nil || strings.Join(a, " ") != "-accel tcg" {
		t.Errorf("Accel(tcg) = %v, %v", a, err)
	}
	if _, err := Accel("/nonexistent/qemu", "xen"); err == nil || !strings.Contains(err.Error(), "auto, kvm, tcg") {
		t.Errorf("Accel(xen): %v; want the choices listed", err)
	}
	t.Setenv("VMINIT_QEMU_NO_KVM", "1")
	if a, _ := Accel("/nonexistent/qemu", "auto"); strings.Join(a, " ") != "-accel tcg" {
		t.Errorf("Accel(auto) with VMINIT_QEMU_NO_KVM = %v", a)
	}
}

// TestProbeKVMAgreesWithQEMU runs the probe against the real QEMU: its
// answer must be what a paused KVM start says.
func TestProbeKVMAgreesWithQEMU(t *testing.T) {
	q := testtools.Require(t, System)
	err := ProbeKVM(q)
	if _, statErr := os.Stat("/dev/kvm"); statErr != nil && err == nil {
		t.Fatal("ProbeKVM says KVM works without /dev/kvm")
	}
	if err != nil && !strings.HasPrefix(err.Error(), "KVM: ") {
		t.Errorf("probe error %q: want it to start with KVM:", err)
	}
	a, aerr := Accel(q, "kvm")
	if (err == nil) != (aerr == nil) || (err == nil && a[1] != "kvm") {
		t.Errorf("Accel(kvm) = %v, %v; ProbeKVM = %v", a, aerr, err)
	}
	t.Logf("KVM here: %v", err)
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDetectImageRefusesWhatIsNotADisk(t *testing.T) {
	iso := make([]byte, 0x9000)
	copy(iso[0x8001:], "CD001")
	vfat := make([]byte, 1024)
	vfat[0] = 0xeb
	copy(vfat[54:], "FAT12   ")
	vfat[510], vfat[511] = 0x55, 0xaa
	tarball := make([]byte, 1024)
	copy(tarball[257:], "ustar")
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "an empty file"},
		{"seed.iso", iso, "an ISO9660 image"},
		{"seed.img", vfat, "a FAT filesystem image"},
		{"image.tar", tarball, "a tar archive"},
		{"image.qcow2.xz", []byte("\xfd7zXZ\x00rest"), "xz-compressed"},
		{"image.gz", []byte("\x1f\x8b\x08rest"), "gzip-compressed"},
		{"user-data", []byte("#cloud-config\nhostname: x\n"), "a cloud-config file"},
		{"config.ign", []byte(`{"ignition": {"version": "3.4.0"}}`), "an Ignition config"},
		{"instance.yaml", []byte("apiVersion: vminit.dev/v1\nkind: Instance\n"), "instance spec is the first argument"},
		{"vmlinux", []byte("\x7fELF\x02\x01\x01"), "kernel"},
		{"disk.vmdk", []byte("KDMV\x01\x00\x00\x00"), "qemu-img convert"},
	} {
		_, err := DetectImage(writeFile(t, c.name, c.data), "")
		if !errors.Is(err, ErrNotDiskImage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrNotDiskImage saying %q", c.name, err, c.want)
		}
	}
	if _, err := DetectImage(t.TempDir(), ""); !errors.Is(err, ErrNotDiskImage) {
		t.Errorf("a directory: %v", err)
	}
}

func TestDetectImageKnowsDisks(t *testing.T) {
	mbr := make([]byte, 4096)
	mbr[510], mbr[511] = 0x55, 0xaa
	gpt := make([]byte, 4096)
	copy(gpt[0x200:], "EFI PART")
	ext4 := make([]byte, 4096)
	binary.LittleEndian.PutUint16(ext4[1024+56:], 0xEF53)
	binary.LittleEndian.PutUint32(ext4[1024+0x60:], 0x40) // extents
	for _, c := range []struct {
		name   string
		data   []byte
		format string
		bare   bool
	}{
		{"mbr.raw", mbr, Raw, false},
		{"gpt.raw", gpt, Raw, false},
		{"root.ext4", ext4, Raw, true},
		{"disk.qcow2", []byte("QFI\xfb\x00\x00\x00\x03"), QCOW2, false},
	} {
		img, err := DetectImage(writeFile(t, c.name, c.data), "")
		if err != nil || img.Format != c.format || img.BareFS != c.bare {
			t.Errorf("%s: %+v, %v; want format %s, bare %v", c.name, img, err, c.format, c.bare)
		}
	}
}

// TestDetectImageAgreesWithRealTools checks the magic against images the
// real tools make: qemu-img's qcow2 and mkfs.ext4's filesystem.
func TestDetectImageAgreesWithRealTools(t *testing.T) {
	img := testtools.Require(t, Img)
	dir := t.TempDir()
	q := filepath.Join(dir, "disk.qcow2")
	if out, err := exec.Command(img, "create", "-f", "qcow2", q, "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	if got, err := DetectImage(q, ""); err != nil || got.Format != QCOW2 {
		t.Errorf("qemu-img's qcow2: %+v, %v", got, err)
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		return
	}
	e := filepath.Join(dir, "root.ext4")
	if out, err := exec.Command(mkfs, "-q", "-F", e, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	if got, err := DetectImage(e, ""); err != nil || !got.BareFS || got.Kind != "ext4 filesystem" {
		t.Errorf("mkfs.ext4's filesystem: %+v, %v", got, err)
	}
}

// TestQCOW2HeaderHostileFields: a header whose offsets and lengths point
// anywhere is an error, never a panic or a read beyond what was read.
func TestQCOW2HeaderHostileFields(t *testing.T) {
	h := make([]byte, 512)
	copy(h, "QFI\xfb")
	binary.BigEndian.PutUint32(h[4:], 3)
	binary.BigEndian.PutUint32(h[100:], 104)
	for name, set := range map[string]func(b []byte){
		"backing offset wraps": func(b []byte) { binary.BigEndian.PutUint64(b[8:], ^uint64(0)); binary.BigEndian.PutUint32(b[16:], 2) },
		"backing beyond":       func(b []byte) { binary.BigEndian.PutUint64(b[8:], 500); binary.BigEndian.PutUint32(b[16:], 100) },
		"extension beyond": func(b []byte) {
			binary.BigEndian.PutUint32(b[104:], extDataFile)
			binary.BigEndian.PutUint32(b[108:], 1<<31)
		},
		"header length beyond": func(b []byte) { binary.BigEndian.PutUint32(b[100:], ^uint32(0)) },
		"no end of extensions": func(b []byte) {
			binary.BigEndian.PutUint32(b[104:], 0x12345678)
			binary.BigEndian.PutUint32(b[108:], 400)
		},
		"version 4": func(b []byte) { binary.BigEndian.PutUint32(b[4:], 4) },
	} {
		b := append([]byte(nil), h...)
		set(b)
		if _, err := parseQCOW2Header(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := parseQCOW2Header(h); err != nil {
		t.Errorf("a plain v3 header: %v", err)
	}
}
