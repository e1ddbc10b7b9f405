package spec

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestDialectsMarkers: the CRD's schema of spec.metadataServer.dialects
// (the kubebuilder markers controller-gen reads, which cannot name a Go
// variable) and its comment list Dialects, so that adding a dialect
// users may list is told everything it must change here. The metadata
// server's own lists derive from its registry (mdserver.Dialects), whose
// TestDialectsMatchSpec holds it to Dialects.
func TestDialectsMarkers(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "types.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc *ast.CommentGroup
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "MetadataServer" {
			for _, fd := range ts.Type.(*ast.StructType).Fields.List {
				if len(fd.Names) == 1 && fd.Names[0].Name == "Dialects" {
					doc = fd.Doc
				}
			}
		}
		return doc == nil
	})
	if doc == nil {
		t.Fatal("types.go: no MetadataServer.Dialects with a comment")
	}
	text := strings.Join(strings.Fields(doc.Text()), " ")
	for _, want := range []string{
		"+kubebuilder:validation:items:Enum=" + strings.Join(Dialects, ";"),
		"+kubebuilder:validation:MaxItems=" + strconv.Itoa(len(Dialects)),
		strings.Join(Dialects, ", ") + ".",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("MetadataServer.Dialects' comment lacks %q (then run make generate):\n%s", want, doc.Text())
		}
	}
}
