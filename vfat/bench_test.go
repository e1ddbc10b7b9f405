package vfat

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

func benchWrite(b *testing.B, opts Options, tree []entry) {
	b.ReportAllocs()
	var size int64
	for b.Loop() {
		cw := &countingWriter{w: io.Discard}
		w := NewWriter(cw, opts)
		for _, e := range tree {
			if err := w.AddFile(e.name, int64(len(e.content)), 0o644, bytes.NewReader(e.content)); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		size = cw.n
	}
	b.ReportMetric(float64(size), "image-bytes")
}

// BenchmarkNoCloudSeed: the four NoCloud files (about 200 bytes) into a
// 128 KiB FAT12 image, written to io.Discard.
func BenchmarkNoCloudSeed(b *testing.B) {
	benchWrite(b, Options{Label: "cidata"}, noCloudTree())
}

// BenchmarkConfigDrive: openstack/latest/{meta_data.json,user_data,
// network_data.json}, two directory levels.
func BenchmarkConfigDrive(b *testing.B) {
	benchWrite(b, Options{Label: "config-2"}, configDriveTree())
}

// BenchmarkMixed: 53 files including 1 MiB of data, nested directories.
func BenchmarkMixed(b *testing.B) {
	benchWrite(b, Options{Label: "cidata"}, mixedTree())
}

// BenchmarkOpenNoCloud: Open plus reading every file back.
func BenchmarkOpenNoCloud(b *testing.B) {
	img := buildImage(b, Options{Label: "cidata"}, noCloudTree())
	b.ReportAllocs()
	for b.Loop() {
		im, err := NewReader(bytes.NewReader(img), int64(len(img)))
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range noCloudTree() {
			if _, err := im.ReadFile(e.name); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkMkfsMcopy is the baseline this package replaces: what
// cloud-localds does for a vfat seed (truncate, mkfs.vfat -n cidata, mcopy
// the files), with the files already on disk.
func BenchmarkMkfsMcopy(b *testing.B) {
	mkfs := testtools.Require(b, "mkfs.vfat")
	mcopy := testtools.Require(b, "mcopy")
	dir := b.TempDir()
	var files []string
	for _, e := range noCloudTree() {
		p := filepath.Join(dir, e.name)
		if err := os.WriteFile(p, e.content, 0o644); err != nil {
			b.Fatal(err)
		}
		files = append(files, p)
	}
	img := filepath.Join(dir, "seed.img")
	for b.Loop() {
		os.Remove(img)
		f, err := os.Create(img)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Truncate(MinSize); err != nil {
			b.Fatal(err)
		}
		f.Close()
		if out, err := exec.Command(mkfs, "-n", "cidata", img).CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		cmd := exec.Command(mcopy, append([]string{"-oi", img}, append(files, "::")...)...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
	}
}

// BenchmarkManySmallFiles: 5,000 one-byte files in one directory with
// similar names, the worst case for short-name tails and the size search.
func BenchmarkManySmallFiles(b *testing.B) {
	benchWrite(b, Options{Label: "cidata"}, manySmallTree(5000))
}
