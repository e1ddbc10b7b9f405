package servercmd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDocsServerLines parses every vminit-server command line the README
// and the docs show (cmd/internal/cli's TestDocsCommands runs the vminit
// ones, and cannot link this package): the flags must exist. None runs
// here, each needing etcd.
func TestDocsServerLines(t *testing.T) {
	pages, _ := filepath.Glob("../../../docs/*.md")
	pages = append(pages, "../../../README.md", "../../../deploy/README.md")
	n := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range commandLines(string(data)) {
			args := strings.Fields(line)[1:]
			args = slices.DeleteFunc(args, func(a string) bool { return a == "..." })
			if err := New().ParseFlags(args); err != nil {
				t.Errorf("%s: %s: %v", page, line, err)
			}
			n++
		}
	}
	if n == 0 {
		t.Error("no vminit-server line in the docs: is the page list right?")
	}
}

// commandLines are the lines of text that start (indented or not) with
// "vminit-server ", continuation lines joined and comments cut.
func commandLines(text string) []string {
	var out []string
	var cur strings.Builder
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if cur.Len() == 0 && !strings.HasPrefix(l, "vminit-server ") {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		line := cur.String()
		cur.Reset()
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		out = append(out, strings.TrimSpace(line))
	}
	return out
}
