package controller_test

import (
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/cmd/internal/controller"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/kubestore"
)

// TestNodeLabels: the controller labels each Instance with the nodes of
// the VMIs that count for it (named by the VMI, or by its VM), both
// nodes while a migration runs and the target's after it, none once its
// VMI is gone; and
// a node agent serves its node's VMs from one labelled watch of
// Instances, a VM's Instance resolved from the controller's
// status.virtualMachines: two watches open (VMIs, Instances), nothing
// followed by name.
func TestNodeLabels(t *testing.T) {
	e := setup(t, true)
	vmis := e.dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances).Namespace("default")
	vmi := func(name, instance, ip string, labels map[string]string, vm bool) {
		t.Helper()
		var ann map[string]string
		if instance != "" {
			ann = map[string]string{v1alpha1.AnnotationInstance: instance}
		}
		u := kubetest.VMI("default", name, ann)
		u.SetLabels(labels)
		if vm {
			yes := true
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: name, UID: "0", Controller: &yes}})
		}
		v, err := vmis.Create(e.ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		unstructured.SetNestedSlice(v.Object, []any{kubetest.VMIInterface("default", "", ip)}, "status", "interfaces")
		if _, err := vmis.UpdateStatus(e.ctx, v, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel := func(name string, labels map[string]string) {
		t.Helper()
		u, err := vmis.Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.SetLabels(labels)
		if _, err := vmis.Update(e.ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	on := func(node string) map[string]string { return map[string]string{v1alpha1.KubeVirtLabelNodeName: node} }
	nodeLabels := func(name string) string {
		u, err := e.instances("default").Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		keys := slices.Sorted(maps.Keys(u.GetLabels()))
		return strings.Join(slices.DeleteFunc(keys, func(k string) bool { return !v1alpha1.IsNodeLabel(k) }), " ")
	}
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		e.create(t, "default", n, "hostname: "+n)
	}
	e.vm(t, "vm-2", map[string]string{v1alpha1.AnnotationInstance: "web-2"})
	vmi("vm-1", "web-1", "127.0.0.41", on("node-a"), false)
	vmi("vm-2", "", "127.0.0.42", on("node-a"), true)
	vmi("vm-3", "web-3", "127.0.0.43", on("node-b"), false)
	c := e.run(t, controller.Config{KubeVirt: true})

	want := func(what string, labels map[string]string) {
		t.Helper()
		waitFor(t, what, func() bool {
			for name, l := range labels {
				if nodeLabels(name) != l {
					return false
				}
			}
			return true
		})
	}
	want("each Instance labelled with its VMI's node", map[string]string{
		"web-1": "node.vminit.dev/node-a", "web-2": "node.vminit.dev/node-a", "web-3": "node.vminit.dev/node-b"})
	e.status(t, "default", "web-2", func(st *v1alpha1.InstanceStatus) bool { return len(st.VirtualMachines) == 1 })

	// A node agent with the labels: one watch of its VMIs, one of its
	// labelled Instances.
	cfg := e.s.Config()
	counter := kubetest.Count(cfg)
	st, err := kubestore.Open(e.ctx, kubestore.Config{REST: cfg, KubeVirt: true, Node: "node-a", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	servedAt := func(a string) string {
		r, ok := st.Snapshot().ByAddr(netip.MustParseAddr(a))
		if !ok {
			return ""
		}
		return r.Name
	}
	if got := strings.Join(st.Snapshot().Names(), " "); got != "default/web-1 default/web-2" || servedAt("127.0.0.41") != "default/web-1" || servedAt("127.0.0.42") != "default/web-2" {
		t.Errorf("node-a's agent holds %q, serves .41 to %q, .42 to %q", got, servedAt("127.0.0.41"), servedAt("127.0.0.42"))
	}
	if i, v, cm := st.Following(); i+v+cm != 0 {
		t.Errorf("following by name %d Instances, %d VMs, %d ConfigMaps; want none", i, v, cm)
	}
	waitFor(t, "2 watches open", func() bool { return counter.Open() == 2 })
	if counter.Max() != 2 {
		t.Errorf("the agent had %d watches open at once while starting; want 2 (no follower started before the labelled Instances were listed)", counter.Max())
	}

	// vm-1 migrates to node-b: both nodes while it runs, node-b's after.
	relabel("vm-1", map[string]string{v1alpha1.KubeVirtLabelNodeName: "node-a", v1alpha1.KubeVirtLabelMigrationTargetNode: "node-b"})
	want("web-1 labelled with both nodes during the migration", map[string]string{"web-1": "node.vminit.dev/node-a node.vminit.dev/node-b"})
	relabel("vm-1", on("node-b"))
	want("web-1 labelled with node-b after it", map[string]string{"web-1": "node.vminit.dev/node-b"})
	waitFor(t, "node-a's agent drops web-1", func() bool {
		return strings.Join(st.Snapshot().Names(), " ") == "default/web-2" && servedAt("127.0.0.41") == ""
	})
	// vm-3 is gone: web-3 carries no node label.
	if err := vmis.Delete(e.ctx, "vm-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want("web-3 unlabelled", map[string]string{"web-3": ""})
	// (While the two watches' events cross, the agent may briefly follow
	// web-1 by name: the label gone before the VMI's move arrived.)
	waitFor(t, "2 watches open after the migration", func() bool { return counter.Open() == 2 })
	if i, v, cm := st.Following(); i+v+cm != 0 {
		t.Errorf("after the migration: following %d, %d, %d by name; want none", i, v, cm)
	}
	if n := metric(t, c, `vminit_controller_writes_total{object="labels"}`); n == "0" {
		t.Error("no label writes counted")
	}
}
