package v1alpha1_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/deploy/kubernetes/crd"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/spec"
)

// object loads a spec file as the Instance object `vminit instances put
// --kubeconfig` would create from it.
func object(t *testing.T, path string) *v1alpha1.Instance {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inCluster.Parse(data, filepath.Dir(path)); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	inst, _, err := spec.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Resolve(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	return v1alpha1.FromSpec(inst)
}

// inCluster loads a spec as the cluster's readers do (kubestore, the
// controller): the VMI identifies the guest, so metadataServer needs no
// addresses (examples/kubevirt-instance.yaml).
var inCluster = spec.Loader{IdentifiedByPlatform: true}

func unstructuredOf(t *testing.T, v any) *unstructured.Unstructured {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u
}

// Every example spec is accepted by the API server as an Instance, reads
// back through the Go types, and stands for a spec document that loads to
// the same instance as the file: the schema refuses nothing `vminit
// validate` accepts, and prunes nothing.
func TestExamplesRoundTrip(t *testing.T) {
	s := kubetest.Start(t)
	s.CreateCRDs(t, crd.Instances)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := s.Dynamic(t).Resource(v1alpha1.GroupVersionResource).Namespace("default")
	files, _ := filepath.Glob("../../../examples/*.yaml")
	files = append(files, "../../../examples/ubuntu-server/instance.yaml")
	for _, f := range files {
		obj := object(t, f)
		created, err := res.Create(ctx, unstructuredOf(t, obj), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var back v1alpha1.Instance
		if err := json.Unmarshal(must(created.MarshalJSON()), &back); err != nil {
			t.Fatalf("%s: reading the object back: %v", f, err)
		}
		doc, err := back.SpecDocument()
		if err != nil {
			t.Fatal(err)
		}
		got, err := inCluster.Parse(doc, "")
		if err != nil {
			t.Fatalf("%s: the object's document does not load: %v\n%s", f, err, doc)
		}
		want, err := inCluster.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		// Content read from files is inlined in the object.
		if g, w := must(json.Marshal(got.Spec)), must(json.Marshal(v1alpha1.FromSpec(want).Spec)); string(g) != string(w) {
			t.Errorf("%s: the object stands for another spec:\n got %s\nwant %s", f, g, w)
		}
		// The unstructured path (the stores') gives the same document.
		specField, _, _ := unstructured.NestedFieldNoCopy(created.Object, "spec")
		doc2, err := v1alpha1.SpecDocumentOf(created.GetName(), created.GetLabels(), specField)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inCluster.Parse(doc2, ""); err != nil {
			t.Errorf("%s: unstructured document: %v", f, err)
		}
		// DeepCopy copies the spec.
		cp := back.DeepCopy()
		if !reflect.DeepEqual(cp, &back) {
			t.Errorf("%s: DeepCopy differs", f)
		}
	}
}

// The schema refuses what it can tell is wrong, naming the field; and
// where `vminit validate` refuses the same document, it names the same
// field.
func TestSchemaRefuses(t *testing.T) {
	s := kubetest.Start(t)
	s.CreateCRDs(t, crd.Instances)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := s.Dynamic(t).Resource(v1alpha1.GroupVersionResource).Namespace("default")
	for _, c := range []struct {
		name, spec, field string
		// api: the API server refuses it; validate: so does vminit
		// validate (the controller then reports it in status).
		api, validate bool
	}{
		{"mode-number", `{"files": [{"path": "/a", "mode": 420}]}`, "spec.files[0].mode", true, false},
		{"mode-digits", `{"files": [{"path": "/a", "mode": "0999"}]}`, "spec.files[0].mode", true, true},
		{"command-object", `{"commands": [{"run": "x"}]}`, "spec.commands[0]", false, true},
		{"command-list-of-numbers", `{"bootCommands": [[{"a": 1}]]}`, "spec.bootCommands[0]", false, true},
		{"fqdn", `{"hostname": "a", "fqdn": "b.example.com"}`, "spec.fqdn", true, true},
		{"hostname", `{"hostname": "Not_A_Name"}`, "spec.hostname", true, true},
		{"source-file", `{"files": [{"path": "/a", "source": {"file": "/etc/shadow"}}]}`, "spec.files[0].source", true, true},
		{"ref-file", `{"users": [{"name": "a", "passwordHashFrom": {"file": "/etc/shadow"}}]}`, "spec.users[0].passwordHashFrom.file", true, true},
		{"ref-two", `{"cloudInit": {"userDataFrom": {"secretKeyRef": {"name": "a", "key": "b"}, "configMapKeyRef": {"name": "a", "key": "b"}}}}`, "spec.cloudInit.userDataFrom", true, true},
		{"host-key-file", `{"sshHostKeys": {"ed25519": {"file": "ssh_host_ed25519_key"}}}`, "spec.sshHostKeys.ed25519.file", true, true},
		{"two-contents", `{"files": [{"path": "/a", "content": "x", "contentBase64": "eA=="}]}`, "spec.files[0]", true, true},
		{"agent", `{"agent": "puppet"}`, "spec.agent", true, true},
		{"network-twice", `{"network": {"ethernets": {"eth0": {"dhcp4": true}}}, "cloudInit": {"networkConfig": "version: 2"}}`, "spec.cloudInit.networkConfig", true, true},
		{"hop-limit", `{"metadataServer": {"addresses": ["10.0.0.1"], "tokenHopLimit": 65}}`, "spec.metadataServer.tokenHopLimit", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sp map[string]any
			if err := json.Unmarshal([]byte(c.spec), &sp); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance",
				"metadata": map[string]any{"name": c.name}, "spec": sp}}
			_, err := res.Create(ctx, u, metav1.CreateOptions{})
			switch {
			case c.api && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.field)):
				t.Errorf("created: %v; want Invalid naming %s", err, c.field)
			case !c.api && err != nil:
				t.Errorf("refused: %v; want it stored (the schema cannot tell)", err)
			}
			if !c.validate {
				return
			}
			doc, _ := v1alpha1.SpecDocumentOf(c.name, nil, sp)
			_, verr := spec.Parse(doc, "")
			if verr == nil || !strings.Contains(verr.Error(), c.field) {
				t.Errorf("vminit validate: %v; want a problem with %s", verr, c.field)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
