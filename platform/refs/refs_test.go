package refs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/refs"
	"github.com/vminit/vminit/spec"
)

func TestFetchAndChain(t *testing.T) {
	ctx := t.Context()
	var objs refs.Objects
	docs, err := platform.Split("o.yaml", []byte(`apiVersion: v1
kind: Secret
metadata: {name: s, namespace: ns}
data: {a: YQ==}
stringData: {b: bee}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
data: {x: ex}
binaryData: {why: eQ==}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if !platform.IsReferenced(d) {
			t.Fatalf("%s not referenced", d.Kind)
		}
		if err := objs.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := objs.Add(docs[0]); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a second secret s: %v", err)
	}
	r := platform.Chain{nil, &refs.Objects{}, &objs}
	s, err := platform.Fetch(ctx, r, "secret", "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data["a"]) != "a" || string(s.Data["b"]) != "bee" || strings.Join(s.Keys(), ",") != "a,b" {
		t.Errorf("secret data %q", s.Data)
	}
	cm, err := platform.Fetch(ctx, r, "configmap", platform.DefaultNamespace, "c")
	if err != nil {
		t.Fatal(err)
	}
	if string(cm.Data["x"]) != "ex" || string(cm.Data["why"]) != "y" {
		t.Errorf("configmap data %q", cm.Data)
	}
	if _, _, err := cm.Key("nope", "neither"); !errors.Is(err, platform.ErrMissingKey) || err.Error() != `configmap "c" in namespace "default" has no key "nope" or "neither" (it has "why", "x")` {
		t.Errorf("missing key: %v", err)
	}
	if k, v, err := cm.Key("nope", "why"); err != nil || k != "why" || string(v) != "y" {
		t.Errorf("second key: %q %q %v", k, v, err)
	}
	_, err = platform.Fetch(ctx, r, "secret", platform.DefaultNamespace, "s")
	if !errors.Is(err, platform.ErrNotFound) || err.Error() != `secret "s" not found in namespace "default"` {
		t.Errorf("other namespace: %v", err)
	}
	if _, err := platform.Fetch(ctx, nil, "configmap", "ns", "c"); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("nil resolver: %v", err)
	}
}

// TestSecretDataNotBase64: a Secret's data values (and a ConfigMap's
// binaryData) are base64, which kubectl and the API server decode: text
// written there is refused naming the object, each key and its line.
func TestSecretDataNotBase64(t *testing.T) {
	docs, err := platform.Split("o.yaml", []byte(`apiVersion: v1
kind: Secret
metadata: {name: ud}
data:
  userdata: "#cloud-config\nhostname: x\n"
  ok: YQ==
  other/key: notbase64!
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
binaryData: {bin: "%%"}
`))
	if err != nil {
		t.Fatal(err)
	}
	var objs refs.Objects
	err = objs.Add(docs[0])
	for _, want := range []string{
		`o.yaml:5: data.userdata: Secret "ud": not base64 (illegal base64 data at input byte 0)`,
		`o.yaml:7: data["other/key"]: Secret "ud": not base64`,
		"kubectl and the API server refuse the Secret: data holds base64; give text under stringData",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if es := spec.AsErrors(err); len(es) != 2 {
		t.Errorf("%d problems, want one per key: %v", len(es), err)
	}
	if err := objs.Add(docs[1]); err == nil || !strings.Contains(err.Error(), `o.yaml:12: binaryData.bin: ConfigMap "c": not base64`) {
		t.Errorf("configmap binaryData: %v", err)
	}
}
