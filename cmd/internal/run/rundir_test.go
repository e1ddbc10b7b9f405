package run

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRunDirFIFODoesNotBlock: a vminit-run-* directory whose pid file is
// a FIFO (any local user can make one in /tmp) is left alone at once by
// the reaping of killed runs; a plain read blocked every later run at
// start, before it had a guest to stop.
func TestRunDirFIFODoesNotBlock(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	trap := filepath.Join(tmp, runDirPrefix+"trap")
	if err := os.Mkdir(trap, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(trap, "pid"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		dir, err := makeRunDir()
		if err == nil {
			os.RemoveAll(dir)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // against a hang, not a measure
		// Open the FIFO for writing, so the blocked reader returns.
		if f, err := os.OpenFile(filepath.Join(trap, "pid"), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("makeRunDir blocked on a FIFO pid file")
	}
	if _, err := os.Stat(trap); err != nil {
		t.Errorf("the directory with a FIFO pid file was removed: %v", err)
	}
}
