package media

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/seed"
)

var testSeed = &seed.Seed{Datasource: seed.ConfigDrive, Label: "config-2", Files: []seed.File{
	{Path: "openstack/latest/meta_data.json", Data: []byte(`{"uuid": "x"}` + "\n")},
	{Path: "openstack/latest/user_data", Data: []byte("#cloud-config\n")},
}}

var testTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func TestParseFormat(t *testing.T) {
	for _, f := range Formats {
		if got, err := ParseFormat(string(f)); got != f || err != nil {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	_, err := ParseFormat("udf")
	if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), "iso9660, vfat, tar, dir") {
		t.Errorf("ParseFormat(udf): %v", err)
	}
	for name, want := range map[string]Format{"seed.iso": ISO9660, "seed.IMG": VFAT, "x.vfat": VFAT, "x.fat": VFAT, "seed.tar": Tar, "seed": "", "disk.qcow2": ""} {
		if got, ok := FormatFor(name); got != want || ok != (want != "") {
			t.Errorf("FormatFor(%q) = %q, %v, want %q", name, got, ok, want)
		}
	}
}

// TestImagesReadBack writes each image format and reads it back with Open:
// the label, where it is recorded, and every file's content.
func TestImagesReadBack(t *testing.T) {
	for _, tc := range []struct {
		format Format
		labels map[string]string
	}{
		{ISO9660, map[string]string{"primary": "config-2", "joliet": "config-2"}},
		{VFAT, map[string]string{"root": "config-2", "boot": "config-2"}},
	} {
		img := write(t, tc.format, Options{ModTime: testTime})
		back, err := Open(bytes.NewReader(img), int64(len(img)))
		if err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if back.Format != tc.format || back.Label != "config-2" || !maps.Equal(back.Labels, tc.labels) {
			t.Errorf("%s: format %q label %q labels %v", tc.format, back.Format, back.Label, back.Labels)
		}
		for _, f := range testSeed.Files {
			if got, err := fs.ReadFile(back.FS, f.Path); err != nil || !bytes.Equal(got, f.Data) {
				t.Errorf("%s: %s = %q, %v", tc.format, f.Path, got, err)
			}
		}
		if len(img)%4096 != 0 {
			t.Errorf("%s: %d bytes is not 4 KiB aligned", tc.format, len(img))
		}
	}
	if _, err := Open(bytes.NewReader(make([]byte, 65536)), 65536); !errors.Is(err, ErrNotAnImage) {
		t.Errorf("Open of zeros: %v", err)
	}
}

func TestOptions(t *testing.T) {
	if img := write(t, ISO9660, Options{Alignment: 1 << 20}); len(img)%(1<<20) != 0 {
		t.Errorf("ISO with 1 MiB alignment: %d bytes", len(img))
	}
	if img := write(t, VFAT, Options{Size: 1 << 20}); len(img) != 1<<20 {
		t.Errorf("VFAT of 1 MiB: %d bytes", len(img))
	}
	if err := Write(io.Discard, testSeed, Dir, Options{}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("Write(Dir): %v", err)
	}
	if err := Write(io.Discard, testSeed, "udf", Options{}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("Write(udf): %v", err)
	}
}

// TestReproducible: the same seed and options give the same bytes in every
// format; the timestamp is the one thing that changes them.
func TestReproducible(t *testing.T) {
	for _, f := range []Format{ISO9660, VFAT, Tar} {
		a, b := write(t, f, Options{ModTime: testTime}), write(t, f, Options{ModTime: testTime})
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two writes differ", f)
		}
		if c := write(t, f, Options{ModTime: testTime.Add(time.Hour)}); bytes.Equal(a, c) {
			t.Errorf("%s: ModTime is not in the image", f)
		}
	}
}

// TestTar reads the archive back with archive/tar and with bsdtar (what
// cloudbase-init's raw-disk path uses): parent directories first, root
// owner, normalised modes, the one timestamp.
func TestTar(t *testing.T) {
	img := write(t, Tar, Options{ModTime: testTime})
	tr := tar.NewReader(bytes.NewReader(img))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(testTime) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" {
			t.Errorf("%s: mtime %v uid %d gid %d uname %q", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname)
		}
		if want := int64(0o644); h.Typeflag == tar.TypeDir && h.Mode != 0o755 || h.Typeflag == tar.TypeReg && h.Mode != want {
			t.Errorf("%s: mode %o", h.Name, h.Mode)
		}
	}
	want := []string{"openstack/", "openstack/latest/", "openstack/latest/meta_data.json", "openstack/latest/user_data"}
	if !slices.Equal(names, want) {
		t.Errorf("entries %q, want %q", names, want)
	}
	back, err := Open(bytes.NewReader(img), int64(len(img)))
	if err != nil || back.Format != Tar {
		t.Fatalf("Open of the tar: %v", err)
	}
	for _, f := range testSeed.Files {
		if got, err := fs.ReadFile(back.FS, f.Path); err != nil || !bytes.Equal(got, f.Data) {
			t.Errorf("tar read back: %s = %q, %v", f.Path, got, err)
		}
	}

	bsdtar := testtools.Require(t, "bsdtar")
	p := filepath.Join(t.TempDir(), "seed.tar")
	if err := os.WriteFile(p, img, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bsdtar, "-xOf", p, "openstack/latest/user_data").CombinedOutput()
	if err != nil || string(out) != "#cloud-config\n" {
		t.Errorf("bsdtar: %v %q", err, out)
	}
}

func write(t *testing.T, f Format, o Options) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, testSeed, f, o); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return b.Bytes()
}

// hostileNames are seed file paths that must never reach a medium: they
// come from ConfigMap and Secret keys (a KubeVirt sysprep volume), which
// an objects file can set to anything.
var hostileNames = []string{
	"../../escape.txt", "/abs.txt", "a/../../b", "a//b", "a/./b", "dir/", "", ".", "x\x00y", `..\..\escape.txt`, "line\nbreak",
	"csi\u009b2J.txt", // C1's CSI: a terminal listing the guest's files would obey it
}

// TestHostileNames: every format refuses a seed whose file path leaves
// the medium's root, has an empty or dot segment or a control character,
// naming the path, and returns (/abs.txt used to send the tar writer into
// an endless loop).
func TestHostileNames(t *testing.T) {
	for _, name := range hostileNames {
		s := &seed.Seed{Datasource: "sysprep", Label: "unattendCD", Files: []seed.File{
			{Path: "autounattend.xml", Data: []byte("<unattend/>")},
			{Path: name, Data: []byte("x")},
		}}
		for _, f := range []Format{ISO9660, VFAT, Tar} {
			done := make(chan error, 1)
			go func() { done <- Write(io.Discard, s, f, Options{}) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), strconv.Quote(name)) {
					t.Errorf("%s %q: err = %v", f, name, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s %q: Write did not return", f, name)
			}
		}
		top := t.TempDir()
		out := filepath.Join(top, "a", "b")
		os.MkdirAll(out, 0o700)
		if err := s.WriteDir(out, 0o600); err == nil || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("dir %q: err = %v", name, err)
		}
		for _, p := range []string{filepath.Join(top, "escape.txt"), "/abs.txt"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("dir %q: wrote %s", name, p)
			}
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Errorf("dir %q: wrote %d files before refusing", name, len(entries))
		}
	}
}

// TestOpenTarShapes: a tar read back keeps its entries' modes and times,
// implies the parents it leaves out, and an archive that holds one path as
// both a file and a directory is refused, naming the path, rather than
// read as a tree in which it is both.
func TestOpenTarShapes(t *testing.T) {
	archive := func(hdrs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hdrs {
			h.Format, h.ModTime = tar.FormatUSTAR, testTime
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
			}
		}
		tw.Close()
		return b.Bytes()
	}
	img := archive(&tar.Header{Typeflag: tar.TypeReg, Name: "a/b/c", Mode: 0o640, Size: 3})
	back, err := Open(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := fs.Stat(back.FS, "a/b/c"); err != nil || fi.Mode() != 0o640 || !fi.ModTime().Equal(testTime) || fi.Size() != 3 {
		t.Errorf("a/b/c: %v, %v", fi, err)
	}
	if fi, err := fs.Stat(back.FS, "a/b"); err != nil || !fi.IsDir() {
		t.Errorf("implied a/b: %v, %v", fi, err)
	}
	img = archive(&tar.Header{Typeflag: tar.TypeReg, Name: "a", Mode: 0o644, Size: 1},
		&tar.Header{Typeflag: tar.TypeReg, Name: "a/b", Mode: 0o644, Size: 1})
	if _, err := Open(bytes.NewReader(img), int64(len(img))); err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("file and directory a: %v", err)
	}
}
