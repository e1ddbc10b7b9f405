// Package laughs builds YAML "billion laughs" documents for the tests of
// every reader that must bound what aliases expand to: small
// texts that decode to gigabytes.
package laughs

import (
	"fmt"
	"strings"
)

// Issue's figures: a 100 KB scalar aliased 100×100 times expands to about
// 1 GB from about 100 KB of text.
const (
	IssueScalar = 100 << 10
	IssueWidth  = 100
)

// Mapping returns YAML mapping lines, each indented by indent spaces:
// key "a" is a scalar of size bytes, "b" a list of width aliases to it and
// "c" a list of width aliases to "b": size×width² bytes once expanded.
func Mapping(indent int, size, width int) string {
	pad := strings.Repeat(" ", indent)
	var b strings.Builder
	fmt.Fprintf(&b, "%sa: &a %s\n", pad, strings.Repeat("x", size))
	fmt.Fprintf(&b, "%sb: &b [%s]\n", pad, aliases("a", width))
	fmt.Fprintf(&b, "%sc: [%s]\n", pad, aliases("b", width))
	return b.String()
}

// Issue is the issue's attack as a #cloud-config that cloud-init's schema
// takes: a file's content aliased by runcmd, a list of 100 aliases,
// itself aliased by bootcmd's 100 entries.
func Issue() string {
	return "#cloud-config\n" +
		"write_files: [{path: /a, content: &a " + strings.Repeat("x", IssueScalar) + "}]\n" +
		"runcmd: &b [" + aliases("a", IssueWidth) + "]\n" +
		"bootcmd: [" + aliases("b", IssueWidth) + "]\n"
}

func aliases(anchor string, n int) string {
	return strings.TrimSuffix(strings.Repeat("*"+anchor+", ", n), ", ")
}
