package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestThinMains holds the floors of the house: the programs' code lives
// under cmd/internal (the applications' floor, which Go's internal rule
// keeps to cmd/), and each program under cmd/ is a thin main over its
// application, importing nothing of vminit but cmd/internal. A main that
// reached past it, into a library or a leaf under internal/, would hold
// code the application floor should.
func TestThinMains(t *testing.T) {
	const module = "github.com/vminit/vminit/"
	out, err := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}} {{join .Imports " "}}{{end}}`, module+"cmd/...").Output()
	if err != nil {
		t.Fatalf("go list %scmd/...: %v", module, err)
	}
	mains := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], module+"cmd/internal/") {
			continue // a tool of the floor itself (the release), no program
		}
		mains++
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) && !strings.HasPrefix(imp, module+"cmd/internal/") {
				t.Errorf("%s imports %s: a program is a thin main over its package under cmd/internal", f[0], imp)
			}
		}
	}
	if mains == 0 {
		t.Fatalf("go list found no program under cmd/: is its output read right?\n%s", out)
	}
}
