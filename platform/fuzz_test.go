package platform

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vminit/vminit/spec"
)

// FuzzDocument feeds arbitrary files to Split and each document to Decode,
// LineOf and TextPosition: they must not panic, every problem must be a
// field error within the file, and the documents must cover the file in
// order.
func FuzzDocument(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a: 1\n---\nb: [\n"))
	f.Add([]byte("--- !!map\n? a\n: b\n...\n---\n&x [*x]\n"))
	f.Add([]byte("apiVersion: v1\nkind: Secret\nmetadata: {name: a}\ndata: {k: 1}\nstringData: {a: b, a: c}\n"))
	f.Add([]byte("kind: X\nmetadata:\n  annotations:\n    lit: |\n      {\n       ]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Line breaks as YAML counts them: CR LF, LF, or a CR alone.
		lines := strings.Count(string(data), "\n") + strings.Count(string(data), "\r") - strings.Count(string(data), "\r\n") + 1
		docs, err := Split("f.yaml", data)
		if err != nil {
			for _, e := range spec.AsErrors(err) {
				if e.Line > lines {
					t.Fatalf("syntax error at line %d of %d: %v", e.Line, lines, e)
				}
			}
			if spec.AsErrors(err) == nil && !strings.Contains(err.Error(), "the limit is") {
				t.Fatalf("not a field error: %v", err)
			}
			return
		}
		prev := 0
		for _, d := range docs {
			if d.Line < prev || d.Line > lines {
				t.Fatalf("document at line %d after %d, of %d", d.Line, prev, lines)
			}
			prev = d.Line
			var s corev1.Secret
			err := d.Decode(&s)
			var es spec.Errors
			if err != nil && !errors.As(err, &es) {
				t.Fatalf("Decode: not field errors: %v", err)
			}
			for _, e := range es {
				if e.Line > lines {
					t.Fatalf("Decode: line %d of %d: %v", e.Line, lines, e)
				}
			}
			for _, p := range []string{"metadata.name", `metadata.annotations["a/b"]`, "data.k", "spec.x[3].y", "[", `a["`, "a[9999999999999999999]"} {
				if l := d.LineOf(p); l < 0 || l > lines {
					t.Fatalf("LineOf(%q) = %d of %d", p, l, lines)
				}
				if l, _, ok := d.TextPosition(p, 3, 2); ok && (l < 1 || l > lines+3) {
					t.Fatalf("TextPosition(%q) = line %d of %d", p, l, lines)
				}
			}
		}
	})
}
