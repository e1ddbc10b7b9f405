package atomicfile

import (
	"errors"
	"io"
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
	if err := WriteDir(p, 0o755, func(d string) error { return errors.New("boom") }); err == nil {
		t.Fatal("no error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	if err := WriteDir(p, 0o755, func(d string) error { return os.WriteFile(filepath.Join(d, "a"), []byte("x"), 0o644) }); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(p, 0o755, func(d string) error { return nil }); err == nil {
		t.Fatal("replaced a populated directory")
	}
}

func TestErrorsNameTheTarget(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "such", "seed.iso")
	err := Write(p, 0o600, func(w io.Writer) error { return nil })
	if err == nil || err.Error() != "write "+p+": no such file or directory" {
		t.Errorf("err = %v", err)
	}
	err = WriteDir(p, 0o700, func(string) error { return nil })
	if err == nil || err.Error() != "write "+p+": no such file or directory" {
		t.Errorf("WriteDir err = %v", err)
	}
}
