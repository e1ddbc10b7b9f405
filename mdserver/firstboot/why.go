package firstboot

import (
	"strings"

	"github.com/vminit/vminit/internal/lib/lazyre"
)

// Why is the one line of a failure's message that says why it failed:
// the rule the fleet's row (Tracker.Brief, GET /v1/boots), the web page,
// the CLI's first error and the Kubernetes condition share (through
// Failure.brief and Status.FirstError), so that they agree.
//
// A message is the agent's word on what failed and the end of its log:
// cloud-init's exception (RuntimeError('Runparts: 1 failures (runcmd) …'),
// "running module scripts-user (…) failed") then its output log's tail;
// an Ignition unit's journal (systemd's "Starting app.service…" first).
// Those first lines say what ran, not why: the failing command's own
// output does ("Failed to enable unit: Unit file nginx.service does not
// exist", "error while loading shared libraries: libssl.so.1.1"). So the
// lines the agent and systemd write about the run are set aside (noise),
// and of the rest, the command's own output, Why takes the last that
// reads as an error, else the last (cloud-init's output log ends with
// its own lines, so the last of the command's output is the one before
// them). Where nothing is left, the message's first line.
func Why(msg string) string {
	first, cause, last := "", "", ""
	inTrace := false // in a Python traceback: its indented lines and its last are noise
	for raw := range strings.Lines(msg) {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(raw), "…"))
		if line == "" {
			continue
		}
		if first == "" {
			first = line
		}
		if inTrace {
			inTrace = raw[0] == ' ' || raw[0] == '\t'
			continue // a frame, or the exception that ends the trace
		}
		text, noise := ownLine(line)
		inTrace = strings.HasPrefix(line, "Traceback (most recent call last)")
		if noise {
			continue
		}
		last = text
		if readsAsError(text) {
			cause = text
		}
	}
	switch {
	case cause != "":
		return cause
	case last != "":
		return last
	}
	return first
}

// journalPrefix is journalctl's short format: "Nov 29 03:40:01 host
// ident[pid]: message".
var journalPrefix = lazyre.New(`^[A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d \S+ ([^\s\[:]+)(?:\[\d+\])?: (.*)$`)

// noisePrefixes begin what an agent or systemd writes about a run
// rather than what the run said: cloud-init's banner, Python's
// tracebacks, a module's error as status.json gives it, the module
// runner's message; systemd's job messages (with the journal's prefix or
// without), the journal's own markers; mount(8)'s hint that follows its
// error (util-linux 2.38, Debian 12: a failed spec mount's journal).
var noisePrefixes = []string{"Cloud-init v. ", "Traceback (most recent call last)", `File "`, "('", "Runparts: ",
	"running module ", "Running module ", "Starting ", "Started ", "Stopping ", "Stopped ", "Finished ",
	"Failed to start ", "Dependency failed for ", "Reached target ", "Condition check resulted ",
	"-- Boot", "-- No entries", "-- Logs begin", "-- Journal begins", "dmesg(1) may have more information"}

// unitSuffixes are the unit types whose "UNIT: …" lines are systemd's.
var unitSuffixes = []string{".service", ".socket", ".mount", ".timer", ".path", ".target", ".scope", ".slice"}

// ciLogLine is cloud-init's log format, "2026-11-29 03:40:01,123 -
// util.py[WARNING]: …"; exitLine a bare exit status.
var (
	ciLogLine = lazyre.New(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - \S+\[[A-Z]+\]: `)
	exitLine  = lazyre.New(`^(?:exit(?: status| code)?|exited with(?: code| status)?) \d+\.?$`)
)

// isNoise reports whether line (without the journal's prefix) is an
// agent's or systemd's own word about the run. Checked by hand, not by
// one expression: Why reads every line of every failed row of a page.
func isNoise(line string) bool {
	for _, p := range noisePrefixes {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	if len(line) > 24 && line[4] == '-' && line[10] == ' ' && line[19] == ',' && ciLogLine.MatchString(line) {
		return true
	}
	if strings.HasPrefix(line, "exit") && exitLine.MatchString(line) {
		return true
	}
	// A Python exception's repr, RuntimeError('…'), as status.json and
	// result.json give a stage's error.
	if i := strings.IndexByte(line, '('); i > 0 && !strings.ContainsAny(line[:i], " :") &&
		(strings.HasSuffix(line[:i], "Error") || strings.HasSuffix(line[:i], "Exception")) {
		return true
	}
	if i := strings.Index(line, ": "); i > 0 && !strings.Contains(line[:i], " ") {
		for _, u := range unitSuffixes {
			if strings.HasSuffix(line[:i], u) {
				return true
			}
		}
	}
	return false
}

// errorWords mark a line that says something went wrong (lowercase; a
// regular expression of them cost 10 µs a line).
var errorWords = []string{"error", "fail", "cannot", "can't", "could not", "couldn't", "unable", "not found", "no such",
	"does not exist", "denied", "refused", "invalid", "fatal", "panic", "exception", "timed out", "missing",
	"not permitted", "segmentation fault", "unknown"}

// readsAsError reports whether a line holds one of errorWords.
func readsAsError(line string) bool {
	line = strings.ToLower(line)
	for _, w := range errorWords {
		if strings.Contains(line, w) {
			return true
		}
	}
	return false
}

// ownLine strips the journal's prefix from line and reports whether it is
// noise: systemd's (and the agents') own words about the run.
func ownLine(line string) (text string, noise bool) {
	// "Nov 29 03:40:01 ": checked by hand before the expression is run.
	if len(line) > 16 && line[3] == ' ' && line[6] == ' ' && line[9] == ':' && line[12] == ':' {
		if m := journalPrefix.FindStringSubmatch(line); m != nil {
			if m[1] == "systemd" || m[1] == "ignition" || m[1] == "cloud-init" {
				return m[2], true
			}
			line = strings.TrimSpace(m[2]) // mount(8) indents its hint
		}
	}
	return line, isNoise(line)
}
