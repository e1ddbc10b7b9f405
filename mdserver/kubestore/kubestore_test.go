package kubestore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vminit/vminit/deploy/kubernetes/crd"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/kubestore"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

func start(t *testing.T, kubevirt bool) (*kubetest.Server, dynamic.Interface) {
	t.Helper()
	s := kubetest.Start(t)
	s.CreateCRDs(t, crd.Instances)
	if kubevirt {
		s.CreateCRDs(t, kubetest.KubeVirtCRDs)
	}
	return s, s.Dynamic(t)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// object is an Instance object with the spec given as YAML.
func object(t testing.TB, ns, name, specYAML string) *unstructured.Unstructured {
	t.Helper()
	var sp map[string]any
	if err := yaml.Unmarshal([]byte(specYAML), &sp); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": sp}}
}

func createNS(t *testing.T, s *kubetest.Server, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := s.Clientset(t).CoreV1().Namespaces().Create(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// eventually waits until cond holds (the store applies watch events
// asynchronously).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func addrOf(snap *registry.Snapshot, a string) string {
	r, ok := snap.ByAddr(netip.MustParseAddr(a))
	if !ok {
		return ""
	}
	return r.Name
}

// TestStore: the first list, then creates, updates, deletes; an object
// that does not load is logged with its field path and keeps nothing (or
// the last good version) served; a newcomer taking an address is refused.
func TestStore(t *testing.T) {
	s, dyn := start(t, false)
	ctx := ctxFor(t)
	createNS(t, s, "a", "b")
	res := func(ns string) dynamic.ResourceInterface {
		return dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
	}
	if _, err := res("a").Create(ctx, object(t, "a", "web-1", "metadataServer: {addresses: [10.0.0.1]}"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var logs testtools.SyncBuffer
	st, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Namespaces: []string{"a", "b"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Addresses: kubetest.Tenants})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := addrOf(st.Snapshot(), "10.0.0.1"); got != "a/web-1" {
		t.Fatalf("after Open: 10.0.0.1 → %q", got)
	}

	// Created in the other namespace; updated; an object outside the
	// watched namespaces is not seen.
	createNS(t, s, "c")
	res("c").Create(ctx, object(t, "c", "other", "metadataServer: {addresses: [10.0.0.9]}"), metav1.CreateOptions{})
	w2, err := res("b").Create(ctx, object(t, "b", "web-2", "metadataServer: {addresses: [10.0.0.2]}"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-2 served", func() bool { return addrOf(st.Snapshot(), "10.0.0.2") == "b/web-2" })
	unstructured.SetNestedStringSlice(w2.Object, []string{"10.0.0.3"}, "spec", "metadataServer", "addresses")
	if _, err := res("b").Update(ctx, w2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-2 moved", func() bool { return addrOf(st.Snapshot(), "10.0.0.3") == "b/web-2" })
	if addrOf(st.Snapshot(), "10.0.0.2") != "" || addrOf(st.Snapshot(), "10.0.0.9") != "" {
		t.Error("an old address, or another namespace's instance, is served")
	}

	// Valid to the schema, not to vminit validate: logged with the field.
	if _, err := res("a").Create(ctx, object(t, "a", "bad", "sshAuthorizedKeys: [not-a-key]\nmetadataServer: {addresses: [10.0.0.4]}"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the invalid object logged", func() bool { return strings.Contains(logs.String(), "object=a/bad") })
	if l := logs.String(); !strings.Contains(l, "spec.sshAuthorizedKeys[0]") {
		t.Errorf("log of an invalid object:\n%s", l)
	}
	if addrOf(st.Snapshot(), "10.0.0.4") != "" {
		t.Error("an invalid instance is served")
	}

	// A newcomer on web-1's address, in the other namespace: a conflict
	// of equal claims, served to neither (TestTenants has the rest).
	if _, err := res("b").Create(ctx, object(t, "b", "thief", "metadataServer: {addresses: [10.0.0.1]}"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the conflict serves nobody", func() bool { return addrOf(st.Snapshot(), "10.0.0.1") == "" })
	// web-1 deleted: the thief gets in.
	if err := res("a").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the thief served once web-1 left", func() bool { return addrOf(st.Snapshot(), "10.0.0.1") == "b/thief" })
	if _, ok := st.Snapshot().ByName("a/web-1"); ok {
		t.Error("a deleted instance is served")
	}
}

// Put and Delete write Instance objects and return once the store serves
// the change; a document that would be refused is refused up front.
func TestPutDelete(t *testing.T) {
	s, dyn := start(t, false)
	ctx := ctxFor(t)
	st, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Namespaces: []string{"default"}, Logger: slog.New(slog.DiscardHandler), Addresses: kubetest.Tenants})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web-1}\nspec:\n  files:\n  - {path: /etc/a, mode: 0600, content: x}\n  metadataServer: {addresses: [10.0.0.1]}\n"
	rec, err := st.Put(ctx, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := addrOf(st.Snapshot(), "10.0.0.1"); got != "default/web-1" || rec.Name != "default/web-1" {
		t.Fatalf("after Put: %q %v", got, rec)
	}
	// The object holds the document's meaning: the mode written as a
	// string, so kubectl's YAML 1.1 never reads it as a decimal number.
	obj, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files, _, _ := unstructured.NestedSlice(obj.Object, "spec", "files")
	if m := files[0].(map[string]any)["mode"]; m != "0600" {
		t.Errorf("stored mode %#v", m)
	}
	if r, _ := st.Snapshot().ByName("default/web-1"); *r.Instance().Spec.Files[0].Mode != 0o600 {
		t.Errorf("served mode %v", r.Instance().Spec.Files[0].Mode)
	}
	// Updated in place.
	if _, err := st.Put(ctx, []byte(strings.Replace(doc, "10.0.0.1", "10.0.0.2", 1))); err != nil {
		t.Fatal(err)
	}
	if addrOf(st.Snapshot(), "10.0.0.2") != "default/web-1" {
		t.Error("the update is not served when Put returns")
	}
	// Refused before writing: invalid, or an address web-1 holds.
	if _, err := st.Put(ctx, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: x}\nspec: {hostname: Bad_Name}\n")); err == nil || !strings.Contains(err.Error(), "spec.hostname") {
		t.Errorf("invalid document: %v", err)
	}
	if _, err := st.Put(ctx, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: thief}\nspec: {metadataServer: {addresses: [10.0.0.2]}}\n")); !errors.Is(err, registry.ErrAddressConflict) {
		t.Errorf("a taken address: %v", err)
	}
	if _, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Get(ctx, "thief", metav1.GetOptions{}); err == nil {
		t.Error("a refused document was written")
	}
	if _, err := st.Put(ctx, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: far}\nspec: {metadataServer: {addresses: [192.168.0.1]}}\n")); err == nil || !strings.Contains(err.Error(), "spec.metadataServer.addresses[0]: 192.168.0.1 is not in a network") {
		t.Errorf("an address outside the namespace's networks: %v", err)
	}
	if err := st.Delete(ctx, "default/web-1"); err != nil {
		t.Fatal(err)
	}
	if st.Snapshot().Len() != 0 {
		t.Error("served after Delete returned")
	}
	if err := st.Delete(ctx, "web-1"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
}

// The API server stops: the store serves from memory; writes made while
// it is down (straight to etcd's API server after the restart) and the
// ones just before are all applied once it is back: no lost update.
func TestAPIServerRestart(t *testing.T) {
	s, dyn := start(t, false)
	ctx := ctxFor(t)
	res := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default")
	for i := range 3 {
		if _, err := res.Create(ctx, object(t, "default", fmt.Sprint("web-", i), fmt.Sprintf("metadataServer: {addresses: [10.0.1.%d]}", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var logs testtools.SyncBuffer
	st, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Namespaces: []string{"default"}, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Addresses: kubetest.Tenants})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s.Stop(t)
	for i := range 3 {
		if addrOf(st.Snapshot(), fmt.Sprintf("10.0.1.%d", i)) != fmt.Sprint("default/web-", i) {
			t.Fatalf("web-%d not served while the API server is down", i)
		}
	}
	time.Sleep(500 * time.Millisecond) // the watch notices
	s.Restart(t)
	// Changes after the restart: an update, a delete, a create.
	w0, err := res.Get(ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedStringSlice(w0.Object, []string{"10.0.2.0"}, "spec", "metadataServer", "addresses")
	if _, err := res.Update(ctx, w0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := res.Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Create(ctx, object(t, "default", "web-9", "metadataServer: {addresses: [10.0.1.9]}"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every change after the restart applied", func() bool {
		sn := st.Snapshot()
		_, gone := sn.ByName("default/web-1")
		return addrOf(sn, "10.0.2.0") == "default/web-0" && !gone && addrOf(sn, "10.0.1.9") == "default/web-9" && addrOf(sn, "10.0.1.2") == "default/web-2"
	})
	if !strings.Contains(logs.String(), "serving from memory") {
		t.Logf("no outage logged:\n%s", logs.String())
	}
}

// Open fails, naming the reason, when it cannot list.
func TestOpenFails(t *testing.T) {
	s := kubetest.Start(t) // no CRD
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "the server could not find the requested resource") {
		t.Errorf("Open without the CRD: %v", err)
	}
}

// A guest is known by its VMI's addresses: the VMI names the Instance,
// or its VirtualMachine does.
func TestKubeVirtIdentity(t *testing.T) {
	s, dyn := start(t, true)
	ctx := ctxFor(t)
	res := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default")
	vms := dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default")
	vmis := dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances).Namespace("default")
	for _, n := range []string{"web-1", "web-2"} {
		if _, err := res.Create(ctx, object(t, "default", n, "hostname: "+n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Namespaces: []string{"default"}, KubeVirt: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	vmi := func(name string, ann map[string]string) *unstructured.Unstructured {
		return kubetest.VMI("default", name, ann)
	}
	setStatus := func(u *unstructured.Unstructured, ips ...string) {
		t.Helper()
		unstructured.SetNestedSlice(u.Object, []any{kubetest.VMIInterface("default", kubetest.InfoSourceAll, ips...)}, "status", "interfaces")
		if _, err := vmis.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A VMI naming web-1 itself.
	v1, err := vmis.Create(ctx, vmi("vm-a", map[string]string{v1alpha1.AnnotationInstance: "web-1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setStatus(v1, "10.244.0.5")
	eventually(t, "the VMI's address serves web-1", func() bool { return addrOf(st.Snapshot(), "10.244.0.5") == "default/web-1" })
	// A VM naming web-2, whose VMI (same name) names nothing.
	vm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm-b", "annotations": map[string]any{v1alpha1.AnnotationInstance: "web-2"}}, "spec": map[string]any{}}}
	if _, err := vms.Create(ctx, vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v2, err := vmis.Create(ctx, vmi("vm-b", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setStatus(v2, "10.244.0.6")
	eventually(t, "the VM's instance is served at its VMI's address", func() bool { return addrOf(st.Snapshot(), "10.244.0.6") == "default/web-2" })
	// The VMI's address changes (a migration, a restart).
	v2, _ = vmis.Get(ctx, "vm-b", metav1.GetOptions{})
	setStatus(v2, "10.244.0.7")
	eventually(t, "the new address", func() bool {
		return addrOf(st.Snapshot(), "10.244.0.7") == "default/web-2" && addrOf(st.Snapshot(), "10.244.0.6") == ""
	})
	// The VMI goes away: its address with it.
	if err := vmis.Delete(ctx, "vm-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted VMI's address dropped", func() bool { return addrOf(st.Snapshot(), "10.244.0.5") == "" })
	if _, ok := st.Snapshot().ByName("default/web-1"); !ok {
		t.Error("web-1 is gone with its VMI")
	}
}

// TestChecksAndIncarnations: the server's checks run on every object, the
// policy also on the addresses a VMI adds; a refused version leaves the
// last good one served; a record's UID is its object's, new when the
// object is deleted and created again.
func TestChecksAndIncarnations(t *testing.T) {
	s, dyn := start(t, true)
	ctx := ctxFor(t)
	res := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default")
	vmis := dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances).Namespace("default")
	var logs testtools.SyncBuffer
	checks := registry.Checks{
		Content: func(r *registry.Record) error {
			if r.Instance().Spec.Hostname == "refused" {
				return spec.Errors{{Field: "spec.hostname", Message: "refused by the check"}}
			}
			return nil
		},
		Policy: func(r *registry.Record) error {
			for i, a := range r.Addresses {
				if a.IsLoopback() {
					return spec.Errors{{Field: fmt.Sprintf("spec.metadataServer.addresses[%d]", i), Message: "loopback refused"}}
				}
			}
			return nil
		},
	}
	st, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Namespaces: []string{"default"}, KubeVirt: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Checks: checks, Addresses: kubetest.Tenants})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hostname := func() string {
		if r, ok := st.Snapshot().ByName("default/web"); ok {
			return r.Instance().Spec.Hostname
		}
		return ""
	}
	obj, err := res.Create(ctx, object(t, "default", "web", "hostname: good\nmetadataServer: {addresses: [10.0.0.1]}"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "web served", func() bool { return hostname() == "good" })
	if r, _ := st.Snapshot().ByName("default/web"); r.UID != string(obj.GetUID()) {
		t.Errorf("UID %q, the object's %q", r.UID, obj.GetUID())
	}
	// A VMI naming web with a loopback address: refused, web keeps serving.
	v, err := vmis.Create(ctx, kubetest.VMI("default", "vm-lo", map[string]string{v1alpha1.AnnotationInstance: "web"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedSlice(v.Object, []any{kubetest.VMIInterface("default", kubetest.InfoSourceAll, "127.0.0.7")}, "status", "interfaces")
	if _, err := vmis.UpdateStatus(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the VMI's loopback address refused", func() bool { return strings.Contains(logs.String(), "loopback refused") })
	if addrOf(st.Snapshot(), "127.0.0.7") != "" || hostname() != "good" {
		t.Errorf("127.0.0.7 → %q, web %q", addrOf(st.Snapshot(), "127.0.0.7"), hostname())
	}
	if err := vmis.Delete(ctx, "vm-lo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedField(obj.Object, "refused", "spec", "hostname")
	if _, err := res.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the refused version logged", func() bool { return strings.Contains(logs.String(), "refused by the check") })
	if hostname() != "good" {
		t.Errorf("served %q, not the last good version", hostname())
	}
	if _, err := st.Put(ctx, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: lo}\nspec:\n  metadataServer: {addresses: [127.0.0.1]}\n")); err == nil || !strings.Contains(err.Error(), "loopback refused") {
		t.Errorf("Put of a loopback instance: %v", err)
	}
	// Deleted and created again with the same spec: a new incarnation.
	first, _ := st.Snapshot().ByName("default/web")
	if err := res.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	obj2, err := res.Create(ctx, object(t, "default", "web", "hostname: good\nmetadataServer: {addresses: [10.0.0.1]}"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new incarnation", func() bool {
		r, ok := st.Snapshot().ByName("default/web")
		return ok && r.UID == string(obj2.GetUID()) && r.UID != first.UID
	})
}

// TestTenants: namespaces are tenants. A's Instance listing the address
// B's VMI reports is not served to B's VM (the VMI's address wins); A's
// `web` does not squat B's `web` (names are namespace/name, in the
// snapshot and through the signed proxy header); an Instance listing
// 10,000 addresses claims none; two equal claims serve nobody; and a
// replica that watched every change and one that listed them once serve
// the same, whatever the order the objects came in.
func TestTenants(t *testing.T) {
	s, dyn := start(t, true)
	ctx := ctxFor(t)
	createNS(t, s, "a", "b")
	res := func(ns string) dynamic.ResourceInterface {
		return dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
	}
	create := func(ns, name, specYAML string) *unstructured.Unstructured {
		t.Helper()
		u, err := res(ns).Create(ctx, object(t, ns, name, specYAML), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	open := func() *kubestore.Store {
		t.Helper()
		// a may list addresses in 10.0.0.0/8, b too: the rule, not the
		// policy, must keep them apart.
		st, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Namespaces: []string{"a", "b"}, KubeVirt: true,
			Logger: slog.New(slog.DiscardHandler), Addresses: kubetest.Tenants})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	watching := open()

	// A gets there first: its web, and a thief listing the address B's VM
	// will have.
	create("a", "web", "hostname: a-web")
	create("a", "thief", "hostname: thief\nmetadataServer: {addresses: [10.0.0.5]}")
	eventually(t, "the thief served", func() bool { return addrOf(watching.Snapshot(), "10.0.0.5") == "a/thief" })
	create("b", "web", "hostname: b-web")
	vmi := kubetest.KubeVirtObject("VirtualMachineInstance", "b", "vm", "web")
	v, err := dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances).Namespace("b").Create(ctx, vmi, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedSlice(v.Object, []any{kubetest.VMIInterface("default", kubetest.InfoSourceAll, "10.0.0.5")}, "status", "interfaces")
	if _, err := dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances).Namespace("b").UpdateStatus(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Two equal claims: x in a first, then y in b, then x again (its
	// resourceVersion now the later one).
	x := create("a", "x", "metadataServer: {addresses: [10.0.0.6]}")
	create("b", "y", "metadataServer: {addresses: [10.0.0.6]}")
	unstructured.SetNestedField(x.Object, "x-again", "spec", "hostname")
	if _, err := res("a").Update(ctx, x, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	many := make([]string, 10_000)
	for i := range many {
		many[i] = fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
	}
	greedy := object(t, "a", "greedy", "hostname: greedy")
	unstructured.SetNestedStringSlice(greedy.Object, many, "spec", "metadataServer", "addresses")
	if _, err := res("a").Create(ctx, greedy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, "B's VM served its own Instance", func() bool { return addrOf(watching.Snapshot(), "10.0.0.5") == "b/web" })
	eventually(t, "greedy applied", func() bool { _, ok := watching.Snapshot().ByName("a/greedy"); return ok })
	eventually(t, "x updated", func() bool {
		r, ok := watching.Snapshot().ByName("a/x")
		return ok && r.Instance().Spec.Hostname == "x-again"
	})
	listing := open()
	for _, st := range []*kubestore.Store{watching, listing} {
		snap := st.Snapshot()
		for addr, want := range map[string]string{"10.0.0.5": "b/web", "10.0.0.6": "", "10.1.0.1": "", "10.1.39.250": ""} {
			if got := addrOf(snap, addr); got != want {
				t.Errorf("%s → %q, want %q", addr, got, want)
			}
		}
		for name, host := range map[string]string{"a/web": "a-web", "b/web": "b-web", "a/thief": "thief"} {
			if r, ok := snap.ByName(name); !ok || r.Instance().Spec.Hostname != host {
				t.Errorf("%s → %v", name, r)
			}
		}
	}
	if a, b := strings.Join(watching.Snapshot().Names(), " "), strings.Join(listing.Snapshot().Names(), " "); a != b {
		t.Errorf("the replicas serve different instances: %s / %s", a, b)
	}

	// A trusted proxy's signed header names namespace/name.
	key := []byte("0123456789abcdef0123456789abcdef")
	h := mdserver.NewHandler(watching, mdserver.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, HMACKey: key,
		Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for name, want := range map[string]string{"b/web": "b-web", "a/web": "a-web"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/latest/meta-data/hostname", nil)
		rec, ok := watching.Snapshot().ByName(name)
		if !ok {
			t.Fatalf("%s not served", name)
		}
		req.Header.Set(mdserver.HeaderInstance, mdserver.SignInstance(key, name, rec.UID, time.Now().Add(time.Minute)))
		r, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("signed %s: %s %s", name, r.Status, body)
		}
	}
	// So does the admin API.
	api := httptest.NewServer(admin.NewHandler(watching, admin.Options{Token: "t", Logger: slog.New(slog.DiscardHandler)}))
	defer api.Close()
	client := &admin.Client{URL: api.URL, Token: "t", HTTP: api.Client()}
	for name, want := range map[string]string{"b/web": "b-web", "a/web": "a-web"} {
		if doc, err := client.Get(ctx, name); err != nil || !strings.Contains(string(doc), "hostname: "+want) {
			t.Errorf("admin GET %s: %v\n%s", name, err, doc)
		}
	}
}

// TestGuestReportedAddresses: only the addresses of a VMI's pod network
// count, which the CNI gives and the guest does not choose. Tenant B's
// guest reporting the addresses of A's VMs, through its guest agent, on a
// secondary (Multus) interface and on one only the guest agent knows, is
// not served there, and A's Instances still are: the one whose spec lists
// its address (inside --spec-addresses), and the one whose VMI reports
// its address on the pod network.
func TestGuestReportedAddresses(t *testing.T) {
	s, dyn := start(t, true)
	ctx := ctxFor(t)
	createNS(t, s, "a", "b")
	st, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Namespaces: []string{"a", "b"}, KubeVirt: true,
		Logger: slog.New(slog.DiscardHandler), Addresses: kubetest.Tenants})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	vmi := func(ns, name, instance string, status []any, secondary ...string) {
		t.Helper()
		vmis := dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances).Namespace(ns)
		v, err := vmis.Create(ctx, kubetest.VMI(ns, name, map[string]string{v1alpha1.AnnotationInstance: instance}, secondary...), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		unstructured.SetNestedSlice(v.Object, status, "status", "interfaces")
		if _, err := vmis.UpdateStatus(ctx, v, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, specYAML := range map[string]string{"web": "metadataServer: {addresses: [10.0.0.5]}", "db": "hostname: db"} {
		if _, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("a").Create(ctx, object(t, "a", name, specYAML), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	vmi("a", "db", "db", []any{kubetest.VMIInterface("default", kubetest.InfoSourceAll, "10.0.0.7")})
	if _, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("b").Create(ctx, object(t, "b", "evil", "hostname: evil"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// B's pod network has 10.0.1.9; its guest agent says A's addresses
	// are on its storage network's interface and on one of its own.
	vmi("b", "vm", "evil", []any{
		kubetest.VMIInterface("default", kubetest.InfoSourceAll, "10.0.1.9"),
		kubetest.VMIInterface("storage", kubetest.InfoSourceAll, "10.0.0.5", "10.0.0.7"),
		kubetest.VMIInterface("", kubetest.InfoSourceGuestAgent, "10.0.0.7", "10.0.0.5"),
	}, "storage")
	eventually(t, "B's pod network address served", func() bool { return addrOf(st.Snapshot(), "10.0.1.9") == "b/evil" })
	for addr, want := range map[string]string{"10.0.0.5": "a/web", "10.0.0.7": "a/db"} {
		if got := addrOf(st.Snapshot(), addr); got != want {
			t.Errorf("%s → %q, want %q", addr, got, want)
		}
	}
}
