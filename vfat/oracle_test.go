package vfat

// Tests that use independent programs (dosfstools, mtools, util-linux
// blkid, 7-Zip) as the oracle for the images this package writes, and
// mkfs.vfat + mcopy as an independent writer for the reader.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// entry is one file of a test tree; dir entries have content == nil and
// isDir set.
type entry struct {
	name    string
	content []byte
	isDir   bool
}

func noCloudTree() []entry {
	return []entry{
		{name: "user-data", content: []byte("#cloud-config\npassword: passw0rd\nchpasswd: { expire: False }\nssh_pwauth: True\n")},
		{name: "meta-data", content: []byte("instance-id: iid-local01\nlocal-hostname: cloudimg\n")},
		{name: "network-config", content: []byte("version: 2\nethernets:\n  eth0:\n    dhcp4: true\n")},
		{name: "vendor-data", content: []byte("#cloud-config\n{}\n")},
	}
}

func configDriveTree() []entry {
	return []entry{
		{name: "openstack/latest/meta_data.json", content: []byte(`{"uuid":"83679162-1378-4288-a2d4-70e13ec132aa","hostname":"test"}`)},
		{name: "openstack/latest/user_data", content: []byte("#cloud-config\n{}\n")},
		{name: "openstack/latest/network_data.json", content: []byte(`{"links":[],"networks":[],"services":[]}`)},
	}
}

// pattern returns n deterministic, not very compressible bytes.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

func mixedTree() []entry {
	t := []entry{
		{name: "empty", content: []byte{}},
		{name: "big.bin", content: pattern(1<<20+123, 1)},
		{name: "UPPER.TXT", content: []byte("plain 8.3 name, no LFN\n")},
		{name: "lower.txt", content: []byte("needs an LFN for case\n")},
		{name: "a/b/c/d/e/deep file with spaces.txt", content: []byte("deep\n")},
		{name: "a/b/sibling", content: []byte("sib\n")},
		{name: "empty-dir", isDir: true},
		{name: "Ünïcödé 名前.txt", content: []byte("unicode\n")},
		{name: "a name that is quite long, longer than thirteen characters times three.data", content: []byte("long\n")},
		{name: "a+b", content: []byte("plus\n")},
		{name: "a,b", content: []byte("comma\n")},
		{name: ".hidden", content: []byte("dot\n")},
	}
	for i := range 40 {
		t = append(t, entry{name: fmt.Sprintf("many/file-number-%03d.txt", i), content: pattern(i*37, byte(i))})
	}
	return t
}

// manyRootTree needs more than the default 512 root entries.
func manyRootTree() []entry {
	var t []entry
	for i := range 300 {
		t = append(t, entry{name: fmt.Sprintf("root-file-%03d.cfg", i), content: []byte(fmt.Sprint(i))})
	}
	return t
}

func manySmallTree(n int) []entry {
	var t []entry
	for i := range n {
		t = append(t, entry{name: fmt.Sprintf("d/instance-file-%d", i), content: []byte{byte(i)}})
	}
	return t
}

func buildImage(t testing.TB, opts Options, tree []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, opts)
	for _, e := range tree {
		var err error
		if e.isDir {
			err = w.AddDir(e.name)
		} else {
			err = w.AddFile(e.name, int64(len(e.content)), 0o644, bytes.NewReader(e.content))
		}
		if err != nil {
			t.Fatalf("add %s: %v", e.name, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return buf.Bytes()
}

// writeTemp stores an image for the external tools. All-zero 4 KiB blocks
// are left as holes: the images are mostly empty space, and the tools read
// holes as zeros.
func writeTemp(t testing.TB, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "seed.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	var zero [Align]byte
	for off := 0; off < len(b); off += Align {
		blk := b[off:min(off+Align, len(b))]
		if bytes.Equal(blk, zero[:len(blk)]) {
			continue
		}
		if _, err := f.WriteAt(blk, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t testing.TB, prog string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1", "LC_ALL=C.UTF-8")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func runOK(t testing.TB, prog string, args ...string) string {
	t.Helper()
	out, err := run(t, prog, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return out
}

type oracleCase struct {
	name  string
	opts  Options
	tree  []entry
	fat16 bool
}

func oracleCases() []oracleCase {
	mod := time.Date(2024, 5, 6, 7, 8, 10, 0, time.UTC)
	return []oracleCase{
		{"nocloud", Options{Label: "cidata", ModTime: mod}, noCloudTree(), false},
		{"configdrive", Options{Label: "config-2", ModTime: mod}, configDriveTree(), false},
		{"mixed", Options{Label: "cidata", ModTime: mod}, mixedTree(), false},
		{"manyroot", Options{Label: "cidata"}, manyRootTree(), false},
		{"fat16", Options{Label: "cidata", ModTime: mod, Size: 32 << 20}, append(noCloudTree(), mixedTree()...), true},
		{"nolabel", Options{}, noCloudTree(), false},
		// More files than FAT12 has clusters at any cluster size up to
		// 4 KiB: a small FAT16 volume rather than a 16 MiB FAT12 one.
		{"fat16-many-small", Options{Label: "cidata", ModTime: mod}, manySmallTree(4200), true},
	}
}

func TestFsckClean(t *testing.T) {
	fsck := testtools.Require(t, "fsck.fat")
	for _, c := range oracleCases() {
		t.Run(c.name, func(t *testing.T) {
			img := writeTemp(t, buildImage(t, c.opts, c.tree))
			// -n: check only; -V: also read every data cluster.
			out, err := run(t, fsck, "-n", "-V", img)
			if err != nil {
				t.Fatalf("fsck.fat: %v\n%s", err, out)
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				ok := strings.HasPrefix(line, "fsck.fat ") || strings.HasPrefix(line, img+": ") ||
					line == "Starting check/repair pass." || line == "Starting verification pass." ||
					strings.HasPrefix(line, "Checking ")
				if !ok {
					t.Errorf("fsck.fat complains: %q\nfull output:\n%s", line, out)
				}
			}
		})
	}
}

func TestBlkid(t *testing.T) {
	blkid := testtools.Require(t, "blkid")
	for _, c := range oracleCases() {
		t.Run(c.name, func(t *testing.T) {
			img := writeTemp(t, buildImage(t, c.opts, c.tree))
			out := runOK(t, blkid, "-p", "-o", "export", img)
			got := map[string]string{}
			for _, line := range strings.Split(out, "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					got[k] = v
				}
			}
			version := "FAT12"
			if c.fat16 {
				version = "FAT16"
			}
			want := map[string]string{"TYPE": "vfat", "VERSION": version, "LABEL": c.opts.Label, "LABEL_FATBOOT": c.opts.Label}
			for k, v := range want {
				if v == "" {
					if _, ok := got[k]; ok {
						t.Errorf("%s=%q, want none", k, got[k])
					}
					continue
				}
				if got[k] != v {
					t.Errorf("%s=%q, want %q\n%s", k, got[k], v, out)
				}
			}
			if got["UUID"] == "" {
				t.Errorf("no UUID (serial) reported\n%s", out)
			}
		})
	}
}

func TestMtools(t *testing.T) {
	mdir := testtools.Require(t, "mdir")
	mtype := testtools.Require(t, "mtype")
	mlabel := testtools.Require(t, "mlabel")
	for _, c := range oracleCases() {
		t.Run(c.name, func(t *testing.T) {
			img := writeTemp(t, buildImage(t, c.opts, c.tree))
			// mdir -/ lists recursively; with long names present it prints
			// the long name at the end of each line.
			listing := runOK(t, mdir, "-i", img, "-/", "::")
			for _, e := range c.tree {
				base := filepath.Base(e.name)
				if isPlainShort(base) {
					// No LFN: mdir shows the 8.3 columns ("UPPER    TXT").
					b, ext, _ := shortBasis(base)
					base = fmt.Sprintf("%-8s %-3s", b, ext)
				}
				if !strings.Contains(listing, base) {
					t.Errorf("mdir does not list %q\n%s", base, listing)
				}
			}
			// One mtype process per file; for the big trees a sample will do.
			step := max(1, len(c.tree)/25)
			for i, e := range c.tree {
				if e.isDir || (i%step != 0 && len(e.content) < 1<<20) {
					continue
				}
				got := runOK(t, mtype, "-i", img, "::/"+e.name)
				if got != string(e.content) {
					t.Errorf("mtype %s: %d bytes differ from the %d written", e.name, len(got), len(e.content))
				}
			}
			out := runOK(t, mlabel, "-i", img, "-s", "::")
			if c.opts.Label == "" {
				if !strings.Contains(out, "has no label") {
					t.Errorf("mlabel -s = %q, want no label", out)
				}
			} else if !strings.Contains(out, " is "+c.opts.Label) {
				t.Errorf("mlabel -s = %q, want label %q", out, c.opts.Label)
			}
		})
	}
}

func Test7z(t *testing.T) {
	sevenZ := testtools.Require(t, "7z")
	for _, c := range oracleCases() {
		t.Run(c.name, func(t *testing.T) {
			img := writeTemp(t, buildImage(t, c.opts, c.tree))
			out := runOK(t, sevenZ, "l", "-slt", "-tFAT", img)
			var paths []string
			for _, line := range strings.Split(out, "\n") {
				if p, ok := strings.CutPrefix(line, "Path = "); ok && p != img {
					paths = append(paths, filepath.ToSlash(p))
				}
			}
			for _, e := range c.tree {
				if !slices.Contains(paths, e.name) {
					t.Errorf("7z does not list %q; it lists %q", e.name, paths)
				}
			}
			// And 7z extracts the same bytes.
			dir := t.TempDir()
			runOK(t, sevenZ, "x", "-tFAT", "-o"+dir, img)
			for _, e := range c.tree {
				if e.isDir {
					continue
				}
				got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.name)))
				if err != nil || !bytes.Equal(got, e.content) {
					t.Errorf("7z x %s: err %v, equal %t", e.name, err, bytes.Equal(got, e.content))
				}
			}
		})
	}
}

// TestReadMkfsImage reads an image made by the independent tools that
// cloud-localds uses (mkfs.vfat + mcopy), so the reader is not only checked
// against this package's own writer.
func TestReadMkfsImage(t *testing.T) {
	mkfs := testtools.Require(t, "mkfs.vfat")
	mcopy := testtools.Require(t, "mcopy")
	mmd := testtools.Require(t, "mmd")
	tmp := t.TempDir()
	img := filepath.Join(tmp, "mkfs.img")
	src := filepath.Join(tmp, "src")
	tree := append(noCloudTree(), configDriveTree()...)
	tree = append(tree, entry{name: "big.bin", content: pattern(300000, 9)}, entry{name: "empty", content: []byte{}})
	dirs := map[string]bool{}
	for _, e := range tree {
		p := filepath.Join(src, filepath.FromSlash(e.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, e.content, 0o644); err != nil {
			t.Fatal(err)
		}
		for d := filepath.Dir(e.name); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 2<<20); err != nil {
		t.Fatal(err)
	}
	runOK(t, mkfs, "-n", "cidata", img)
	var sorted []string
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted) // parents first
	for _, d := range sorted {
		runOK(t, mmd, "-i", img, "::/"+d)
	}
	for _, e := range tree {
		runOK(t, mcopy, "-i", img, filepath.Join(src, filepath.FromSlash(e.name)), "::/"+e.name)
	}
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	im, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if im.Label != "cidata" || im.BootLabel != "cidata" || im.Type != "FAT12" {
		t.Errorf("Label %q BootLabel %q Type %q", im.Label, im.BootLabel, im.Type)
	}
	checkTree(t, im, tree)
}

// TestLayoutLikeMkfs compares the BPB of a small seed with what mkfs.vfat
// chooses for the same size: same sector size, reserved sectors, FAT count,
// root entries and media byte. The cluster size may differ (mkfs.vfat uses
// 2 KiB clusters at 128 KiB, the writer the smallest that gives FAT12).
func TestLayoutLikeMkfs(t *testing.T) {
	mkfs := testtools.Require(t, "mkfs.vfat")
	img := filepath.Join(t.TempDir(), "mkfs.img")
	if err := os.WriteFile(img, make([]byte, MinSize), 0o644); err != nil {
		t.Fatal(err)
	}
	runOK(t, mkfs, "-n", "cidata", img)
	ref, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	ours := buildImage(t, Options{Label: "cidata"}, noCloudTree())
	if len(ours) != len(ref) {
		t.Errorf("size %d, mkfs.vfat reference %d", len(ours), len(ref))
	}
	fields := []struct {
		name     string
		from, to int
	}{
		{"bytes per sector", 11, 13}, {"reserved sectors", 14, 16}, {"FAT count", 16, 17},
		{"root entries", 17, 19}, {"total sectors", 19, 21}, {"media", 21, 22},
		{"drive number", 36, 37}, {"signature", 38, 39}, {"label", 43, 54}, {"type", 54, 62}, {"0x55AA", 510, 512},
	}
	for _, f := range fields {
		if !bytes.Equal(ours[f.from:f.to], ref[f.from:f.to]) {
			t.Errorf("%s: % x, mkfs.vfat % x", f.name, ours[f.from:f.to], ref[f.from:f.to])
		}
	}
}

// TestGeometryBoundaries runs fsck.fat and blkid on images just below and
// at every size where the writer changes cluster size or FAT type, where an
// off-by-one in the FAT sizing or the cluster count would show.
func TestGeometryBoundaries(t *testing.T) {
	fsck := testtools.Require(t, "fsck.fat")
	blkid := testtools.Require(t, "blkid")
	var sizes []int64
	prev, _ := chooseGeometry(MinSize/sectorSize, minRootEntries, nil)
	for total := int64(MinSize / sectorSize); total <= 33<<20/sectorSize; total += alignSectors {
		g, _ := chooseGeometry(total, minRootEntries, nil)
		if g.spc != prev.spc || g.fat16 != prev.fat16 {
			sizes = append(sizes, (total-alignSectors)*sectorSize, total*sectorSize)
		}
		prev = g
	}
	if len(sizes) < 10 {
		t.Fatalf("only %d boundary sizes: %v", len(sizes), sizes)
	}
	for _, size := range sizes {
		b := buildImage(t, Options{Label: "cidata", Size: size}, noCloudTree())
		im, err := NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		img := writeTemp(t, b)
		if out, err := run(t, fsck, "-n", img); err != nil || strings.Count(out, "\n") != 2 {
			t.Errorf("size %d: fsck.fat: %v\n%s", size, err, out)
		}
		out := runOK(t, blkid, "-p", "-o", "export", img)
		if !strings.Contains(out, "VERSION="+im.Type+"\n") {
			t.Errorf("size %d: we wrote %s, blkid says\n%s", size, im.Type, out)
		}
		os.Remove(img)
	}
}

// sparseWriter writes to a file, leaving all-zero blocks as holes, so that
// a MaxSize image costs almost no disk.
type sparseWriter struct {
	f   *os.File
	off int64
}

func (s *sparseWriter) Write(b []byte) (int, error) {
	var zero [Align]byte
	for i := 0; i < len(b); i += Align {
		blk := b[i:min(i+Align, len(b))]
		if !bytes.Equal(blk, zero[:len(blk)]) {
			if _, err := s.f.WriteAt(blk, s.off+int64(i)); err != nil {
				return i, err
			}
		}
	}
	s.off += int64(len(b))
	return len(b), nil
}

// TestMaxSizeImage writes the largest image the writer allows (FAT16, 32 KiB
// clusters) and has fsck.fat, blkid and the reader check it.
func TestMaxSizeImage(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 2 GiB sparse file")
	}
	fsck := testtools.Require(t, "fsck.fat")
	blkid := testtools.Require(t, "blkid")
	p := filepath.Join(t.TempDir(), "max.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sw := &sparseWriter{f: f}
	w := NewWriter(sw, Options{Label: "cidata", Size: MaxSize})
	for _, e := range mixedTree() {
		var err error
		if e.isDir {
			err = w.AddDir(e.name)
		} else {
			err = w.AddFile(e.name, int64(len(e.content)), 0o644, bytes.NewReader(e.content))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(sw.off); err != nil {
		t.Fatal(err)
	}
	if sw.off != MaxSize {
		t.Fatalf("wrote %d bytes", sw.off)
	}
	if out, err := run(t, fsck, "-n", p); err != nil || strings.Count(out, "\n") != 2 {
		t.Errorf("fsck.fat: %v\n%s", err, out)
	}
	if out := runOK(t, blkid, "-p", "-o", "export", p); !strings.Contains(out, "VERSION=FAT16\n") || !strings.Contains(out, "LABEL=cidata\n") {
		t.Errorf("blkid:\n%s", out)
	}
	im, err := NewReader(f, MaxSize)
	if err != nil {
		t.Fatal(err)
	}
	if im.Type != "FAT16" || im.ClusterSize != 32<<10 {
		t.Errorf("Type %s, cluster %d", im.Type, im.ClusterSize)
	}
	checkTree(t, im, mixedTree())
}
