// Package scripttext makes the guest's copy of a script vminit's
// renderers embed (cloud-init's report.py, Ignition's report.sh): every
// served guest's user data or config carries it, within its transport's
// budget (EC2's 16 KiB), and the comments written for vminit's engineers
// were a third of its compressed size.
package scripttext

import "bytes"

// Served is src without its comment lines but its opening block, which
// says what the script is and where it comes from. A comment line is one
// whose first non-blank character is #, a rule that holds for Python and
// shell scripts without a multi-line string or here-document a line of
// which could begin so: the callers' tests check their scripts have none.
func Served(src []byte) []byte {
	var out []byte
	opening := true
	for line := range bytes.Lines(src) {
		comment := bytes.HasPrefix(bytes.TrimSpace(line), []byte("#"))
		opening = opening && comment
		if opening || !comment {
			out = append(out, line...)
		}
	}
	return out
}
