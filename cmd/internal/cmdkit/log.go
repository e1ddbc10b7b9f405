package cmdkit

import (
	"io"
	"log/slog"
	"os"

	"golang.org/x/term"
	"k8s.io/klog/v2"
)

// NewLogger is the logger --log-format names: json or text; unset, text
// for the operator who runs a program on a terminal and JSON for the
// journal and the log collectors (the units and manifests pass json too).
func NewLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch LogFormatFor(format, w) {
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	}
	return nil, Usagef("--log-format %q: want json or text", format)
}

// LogFormatFor is --log-format, or unset, text on a terminal and JSON
// elsewhere.
func LogFormatFor(format string, w io.Writer) string {
	switch {
	case format != "":
		return format
	case IsTerminal(w):
		return "text"
	}
	return "json"
}

// IsTerminal reports whether w is a terminal: one the terminal driver
// answers for (a console on Windows), not any character device, because
// /dev/null is one too, and a unit's or a script's output sent there
// should stay JSON like the rest of its logs.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// LogKlog sends client-go's own log lines (klog) to the command's logger,
// so that a JSON log stays JSON.
func LogKlog(logger *slog.Logger) { klog.SetSlogLogger(logger) }
