package kubetest

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vminit/vminit/deploy/kubernetes/crd"
	"github.com/vminit/vminit/kube/api/v1alpha1"
)

// StartWithInstances starts a server with vminit's Instance CRD and
// returns it with the Instances of namespace default.
func StartWithInstances(t testing.TB) (*Server, dynamic.ResourceInterface) {
	t.Helper()
	s := Start(t)
	s.CreateCRDs(t, crd.Instances)
	return s, s.Dynamic(t).Resource(v1alpha1.GroupVersionResource).Namespace("default")
}

// CreateInstance creates the Instance name in res, its spec given as YAML.
func CreateInstance(t testing.TB, res dynamic.ResourceInterface, name, specYAML string) {
	t.Helper()
	var sp map[string]any
	if err := yaml.Unmarshal([]byte(specYAML), &sp); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance",
		"metadata": map[string]any{"name": name}, "spec": sp}}
	if _, err := res.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
