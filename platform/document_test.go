package platform

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vminit/vminit/spec"
)

func TestSplit(t *testing.T) {
	in := "# comment only\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n  namespace: ns\n--- # a marker with a comment\n\n...\n---\n{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"b\"}}\n"
	docs, err := Split("objs.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("%d documents, want 2 (empty and comment-only ones dropped)", len(docs))
	}
	if d := docs[0]; d.Line != 3 || d.Kind != "Secret" || d.Name != "a" || d.Namespace != "ns" || d.Format != YAML {
		t.Errorf("first: %+v", d)
	}
	if d := docs[1]; d.Line != 12 || d.Kind != "ConfigMap" || d.Name != "b" {
		t.Errorf("second (JSON): line %d kind %q name %q", d.Line, d.Kind, d.Name)
	}

	xml, err := Split("vm.xml", []byte("\ufeff  <vm><name>x</name></vm>"))
	if err != nil || len(xml) != 1 || xml[0].Format != XML || xml[0].JSON != nil {
		t.Errorf("XML: %v %+v", err, xml)
	}

	_, err = Split("bad.yaml", []byte("a: 1\n---\nb: [\n"))
	es := spec.AsErrors(err)
	if len(es) != 1 || es[0].File != "bad.yaml" || es[0].Line == 0 || !strings.Contains(es[0].Message, "not valid YAML") {
		t.Errorf("syntax error: %v", err)
	}

	if _, err := Split("big.yaml", make([]byte, MaxDocumentSize*4+1)); err == nil {
		t.Error("an oversized file is accepted")
	}
}

func TestDecodeStrict(t *testing.T) {
	in := `apiVersion: v1
kind: Secret
metadata:
  name: s
  nmespace: x
data:
  k: 12
stringData:
  a: b
  a: c
`
	docs, err := Split("s.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	err = docs[0].Decode(&corev1.Secret{})
	es := spec.AsErrors(err)
	if len(es) == 0 {
		t.Fatal("decoded without error")
	}
	got := es.Error()
	// The first type error stops encoding/json.
	for _, want := range []string{"s.yaml:6: data: want []uint8, not a JSON number"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}

	docs, _ = Split("s.yaml", []byte(strings.Replace(in, "k: 12", "k: MTI=", 1)))
	es = spec.AsErrors(docs[0].Decode(&corev1.Secret{}))
	got = es.Error()
	for _, want := range []string{"s.yaml:5: metadata.nmespace: unknown field", "stringData.a: given twice"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

// The VMI spec of kubevirt.io/api decodes leniently (its UnmarshalJSON
// uses encoding/json), so misspelled fields below it are found by
// walking the Go type.
func TestUnknownFieldsBelowLenientTypes(t *testing.T) {
	type inner struct {
		Name string `json:"name"`
	}
	type outer struct {
		Items []inner            `json:"items"`
		ByKey map[string]inner   `json:"byKey"`
		Any   map[string]any     `json:"any"`
		Embed struct{ inner }    `json:"embed"`
		Skip  string             `json:"-"`
		Ptr   *map[string]string `json:"ptr"`
	}
	doc := []byte(`{"items": [{"name": "a"}, {"nme": "b"}], "byKey": {"k": {"x": 1}}, "any": {"free": 1}, "embed": {"name": "c", "bad": 2}, "Skip": 1, "ptr": {"a": "b"}}`)
	got := unknownFields(doc, reflect.TypeFor[outer]())
	want := map[string]bool{"items[1].nme": true, `byKey["k"].x`: true, "embed.bad": true, "Skip": true}
	if len(got) != len(want) {
		t.Errorf("unknown fields %q, want %v", got, want)
	}
	for _, f := range got {
		if !want[f] {
			t.Errorf("unexpected unknown field %q", f)
		}
	}
}

func TestLineOf(t *testing.T) {
	in := "# head\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    a/b: x\nspec:\n  containers:\n  - name: c\n    env:\n    - name: E\n"
	docs, err := Split("p.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	d := docs[0]
	for path, want := range map[string]int{
		`metadata.annotations["a/b"]`:         8,
		"spec.containers[0].env[0].name":      13,
		"spec.containers[0].env[0].valueFrom": 13, // the nearest ancestor present
		"spec.containers[3]":                  10,
		"":                                    3,
	} {
		if got := d.LineOf(path); got != want {
			t.Errorf("LineOf(%q) = %d, want %d", path, got, want)
		}
	}
	if w := d.Where("spec.containers[0].name"); w != "p.yaml:11: spec.containers[0].name" {
		t.Errorf("Where = %q", w)
	}
}

func TestTextPosition(t *testing.T) {
	in := "kind: X\nmetadata:\n  annotations:\n    lit: |\n      {\n        \"a\": ]\n      }\n    plain: ab]\n    quoted: \"{\\n]\"\n"
	docs, err := Split("t.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	d := docs[0]
	if l, c, ok := d.TextPosition(`metadata.annotations["lit"]`, 2, 8); !ok || l != 6 || c != 14 {
		t.Errorf("literal block: line %d column %d ok %v, want 6 14", l, c, ok)
	}
	if l, c, ok := d.TextPosition(`metadata.annotations["plain"]`, 1, 3); !ok || l != 8 || c != 14 {
		t.Errorf("plain scalar: line %d column %d ok %v, want 8 14", l, c, ok)
	}
	if _, _, ok := d.TextPosition(`metadata.annotations["quoted"]`, 2, 1); ok {
		t.Error("a quoted scalar's lines are not the file's")
	}

	x := &Document{File: "vm.xml", Line: 1, Format: XML}
	x.SetLine("vm.initialization.custom_script", 5)
	if l, c, ok := x.TextPosition("vm.initialization.custom_script", 3, 4); !ok || l != 7 || c != 4 {
		t.Errorf("XML text: line %d column %d ok %v", l, c, ok)
	}
	if l, c, ok := x.TextPosition("vm.initialization.custom_script", 1, 4); !ok || l != 5 || c != 0 {
		t.Errorf("XML text, first line: line %d column %d ok %v", l, c, ok)
	}
}

func TestTextErrorf(t *testing.T) {
	docs, _ := Split("t.yaml", []byte("kind: X\nmetadata:\n  annotations:\n    q: \"{\\n]\"\n    lit: |\n      ]\n"))
	b := NewBuilder(docs[0], "x")
	b.TextErrorf(`metadata.annotations["q"]`, 2, 1, "bad")
	b.TextErrorf(`metadata.annotations["lit"]`, 1, 1, "bad")
	_, err := b.Finish("x")
	got := err.Error()
	for _, want := range []string{
		`t.yaml:4: metadata.annotations["q"]: line 2, column 1 of its text: bad`,
		`t.yaml:6: metadata.annotations["lit"]: column 7: bad`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}
