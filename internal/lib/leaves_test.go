package lib

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLeaves checks the package rule: no non-test file under internal/lib
// imports a vminit package outside internal/lib.
func TestLeaves(t *testing.T) {
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(gomod), "\n")
	module, ok := strings.CutPrefix(first, "module ")
	if !ok {
		t.Fatalf("go.mod begins %q, not with its module line", first)
	}
	allowed := module + "/internal/lib/"
	files, err := filepath.Glob("*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Go files under internal/lib")
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if (p == module || strings.HasPrefix(p, module+"/")) && !strings.HasPrefix(p, allowed) {
				t.Errorf("internal/lib/%s imports %s: internal/lib packages import no vminit package outside internal/lib (see the package doc)", filepath.ToSlash(name), p)
			}
		}
	}
}
