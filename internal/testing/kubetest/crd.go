package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// CRDResource is the API resource of CustomResourceDefinitions, which the
// harness creates and reads as unstructured objects through the dynamic
// client: a test's CRD manifest goes to the server as written, with no
// typed apiextensions client in between.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CreateCRDs creates the CustomResourceDefinitions in manifest (YAML, one
// or more documents, or JSON) as the admin and waits until each is
// Established and its served versions are in the server's discovery, so
// typed, dynamic and discovery-based clients (kubectl) can all use them at
// once. It returns the CRDs' names. A document of any other kind, or a CRD
// whose names are refused, fails the test.
func (s *Server) CreateCRDs(t testing.TB, manifest []byte) []string {
	t.Helper()
	var crds []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for i := 0; ; i++ {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("CRD manifest document %d: %v", i, err)
		}
		if obj == nil { // an empty document
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAPIVersion() != "apiextensions.k8s.io/v1" || u.GetKind() != "CustomResourceDefinition" {
			t.Fatalf("CRD manifest document %d: %s %s %q is not an apiextensions.k8s.io/v1 CustomResourceDefinition",
				i, u.GetAPIVersion(), u.GetKind(), u.GetName())
		}
		crds = append(crds, u)
	}
	if len(crds) == 0 {
		t.Fatal("CRD manifest holds no CustomResourceDefinition")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := s.Dynamic(t).Resource(CRDResource)
	var names []string
	for _, u := range crds {
		if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD %s: %v", u.GetName(), err)
		}
		names = append(names, u.GetName())
	}
	cs := s.Clientset(t)
	for _, name := range names {
		var last error
		for {
			last = crdServed(ctx, cs.Discovery(), client, name)
			if last == nil {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("CRD %s: %v", name, last)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return names
}

type resourceLister interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

type getter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
}

// crdServed returns nil once the CRD is Established and discovery lists
// its plural under every served version.
func crdServed(ctx context.Context, disc resourceLister, client getter, name string) error {
	crd, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	status := map[string]string{}
	for _, c := range conds {
		c, _ := c.(map[string]any)
		typ, _ := c["type"].(string)
		st, _ := c["status"].(string)
		status[typ] = st
		if typ == "NamesAccepted" && st == "False" {
			return fmt.Errorf("names not accepted: %v: %v", c["reason"], c["message"])
		}
	}
	if status["Established"] != "True" {
		return fmt.Errorf("not Established (conditions %v)", status)
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		v, _ := v.(map[string]any)
		if served, _ := v["served"].(bool); !served {
			continue
		}
		gv := group + "/" + fmt.Sprint(v["name"])
		list, err := disc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			return fmt.Errorf("discovery of %s: %v", gv, err)
		}
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == plural }) {
			return fmt.Errorf("discovery of %s does not list %s yet", gv, plural)
		}
	}
	return nil
}
