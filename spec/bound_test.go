package spec_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/vminit/vminit/spec"
)

// maxDecodeAlloc bounds what decoding one spec of at most MaxSpecSize may
// allocate, however it is built: the bound docs/security.md states.
const maxDecodeAlloc = 1 << 30

// decodeAlloc decodes doc and returns the bytes the decode allocated
// (runtime.MemStats.TotalAlloc, so garbage counts too) and its error.
func decodeAlloc(t *testing.T, doc []byte) (uint64, error) {
	t.Helper()
	if len(doc) > spec.MaxSpecSize {
		t.Fatalf("the test's document is %d bytes, past the spec's limit", len(doc))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := spec.Decode(doc)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}

// repeat is s n times, then end.
func repeat(start, s string, n int, end string) []byte {
	var b strings.Builder
	b.Grow(len(start) + len(s)*n + len(end))
	b.WriteString(start)
	for range n {
		b.WriteString(s)
	}
	b.WriteString(end)
	return []byte(b.String())
}

// flowLines is n entries e of a flow list, 1,000 to a line.
func flowLines(e string, n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(e)
		if i < n-1 {
			b.WriteByte(',')
		}
		if i%1000 == 999 {
			b.WriteString("\n  ")
		}
	}
	return b.String()
}

const boundHeader = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n"

// TestHugeCollectionsBounded: a spec of millions of short entries, within
// the 16 MiB size limit, is refused while it is parsed, naming the
// collection and its line, within 1 GB of allocations, whichever parser
// reads it: 4 million entries took 5 s and 1.5 GB before being refused
// by the list limit.
func TestHugeCollectionsBounded(t *testing.T) {
	const n = 4_000_000
	for _, c := range []struct {
		name string
		doc  []byte
		want string
	}{
		{"block list", repeat(boundHeader+" packages:\n", " -\n", n, ""), "5: spec.packages: more than 10000 entries"},
		{"one-line flow list", repeat(boundHeader+"  packages: [", "a,", n, "a]\n"), "5: spec.packages: more than 10000 entries"},
		// Flow over several lines is for yaml.v3: the fast path declines it.
		{"multi-line flow list", []byte(boundHeader + "  packages: [" + flowLines("a", n) + "]\n"), "504: by this line the document may hold more than 1000000 values"},
		{"multi-line flow list within the node bound", []byte(boundHeader + "  packages: [" + flowLines("a", 20_000) + "]\n"), "5: spec.packages: more than 10000 entries"},
		{"mapping", repeat(boundHeader+" cloudInit:\n  metaData:\n", "   a:\n", n/2, ""), "6: spec.cloudInit.metaData: more than 10000 entries"},
		{"mapping keys", repeat(boundHeader, " a:\n", n, ""), "4: spec: more than 10000 entries"},
		// 4,000 lists of 1,000 entries each: no list is past the limit,
		// the document is past the node budget.
		// (Commands may be argv lists.)
		{"nested lists", repeat(boundHeader+" commands:\n", " - ["+strings.Repeat("a,", 999)+"a]\n", n/1000, ""), "1004: spec.commands[998]: the document holds more than 1000000 values"},
		{"nested lists over lines", []byte(boundHeader + "  commands: [" + strings.Repeat("["+flowLines("a", 999)+"],\n", n/1000) + "[a]]\n"), "504: by this line the document may hold more than 1000000 values"},
	} {
		t.Run(c.name, func(t *testing.T) {
			alloc, err := decodeAlloc(t, c.doc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %.300v, want %q", err, c.want)
			}
			if alloc > maxDecodeAlloc {
				t.Errorf("decoding %d bytes allocated %d MB", len(c.doc), alloc>>20)
			}
			t.Logf("%d bytes: %d MB allocated: %.200v", len(c.doc), alloc>>20, err)
		})
	}
}

// TestLargeSpecsLoad: the bounds leave room for real specs. 10,000 files
// with literal contents near the 16 MiB size limit load on the fast path,
// however dense their text; with an anchor, which sends them to yaml.v3,
// they load as long as yaml.v3's bound, counted before parsing, holds
// (base64-like contents), and are refused past it, naming the line; all
// within 1 GB of allocations.
func TestLargeSpecsLoad(t *testing.T) {
	doc := func(anchor, line string) []byte {
		var b strings.Builder
		b.WriteString(boundHeader + "  hostname: " + anchor + "a\n  files:\n")
		for i := range spec.MaxListEntries {
			b.WriteString("  - path: /etc/f" + strconv.Itoa(i) + "\n    mode: 0644\n    content: |\n")
			for range 17 {
				b.WriteString("      " + line + "\n")
			}
		}
		return []byte(b.String())
	}
	dense := strings.Repeat("x", 75) + ": a, b - c" // 4 separators a line, with its break
	base64 := strings.Repeat("QUJD", 21)
	for _, c := range []struct {
		name string
		doc  []byte
		want string
	}{
		{"fast path", doc("", dense), ""},
		{"yaml.v3", doc("&h ", base64), ""},
		{"yaml.v3, dense", doc("&h ", dense), "133337: by this line the document may hold more than 1000000 values"},
		// The most yaml.v3's bound lets through, after the fast path
		// built it too and declined at the last line.
		{"both parsers", repeat(boundHeader+"  commands:\n", "  - ["+strings.Repeat("a,", 999)+"a]\n", 495, "  hostname: &h a\n"), ""},
		{"line breaks", repeat(boundHeader, "\n", spec.MaxSpecSize-len(boundHeader), ""), ""},
	} {
		alloc, err := decodeAlloc(t, c.doc)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %.300v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %.300v, want %q", c.name, err, c.want)
		}
		if alloc > maxDecodeAlloc {
			t.Errorf("%s: decoding %d bytes allocated %d MB", c.name, len(c.doc), alloc>>20)
		}
		t.Logf("%s: %d bytes, %d MB allocated", c.name, len(c.doc), alloc>>20)
	}
}
