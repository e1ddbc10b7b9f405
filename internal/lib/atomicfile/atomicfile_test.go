package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "seed.iso")
	if err := Write(p, 0o644, func(w io.Writer) error { _, err := io.WriteString(w, "ok"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "ok" {
		t.Fatalf("content = %q", b)
	}
	boom := errors.New("boom")
	if err := Write(p, 0o644, func(w io.Writer) error { io.WriteString(w, "half"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "ok" {
		t.Fatalf("a failed write changed the target: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestWriteDir(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out")
	if err := WriteDir(p, 0o755, func(*os.Root) error { return errors.New("boom") }); err == nil {
		t.Fatal("no error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	if err := WriteDir(p, 0o755, func(r *os.Root) error { return r.WriteFile("a", []byte("x"), 0o644) }); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(p, 0o755, func(*os.Root) error { return nil }); err == nil {
		t.Fatal("replaced a populated directory")
	}
}

func TestErrorsNameTheTarget(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "such", "seed.iso")
	err := Write(p, 0o600, func(w io.Writer) error { return nil })
	if err == nil || err.Error() != "write "+p+": no such file or directory" {
		t.Errorf("err = %v", err)
	}
	err = WriteDir(p, 0o700, func(*os.Root) error { return nil })
	if err == nil || err.Error() != "write "+p+": no such file or directory" {
		t.Errorf("WriteDir err = %v", err)
	}
}

// TestWriteDirPrivateUntilComplete: with a group- or world-writable mode,
// the directory is 0700 while it is filled and gets its mode last, so no
// other user can plant a file or a link in it before it is complete.
func TestWriteDirPrivateUntilComplete(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out")
	var during fs.FileMode
	err := WriteDir(p, 0o777, func(r *os.Root) error {
		fi, err := r.Stat(".")
		if err != nil {
			return err
		}
		during = fi.Mode().Perm()
		return r.WriteFile("a", []byte("x"), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	if during != 0o700 {
		t.Errorf("mode while being filled = %04o; want 0700", during)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("final mode = %v, %v; want 0777", fi.Mode(), err)
	}
}
