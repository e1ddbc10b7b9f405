package yamlbound

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// Laughs is the attack: a scalar of size bytes, aliased by a list
// of width aliases, itself aliased width times, under key. It expands to
// size×width² bytes.
func Laughs(size, width int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "a: &a %s\nb: &b [", strings.Repeat("x", size))
	b.WriteString(strings.TrimSuffix(strings.Repeat("*a, ", width), ", "))
	b.WriteString("]\nc: [")
	b.WriteString(strings.TrimSuffix(strings.Repeat("*b, ", width), ", "))
	b.WriteString("]\n")
	return b.String()
}

// lim is the limit of a spec's document: expanded bytes only.
func lim(bytes int) Limits { return Limits{Bytes: bytes} }

// field is the limit of a document held in a field: nodes too.
func field(bytes int) Limits { return Limits{Bytes: bytes, Nodes: MaxNodes} }

func TestLaughsRefused(t *testing.T) {
	doc := Laughs(100<<10, 100) // 1 GB expanded
	var v any
	err := Unmarshal([]byte(doc), &v, lim(16<<20))
	var be *Error
	if !errors.As(err, &be) {
		t.Fatalf("Unmarshal: %v, want an *Error", err)
	}
	// 16 MiB is crossed at c's first alias: b is 10 MB, and so is each alias to it.
	if be.Path != "c[0]" || be.Line != 3 || be.Limit != 16<<20 {
		t.Errorf("error at %q line %d limit %d, want c[0], line 3, 16 MiB: %v", be.Path, be.Line, be.Limit, err)
	}
	if v != nil {
		t.Errorf("decoded %T despite the error", v)
	}
}

func TestWithinLimitDecodes(t *testing.T) {
	doc := Laughs(10, 10) // 1,000 bytes of x, plus overheads
	var v map[string]any
	if err := Unmarshal([]byte(doc), &v, lim(16<<20)); err != nil {
		t.Fatal(err)
	}
	if c := v["c"].([]any); len(c) != 10 || len(c[9].([]any)) != 10 {
		t.Errorf("decoded %v", v["c"])
	}
	if err := Unmarshal([]byte(doc), &v, lim(1000)); err == nil {
		t.Error("a 1,000-byte limit accepted 1,000 bytes of scalars with their nodes")
	}
}

// A document without aliases is bounded by its text, which its reader
// bounds: Check never refuses one, however small the limit.
func TestNoAliasesNotRefused(t *testing.T) {
	if _, err := Parse([]byte("a: [b, c, {d: e}]\nf: "+strings.Repeat("x", 1000)), lim(10)); err != nil {
		t.Fatal(err)
	}
}

func TestMergeKeysCount(t *testing.T) {
	doc := "base: &m {k: " + strings.Repeat("x", 1000) + "}\n"
	for i := range 20 {
		doc += fmt.Sprintf("m%d: {<<: *m, n: %d}\n", i, i)
	}
	if _, err := Parse([]byte(doc), lim(10000)); err == nil {
		t.Error("twenty merges of a 1,000-byte mapping passed a 10,000-byte limit")
	}
}

func TestSelfContainingAlias(t *testing.T) {
	for _, doc := range []string{"a: &a [*a]\n", "a: &a {b: *a}\n"} {
		_, err := Parse([]byte(doc), lim(1<<20))
		if err == nil || !strings.Contains(err.Error(), "contains it") {
			t.Errorf("%q: %v", doc, err)
		}
	}
}

func TestPathOfLongKeyQuoted(t *testing.T) {
	key := strings.Repeat("k", 100) + "\x01"
	doc := "x: &x " + strings.Repeat("y", 100) + "\n\"" + strings.ReplaceAll(key, "\x01", `\x01`) + "\": [*x, *x]\n"
	_, err := Parse([]byte(doc), lim(250))
	var be *Error
	if !errors.As(err, &be) || be.Path != strings.Repeat("k", 64)+"…[0]" {
		t.Fatalf("%v", err)
	}
}

func TestCheckStream(t *testing.T) {
	if err := CheckStream([]byte("a: 1\n---\n"+Laughs(1000, 100)), lim(1<<20)); err == nil {
		t.Error("the second document's 10 MB passed a 1 MiB limit")
	}
	if err := CheckStream([]byte("a: [\n"), lim(1<<20)); err != nil {
		t.Errorf("a syntax error is the decoder's to report: %v", err)
	}
}

// The check walks each node once, however far the aliases expand: ten
// levels of ten aliases (10¹⁰ nodes) are refused at once.
func TestDeepLaughsLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 x\n")
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	_, err := Parse([]byte(b.String()), lim(math.MaxInt32))
	var be *Error
	if !errors.As(err, &be) {
		t.Fatalf("%v", err)
	}
}

// FuzzYAMLAmplification holds Check to the real decoder: whatever Check
// accepts decodes (yaml.v3, into Go values) to no more than Check counted,
// and, if it uses aliases, to no more than the limit.
func FuzzYAMLAmplification(f *testing.F) {
	f.Add([]byte(Laughs(10, 4)), 200)
	f.Add([]byte("base: &m {k: v}\nm: {<<: [*m, {j: *m}], n: 1}\n"), 50)
	f.Add([]byte("a: &a [&b x, *b]\nb: {*a: 1, c: *a}\n"), 40)
	f.Add([]byte("a: &a !!binary aGVsbG8=\nb: [*a, *a]\n"), 30)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		if len(data) > 4096 || limit < 0 || limit > 1<<16 {
			return
		}
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) != nil {
			return
		}
		w := walker{Limits: lim(math.MaxInt / 2), costs: map[*yaml.Node]cost{}}
		if Check(&doc, lim(limit)) != nil {
			return
		}
		c, err := w.cost(&doc)
		counted := c.bytes
		if err != nil {
			t.Fatalf("accepted with limit %d, refused without: %v", limit, err)
		}
		if w.aliased && counted > limit {
			t.Fatalf("aliases expand to %d, accepted under %d", counted, limit)
		}
		var v any
		if doc.Decode(&v) != nil {
			return
		}
		if got := decodedSize(v); got > counted {
			t.Fatalf("decoded to %d bytes, Check counted %d", got, counted)
		}
	})
}

// decodedSize measures a decoded value as Check measures nodes: each
// value NodeOverhead plus a string's bytes.
func decodedSize(v any) int {
	s := NodeOverhead
	switch v := v.(type) {
	case string:
		s += len(v)
	case []byte:
		s += len(v)
	case []any:
		for _, e := range v {
			s += decodedSize(e)
		}
	case map[string]any:
		for k, e := range v {
			s += NodeOverhead + len(k) + decodedSize(e)
		}
	case map[any]any:
		for k, e := range v {
			s += decodedSize(k) + decodedSize(e)
		}
	case nil, bool, int, int64, uint64, float64, time.Time:
	default:
		panic(fmt.Sprintf("decoded %T", v))
	}
	return s
}

// TestNodesBounded: a document held in a field (Parse, Unmarshal,
// CheckStream) holds at most MaxNodes nodes, aliases or not; Check, for
// whole documents, leaves nodes to their reader's list limits.
func TestNodesBounded(t *testing.T) {
	dense := []byte("a: [" + strings.Repeat("x,", MaxNodes) + "x]\n")
	var be *Error
	if _, err := Parse(dense, field(16<<20)); !errors.As(err, &be) || !be.Nodes || be.Limit != MaxNodes || be.Path != "a["+fmt.Sprint(MaxNodes-4)+"]" {
		t.Errorf("Parse: %v", err)
	}
	if err := CheckStream(append([]byte("a: 1\n---\n"), dense...), field(16<<20)); !errors.As(err, &be) || !be.Nodes {
		t.Errorf("CheckStream: %v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(dense, &doc); err != nil {
		t.Fatal(err)
	}
	if err := Check(&doc, lim(16<<20)); err != nil {
		t.Errorf("Check: %v", err)
	}
	// Aliases count as the nodes they stand for: 400 × 400 = 160,000.
	laughs := Laughs(1, 400)
	if _, err := Parse([]byte(laughs), field(16<<20)); !errors.As(err, &be) || !be.Nodes {
		t.Errorf("Parse of %d bytes of aliases: %v", len(laughs), err)
	}
}
