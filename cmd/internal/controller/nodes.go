package controller

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vminit/vminit/kube/api/v1alpha1"
)

// MaxNodeLabels bounds the node labels (v1alpha1.NodeLabel) the
// controller keeps on one Instance: an Instance that many VMs name (a
// pool's template) would otherwise carry a label per node of the
// cluster. The first MaxNodeLabels nodes, sorted by name, are labelled;
// the agents of the others follow it by name, within their own bound
// (kubestore.Config.MaxFollow).
const MaxNodeLabels = 32

// Node labels: a node agent (`vminit serve --kubernetes --node NODE`)
// lists and watches the Instances labelled v1alpha1.NodeLabel(NODE), one
// selected watch, rather than one watch per Instance its VMIs name
// (docs/design.md, "Node agents watch a label"). The controller keeps
// those labels: an Instance carries one per node a VMI counting for it
// (kuberules.Claims: naming it, or controlled by a VM naming it) runs on
// or, during a migration, moves to (v1alpha1.NodesOf), so that the
// target's agent holds it before the guest switches over.

// nodeLabels are the node labels Instance k should carry, and how many
// nodes were left out over MaxNodeLabels.
func (t *term) nodeLabels(k string) (map[string]bool, int) {
	t.mu.Lock()
	vmis := t.claims.Counting(k)
	t.mu.Unlock()
	nodes := map[string]bool{}
	for _, vk := range vmis {
		ns, name, _ := strings.Cut(vk, "/")
		if obj, ok := get(t.vmis, ns, name); ok {
			for _, n := range v1alpha1.NodesOf(obj.(*unstructured.Unstructured)) {
				nodes[n] = true
			}
		}
	}
	sorted := slices.Sorted(maps.Keys(nodes))
	over := max(0, len(sorted)-MaxNodeLabels)
	want := map[string]bool{}
	for _, n := range sorted[:len(sorted)-over] {
		want[v1alpha1.NodeLabel(n)] = true
	}
	return want, over
}

// labelNodes makes Instance u's node labels those nodeLabels says, with
// one merge patch of the labels that change (the controller writes no
// other label), and returns the object as it now is: nil when it is gone.
func (t *term) labelNodes(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	k := u.GetNamespace() + "/" + u.GetName()
	want, over := t.nodeLabels(k)
	have := u.GetLabels()
	patch := map[string]any{}
	for l := range have {
		if v1alpha1.IsNodeLabel(l) && !want[l] {
			patch[l] = nil
		}
	}
	for l := range want {
		if v, ok := have[l]; !ok || v != "" {
			patch[l] = ""
		}
	}
	if len(patch) == 0 {
		return u, nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch}})
	if err != nil {
		return nil, err
	}
	out, err := t.c.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(u.GetNamespace()).
		Patch(ctx, u.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: "vminit-controller"})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t.c.metrics.labelWrites.Add(1)
	if over > 0 {
		t.c.log.Info("Instance used on more nodes than it may carry labels for; the other nodes' agents follow it by name",
			"object", k, "labelled", MaxNodeLabels, "left_out", over)
	}
	return out, nil
}
