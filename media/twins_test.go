package media

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/vminit/vminit/iso9660"
	"github.com/vminit/vminit/vfat"
)

// imageWriter and imageReader are the shape iso9660 and vfat share, as
// archive/zip and archive/tar share theirs: a test that compiles is the
// proof that the twins have not drifted apart.
type imageWriter interface {
	AddFile(name string, size int64, mode fs.FileMode, r io.Reader) error
	AddDir(name string) error
	AddFS(fsys fs.FS) error
	Close() error
}

type imageReader interface {
	fs.ReadDirFS
	fs.ReadFileFS
	fs.StatFS
}

// twin is one image package seen through the shared shape, with its
// sentinel errors under their shared names.
type twin struct {
	name      string
	newWriter func(w io.Writer, label string) imageWriter
	newReader func(r io.ReaderAt, size int64) (imageReader, error)

	errInvalidName, errDuplicate, errTooLarge, errSizeMismatch,
	errUnsupportedType, errInvalidOptions, errClosed, errFormat error
}

var twins = []twin{
	{
		name: "iso9660",
		newWriter: func(w io.Writer, label string) imageWriter {
			return iso9660.NewWriter(w, iso9660.Options{Label: label})
		},
		newReader:      func(r io.ReaderAt, size int64) (imageReader, error) { return iso9660.NewReader(r, size) },
		errInvalidName: iso9660.ErrInvalidName, errDuplicate: iso9660.ErrDuplicate, errTooLarge: iso9660.ErrTooLarge,
		errSizeMismatch: iso9660.ErrSizeMismatch, errUnsupportedType: iso9660.ErrUnsupportedType,
		errInvalidOptions: iso9660.ErrInvalidOptions, errClosed: iso9660.ErrClosed, errFormat: iso9660.ErrFormat,
	},
	{
		name: "vfat",
		newWriter: func(w io.Writer, label string) imageWriter {
			return vfat.NewWriter(w, vfat.Options{Label: label})
		},
		newReader:      func(r io.ReaderAt, size int64) (imageReader, error) { return vfat.NewReader(r, size) },
		errInvalidName: vfat.ErrInvalidName, errDuplicate: vfat.ErrDuplicate, errTooLarge: vfat.ErrTooLarge,
		errSizeMismatch: vfat.ErrSizeMismatch, errUnsupportedType: vfat.ErrUnsupportedType,
		errInvalidOptions: vfat.ErrInvalidOptions, errClosed: vfat.ErrClosed, errFormat: vfat.ErrFormat,
	},
}

// TestTwinsShareErrors: the same mistake gives the error of the same name
// from both image packages, and each error names the file at fault.
func TestTwinsShareErrors(t *testing.T) {
	for _, tw := range twins {
		t.Run(tw.name, func(t *testing.T) {
			w := tw.newWriter(io.Discard, "cidata")
			if err := w.AddFile("user-data", 2, 0o644, strings.NewReader("ok")); err != nil {
				t.Fatal(err)
			}
			checks := []struct {
				what, path string
				err, want  error
			}{
				{"bad name", "a/../b", w.AddFile("a/../b", 0, 0o644, strings.NewReader("")), tw.errInvalidName},
				{"duplicate", "user-data", w.AddFile("user-data", 0, 0o644, strings.NewReader("")), tw.errDuplicate},
				{"4 GiB", "big", w.AddFile("big", 1<<32, 0o644, strings.NewReader("")), tw.errTooLarge},
				{"symlink mode", "link", w.AddFile("link", 0, fs.ModeSymlink|0o777, strings.NewReader("")), tw.errUnsupportedType},
			}
			for _, c := range checks {
				if !errors.Is(c.err, c.want) || !strings.Contains(fmtErr(c.err), c.path) {
					t.Errorf("%s: %v, want %v naming %q", c.what, c.err, c.want, c.path)
				}
			}
			if err := w.AddFile("short", 10, 0o644, strings.NewReader("abc")); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); !errors.Is(err, tw.errSizeMismatch) || !strings.Contains(fmtErr(err), "short") {
				t.Errorf("short reader: %v, want %v naming it", err, tw.errSizeMismatch)
			}
			if err := w.AddDir("late"); !errors.Is(err, tw.errClosed) {
				t.Errorf("AddDir after Close: %v, want %v", err, tw.errClosed)
			}
			if err := tw.newWriter(io.Discard, "a/label").Close(); !errors.Is(err, tw.errInvalidOptions) {
				t.Errorf("bad label: %v, want %v", err, tw.errInvalidOptions)
			}
			junk := bytes.Repeat([]byte{0xAA}, 64<<10)
			if _, err := tw.newReader(bytes.NewReader(junk), int64(len(junk))); !errors.Is(err, tw.errFormat) {
				t.Errorf("junk image: %v, want %v", err, tw.errFormat)
			}
		})
	}
}

// TestTwinsReadBack: both Readers are the same kind of fs.FS (ReadDirFS,
// ReadFileFS, StatFS), pass fstest.TestFS, and agree on what a seed holds.
func TestTwinsReadBack(t *testing.T) {
	for _, tw := range twins {
		t.Run(tw.name, func(t *testing.T) {
			var img bytes.Buffer
			w := tw.newWriter(&img, "cidata")
			if err := w.AddFS(testSeed.FS()); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := tw.newReader(bytes.NewReader(img.Bytes()), int64(img.Len()))
			if err != nil {
				t.Fatal(err)
			}
			paths := make([]string, len(testSeed.Files))
			for i, f := range testSeed.Files {
				paths[i] = f.Path
				if got, err := r.ReadFile(f.Path); err != nil || !bytes.Equal(got, f.Data) {
					t.Errorf("ReadFile(%s) = %q, %v", f.Path, got, err)
				}
				if fi, err := r.Stat(f.Path); err != nil || fi.Size() != int64(len(f.Data)) || !fi.Mode().IsRegular() {
					t.Errorf("Stat(%s) = %v, %v", f.Path, fi, err)
				}
			}
			if err := fstest.TestFS(r, paths...); err != nil {
				t.Error(err)
			}
			if _, err := r.ReadFile("openstack"); err == nil {
				t.Error("ReadFile of a directory succeeded")
			}
			if _, err := r.Stat("missing"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Stat(missing): %v", err)
			}
		})
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
