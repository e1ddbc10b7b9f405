package cmdkit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestServeLogsTextOnATerminal: unset, --log-format is text on a real
// terminal (a pseudo-terminal, as an operator's shell has) and JSON on a
// file, a pipe or /dev/null; given, it is what it says. The logger writes
// through the terminal in the format chosen.
func TestServeLogsTextOnATerminal(t *testing.T) {
	tty := openPTY(t)
	file, _ := os.Create(filepath.Join(t.TempDir(), "log"))
	defer file.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, c := range []struct {
		name   string
		format string
		w      *os.File
		want   string
	}{
		{"terminal", "", tty.slave, "text"},
		{"file", "", file, "json"},
		{"pipe", "", w, "json"},
		{"/dev/null", "", null, "json"},
		{"terminal, json given", "json", tty.slave, "json"},
		{"file, text given", "text", file, "text"},
	} {
		if got := LogFormatFor(c.format, c.w); got != c.want {
			t.Errorf("%s: --log-format %q gives %s, want %s", c.name, c.format, got, c.want)
		}
	}

	logger, err := NewLogger("", tty.slave)
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("listening", "address", "127.0.0.1:8080")
	line := tty.readLine(t)
	if !strings.Contains(line, `level=INFO msg=listening address=127.0.0.1:8080`) {
		t.Errorf("the terminal shows %q, want slog's text line", line)
	}
}

// pty is a pseudo-terminal pair: what a program writes to slave, a
// terminal emulator reads from master.
type pty struct{ master, slave *os.File }

// openPTY opens a pseudo-terminal through /dev/ptmx, as a terminal
// emulator or ssh does, closed at the test's end.
func openPTY(t *testing.T) pty {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("pseudo-terminals are opened here the Linux way")
	}
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return pty{master, slave}
}

// readLine reads what the terminal shows up to the end of a line.
func (p pty) readLine(t *testing.T) string {
	t.Helper()
	var out bytes.Buffer
	buf := make([]byte, 1)
	for out.Len() < 4096 {
		if _, err := p.master.Read(buf); err != nil {
			t.Fatalf("reading the terminal: %v (so far %q)", err, out.String())
		}
		if buf[0] == '\n' {
			break
		}
		out.WriteByte(buf[0])
	}
	return strings.TrimRight(out.String(), "\r")
}
