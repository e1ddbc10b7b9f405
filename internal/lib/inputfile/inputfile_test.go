package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// noHang runs f and fails the test if it has not returned after a while:
// the failures these tests guard against are reads that never end.
func noHang(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("blocked")
		return nil
	}
}

func TestRefusesWhatIsNotAFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux paths")
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "not a regular file (a FIFO)"},
		{"/dev/null", "not a regular file (a character device)"},
		{dir, "not a regular file (a directory)"},
		{"/proc/self/environ", "not a regular file (a file of /proc)"},
		{"/sys/kernel/uevent_seqnum", "not a regular file (a file of /sys)"},
	} {
		err := noHang(t, func() error { _, err := Read(c.path, 1<<20); return err })
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("Read(%s) = %v, want %q", c.path, err, c.want)
		}
		err = noHang(t, func() error { _, err := ReadIn("/", c.path, 1<<20); return err })
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadIn(/, %s) = %v, want %v", c.path, err, ErrNotRegular)
		}
	}
}

func TestReadIn(t *testing.T) {
	top := t.TempDir()
	root := filepath.Join(top, "root")
	must(t, os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(top, "secret"), []byte("secret"), 0o600))
	must(t, os.WriteFile(filepath.Join(root, "sub", "ok"), []byte("ok"), 0o600))
	must(t, os.Symlink(filepath.Join(top, "secret"), filepath.Join(root, "out")))
	must(t, os.Symlink("sub/ok", filepath.Join(root, "in")))
	must(t, os.Symlink("/proc/self/environ", filepath.Join(root, "env")))
	for _, c := range []struct {
		path string
		want error
	}{
		{filepath.Join(root, "sub", "ok"), nil},
		{filepath.Join(root, "in"), nil},
		{filepath.Join(root, "sub", "..", "sub", "ok"), nil},
		{filepath.Join(root, "out"), ErrOutside},
		{filepath.Join(root, "env"), ErrOutside},
		{filepath.Join(root, "..", "secret"), ErrOutside},
		{filepath.Join(top, "secret"), ErrOutside},
		{"/etc/passwd", ErrOutside},
		{filepath.Join(root, "missing"), os.ErrNotExist},
	} {
		b, err := ReadIn(root, c.path, 100)
		switch {
		case c.want == nil && (err != nil || string(b) != "ok"):
			t.Errorf("ReadIn(%s) = %q, %v", c.path, b, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("ReadIn(%s) = %q, %v; want %v", c.path, b, err, c.want)
		case err != nil && !strings.Contains(err.Error(), c.path):
			t.Errorf("ReadIn(%s): %v does not name the path", c.path, err)
		}
	}
}

func TestLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	must(t, os.WriteFile(p, make([]byte, 101), 0o600))
	if _, err := Read(p, 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read over the limit: %v", err)
	}
	if b, err := Read(p, 101); err != nil || len(b) != 101 {
		t.Errorf("Read at the limit: %d bytes, %v", len(b), err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCheckExisting: a FIFO is refused without opening it (an open would
// block), a regular file and a missing path pass.
func TestCheckExisting(t *testing.T) {
	dir := t.TempDir()
	fifo, file := filepath.Join(dir, "fifo"), filepath.Join(dir, "file")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckExisting(fifo); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), fifo+": not a regular file (a FIFO)") {
		t.Errorf("FIFO: %v", err)
	}
	for _, p := range []string{file, filepath.Join(dir, "missing")} {
		if err := CheckExisting(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
