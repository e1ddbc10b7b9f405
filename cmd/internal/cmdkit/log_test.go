package cmdkit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestServeLogsTextOnATerminal: unset, --log-format is text on a
// character device (a terminal; /dev/null is one too) and JSON on a file
// or pipe; given, it is what it says.
func TestServeLogsTextOnATerminal(t *testing.T) {
	tty, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer tty.Close()
	file, _ := os.Create(filepath.Join(t.TempDir(), "log"))
	defer file.Close()
	if LogFormatFor("", tty) != "text" || LogFormatFor("", file) != "json" || LogFormatFor("json", tty) != "json" {
		t.Errorf("terminal %q, file %q, given json on a terminal %q", LogFormatFor("", tty), LogFormatFor("", file), LogFormatFor("json", tty))
	}
}
