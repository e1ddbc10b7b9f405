package cluster

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// TestFindMachine: the Machine whose bootstrap configRef names a
// KubeadmConfig is found in its namespace, with its role; none is nil, no error.
func TestFindMachine(t *testing.T) {
	machine := func(ns, name, config string, cp bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{"bootstrap": map[string]any{"configRef": map[string]any{
				"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": config}}},
		}}
		if cp {
			u.SetLabels(map[string]string{"cluster.x-k8s.io/control-plane": ""})
		}
		return u
	}
	gvr := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
	pools := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinepools"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "MachineList", pools: "MachinePoolList"},
		machine("ns", "cp-0", "cp-0-config", true), machine("ns", "md-0", "md-0-config", false), machine("other", "x", "cp-1-config", true))
	r := &Resolver{client: client}
	for _, c := range []struct {
		config string
		want   string
		cp     bool
	}{{"cp-0-config", "cp-0", true}, {"md-0-config", "md-0", false}, {"cp-1-config", "", false}} {
		m, err := r.FindMachine(t.Context(), "ns", c.config)
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.config, err)
		case c.want == "" && m != nil:
			t.Errorf("%s: found %+v in another namespace", c.config, m)
		case c.want != "" && (m == nil || m.Name != c.want || m.ControlPlane != c.cp):
			t.Errorf("%s: %+v, want %s (control plane %v)", c.config, m, c.want, c.cp)
		}
	}
}
