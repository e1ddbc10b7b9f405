// Package gentest holds the one rule of the Go files a test generates
// (cloud-init's schema tree, cloudbase-init's time zones): `make generate`
// runs the test with a -write flag naming the file to write; otherwise the
// test compares the committed file with what it would write, so that a
// change to the generator's input cannot be left unapplied. Either way the
// file says it is generated in the one line Go's tools read.
package gentest

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"testing"
)

// Check writes src to write when write is set (make generate), and
// otherwise fails t when file does not hold src, saying it is made from
// from. It also fails t when src lacks the generated-code line. It
// reports whether it wrote the file, after which the test has no more to
// check.
func Check(t testing.TB, write, file string, src []byte, from string) (wrote bool) {
	t.Helper()
	// Go's tools (gopls, go vet's and staticcheck's generated-code rules,
	// linters, code review) know a generated file by one line before the
	// package clause (https://go.dev/s/generatedcode).
	f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if !ast.IsGenerated(f) {
		t.Errorf("%s does not say it is generated in the one line Go's tools read", file)
	}
	if write != "" {
		if err := os.WriteFile(write, src, 0o644); err != nil {
			t.Fatal(err)
		}
		return true
	}
	have, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, src) {
		t.Errorf("%s is not what %s gives: run make generate", file, from)
	}
	return false
}
