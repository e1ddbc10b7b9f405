package controller_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/vminit/vminit/cmd/internal/controller"
	"github.com/vminit/vminit/deploy/kubernetes/crd"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

const key1 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@example"

type env struct {
	s    *kubetest.Server
	dyn  dynamic.Interface
	kube kubernetes.Interface
	ctx  context.Context
}

func setup(t *testing.T, kubevirt bool) *env {
	t.Helper()
	s := kubetest.Start(t)
	s.CreateCRDs(t, crd.Instances)
	if kubevirt {
		s.CreateCRDs(t, kubetest.KubeVirtCRDs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return &env{s: s, dyn: s.Dynamic(t), kube: s.Clientset(t), ctx: ctx}
}

// run starts a controller (with kubetest.Tenants unless cfg has one);
// it stops at the test's end.
func (e *env) run(t *testing.T, cfg controller.Config) *controller.Controller {
	t.Helper()
	c, stop := e.start(t, cfg)
	t.Cleanup(stop)
	return c
}

// start starts a controller as run does; stop stops it and waits for
// Run to return.
func (e *env) start(t *testing.T, cfg controller.Config) (c *controller.Controller, stop func()) {
	t.Helper()
	if cfg.REST == nil {
		cfg.REST = e.s.Config()
	}
	if cfg.Addresses.SpecAddresses == nil {
		cfg.Addresses = kubetest.Tenants
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c, err := controller.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return c, sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func (e *env) instances(ns string) dynamic.ResourceInterface {
	return e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
}

func (e *env) create(t *testing.T, ns, name, specYAML string) *unstructured.Unstructured {
	t.Helper()
	var sp map[string]any
	if err := yaml.Unmarshal([]byte(specYAML), &sp); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": sp}}
	out, err := e.instances(ns).Create(e.ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// setSpec replaces an Instance's spec.
func (e *env) setSpec(t *testing.T, ns, name, specYAML string) {
	t.Helper()
	var sp map[string]any
	if err := yaml.Unmarshal([]byte(specYAML), &sp); err != nil {
		t.Fatal(err)
	}
	for {
		u, err := e.instances(ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["spec"] = sp
		if _, err = e.instances(ns).Update(e.ctx, u, metav1.UpdateOptions{}); err == nil {
			return
		} else if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
}

// status waits until the Instance's status describes its generation and
// cond holds for it, and returns it.
func (e *env) status(t *testing.T, ns, name string, cond func(*v1alpha1.InstanceStatus) bool) *v1alpha1.InstanceStatus {
	t.Helper()
	var last *v1alpha1.InstanceStatus
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		u, err := e.instances(ns).Get(e.ctx, name, metav1.GetOptions{})
		if err == nil {
			st := &v1alpha1.InstanceStatus{}
			m, _, _ := unstructured.NestedMap(u.Object, "status")
			runtime.DefaultUnstructuredConverter.FromUnstructured(m, st)
			last = st
			if st.ObservedGeneration == u.GetGeneration() && cond(st) {
				return st
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("status of %s/%s never as wanted; last: %+v", ns, name, last)
	return nil
}

func condition(st *v1alpha1.InstanceStatus, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func isTrue(typ string) func(*v1alpha1.InstanceStatus) bool {
	return func(st *v1alpha1.InstanceStatus) bool { return condition(st, typ).Status == metav1.ConditionTrue }
}

// waitFor polls cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) events(t *testing.T, ns, object, reason string) []corev1.Event {
	t.Helper()
	l, err := e.kube.CoreV1().Events(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, ev := range l.Items {
		if ev.InvolvedObject.Name == object && ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// metric reads one of the controller's metrics.
func metric(t *testing.T, c *controller.Controller, name string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	t.Fatalf("no metric %s in:\n%s", name, rec.Body.String())
	return ""
}

// TestInstance: an Instance's status through create, update, an invalid
// version and its fix: the conditions, the field paths `vminit validate`
// prints, the outputs' digests, Events; and no write when nothing changed.
func TestInstance(t *testing.T) {
	e := setup(t, false)
	c := e.run(t, controller.Config{Namespaces: []string{"default"}})
	specYAML := "sshAuthorizedKeys: [" + key1 + "]\nmetadataServer: {addresses: [10.0.0.1]}\n"
	e.create(t, "default", "web-1", specYAML)
	st := e.status(t, "default", "web-1", isTrue(v1alpha1.ConditionRendered))
	if v, s := condition(st, v1alpha1.ConditionValid), condition(st, v1alpha1.ConditionServed); v.Status != "True" || s.Status != "True" || !strings.Contains(s.Message, "10.0.0.1") {
		t.Errorf("conditions: %+v", st.Conditions)
	}
	if st.Hostname != "web-1" || st.Agent != "cloud-init" {
		t.Errorf("hostname %q agent %q", st.Hostname, st.Agent)
	}
	// The digests are those of the seed `vminit build` makes.
	inst, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web-1}\nspec:\n  sshAuthorizedKeys: ['"+key1+"']\n  metadataServer: {addresses: [10.0.0.1]}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	sd, err := seed.Build(inst, seed.NoCloud, seed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Outputs) != len(sd.Files) {
		t.Fatalf("outputs %+v, seed %d files", st.Outputs, len(sd.Files))
	}
	for i, f := range sd.Files {
		if o := st.Outputs[i]; o.Name != f.Path || o.Size != int64(len(f.Data)) || o.SHA256 != sha(f.Data) {
			t.Errorf("output %d: %+v, want %s (%d bytes, %s)", i, o, f.Path, len(f.Data), sha(f.Data))
		}
	}
	waitFor(t, "a Rendered event", func() bool { return len(e.events(t, "default", "web-1", "Rendered")) > 0 })

	// Nothing changed: nothing written, however often it is reconciled
	// (a label added triggers a reconcile).
	waitFor(t, "the queue drained", func() bool { return metric(t, c, "vminit_controller_queue_depth") == "0" })
	time.Sleep(200 * time.Millisecond)
	writes := metric(t, c, `vminit_controller_writes_total{object="status"}`)
	skipped := metric(t, c, "vminit_controller_writes_skipped_total")
	u, _ := e.instances("default").Get(e.ctx, "web-1", metav1.GetOptions{})
	u.SetLabels(map[string]string{"team": "a"})
	if _, err := e.instances("default").Update(e.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relabelled Instance reconciled", func() bool { return metric(t, c, "vminit_controller_writes_skipped_total") != skipped })
	if got := metric(t, c, `vminit_controller_writes_total{object="status"}`); got != writes {
		t.Errorf("status writes %s → %s for a change that changes nothing", writes, got)
	}

	// Invalid: every problem with its field path, nothing rendered.
	bad := "sshAuthorizedKeys: [not-a-key]\nusers: [{name: Bad-User}]\nmetadataServer: {addresses: [10.0.0.1]}\n"
	e.setSpec(t, "default", "web-1", bad)
	st = e.status(t, "default", "web-1", func(st *v1alpha1.InstanceStatus) bool {
		return condition(st, v1alpha1.ConditionValid).Status == "False"
	})
	v := condition(st, v1alpha1.ConditionValid)
	_, perr := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web-1}\nspec:\n  sshAuthorizedKeys: [not-a-key]\n  users: [{name: Bad-User}]\n  metadataServer: {addresses: [10.0.0.1]}\n"), "")
	for _, fe := range spec.AsErrors(perr) {
		line := fe.Field + ": " + fe.Message
		if !strings.Contains(v.Message, line) {
			t.Errorf("Valid message lacks %q (vminit validate's problem):\n%s", line, v.Message)
		}
	}
	if r := condition(st, v1alpha1.ConditionRendered); r.Status != "False" || len(st.Outputs) != 0 {
		t.Errorf("an invalid spec rendered: %+v %+v", r, st.Outputs)
	}
	if s := condition(st, v1alpha1.ConditionServed); s.Status != "False" || s.Reason != "Invalid" {
		t.Errorf("Served of an invalid version: %+v", s)
	}
	waitFor(t, "an Invalid event", func() bool {
		evs := e.events(t, "default", "web-1", "Invalid")
		return len(evs) > 0 && strings.Contains(evs[0].Message, "spec.sshAuthorizedKeys[0]")
	})
	// A check beyond the spec's own (cloud-init's schema) reports too.
	e.setSpec(t, "default", "web-1", "cloudInit: {userData: \"#cloud-config\\npackages: 3\\n\"}\n")
	st = e.status(t, "default", "web-1", func(st *v1alpha1.InstanceStatus) bool {
		return condition(st, v1alpha1.ConditionValid).Status == "False"
	})
	if v := condition(st, v1alpha1.ConditionValid); !strings.Contains(v.Message, "spec.cloudInit.userData") {
		t.Errorf("cloud-config schema problem: %s", v.Message)
	}
	// Fixed: valid again, new outputs.
	e.setSpec(t, "default", "web-1", "hostname: fixed\nmetadataServer: {addresses: [10.0.0.1]}\n")
	st = e.status(t, "default", "web-1", isTrue(v1alpha1.ConditionRendered))
	if st.Hostname != "fixed" || condition(st, v1alpha1.ConditionServed).Status != "True" {
		t.Errorf("after the fix: %+v", st)
	}
}

// Two Instances of two namespaces claim one address: neither is served
// there, both say so (and an Event too) without naming the other
// namespace's object; once the first is deleted, the second is served.
func TestServedConflict(t *testing.T) {
	e := setup(t, false)
	e.run(t, controller.Config{})
	e.create(t, "default", "first", "metadataServer: {addresses: [10.0.0.1]}")
	e.status(t, "default", "first", isTrue(v1alpha1.ConditionServed))
	e.create(t, "kube-public", "second", "metadataServer: {addresses: [10.0.0.1]}")
	isConflict := func(st *v1alpha1.InstanceStatus) bool {
		return condition(st, v1alpha1.ConditionServed).Reason == "Conflict"
	}
	for _, o := range []struct{ ns, name, other string }{{"default", "first", "second"}, {"kube-public", "second", "first"}} {
		st := e.status(t, o.ns, o.name, isConflict)
		s := condition(st, v1alpha1.ConditionServed)
		if s.Status != metav1.ConditionFalse || !strings.Contains(s.Message, "10.0.0.1 is listed by this Instance and by another Instance: served to neither") || strings.Contains(s.Message, o.other) {
			t.Errorf("%s's Served: %+v", o.name, s)
		}
		waitFor(t, o.name+"'s Conflict Event", func() bool {
			evs := e.events(t, o.ns, o.name, "Conflict")
			return len(evs) > 0 && !strings.Contains(evs[0].Message, o.other)
		})
	}
	if err := e.instances("default").Delete(e.ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.status(t, "kube-public", "second", isTrue(v1alpha1.ConditionServed))
}

// vmi creates VirtualMachineInstance ns/name naming instance, on the pod
// network "default" and the Multus networks secondary, and sets its
// status.interfaces.
func (e *env) vmi(t *testing.T, ns, name, instance string, interfaces []any, secondary ...string) {
	t.Helper()
	vmis := e.dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances).Namespace(ns)
	v, err := vmis.Create(e.ctx, kubetest.VMI(ns, name, map[string]string{v1alpha1.AnnotationInstance: instance}, secondary...), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedSlice(v.Object, interfaces, "status", "interfaces")
	if _, err := vmis.UpdateStatus(e.ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestServedTenants: the Served condition is the servers' rule
// (kuberules.Claims): tenant A's Instance listing the address B's VMI
// reports says it is not served there, and B's (the victim) that it is;
// an Instance listing 10,000 addresses, or one outside its namespace's
// networks, says it claims none; the status of each is written.
func TestServedTenants(t *testing.T) {
	e := setup(t, true)
	for _, ns := range []string{"a", "b", "c"} {
		if _, err := e.kube.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.run(t, controller.Config{KubeVirt: true})
	e.create(t, "a", "thief", "metadataServer: {addresses: [10.0.0.5]}")
	e.status(t, "a", "thief", isTrue(v1alpha1.ConditionServed))
	e.create(t, "b", "web", "hostname: web")
	e.vmi(t, "b", "vm", "web", []any{kubetest.VMIInterface("default", kubetest.InfoSourceAll, "10.0.0.5")})
	victim := e.status(t, "b", "web", func(st *v1alpha1.InstanceStatus) bool {
		return condition(st, v1alpha1.ConditionServed).Message == "served to 10.0.0.5"
	})
	if s := condition(victim, v1alpha1.ConditionServed); s.Status != metav1.ConditionTrue {
		t.Errorf("the victim's Served: %+v", s)
	}
	thief := e.status(t, "a", "thief", func(st *v1alpha1.InstanceStatus) bool {
		return condition(st, v1alpha1.ConditionServed).Status == metav1.ConditionFalse
	})
	if s := condition(thief, v1alpha1.ConditionServed); s.Reason != "AddressRefused" || !strings.Contains(s.Message, "10.0.0.5 is reported by the VirtualMachineInstance of another Instance") || strings.Contains(s.Message, "web") {
		t.Errorf("the thief's Served: %+v", s)
	}
	many := make([]string, 10_000)
	for i := range many {
		many[i] = fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
	}
	e.create(t, "a", "greedy", "metadataServer: {addresses: ["+strings.Join(many, ", ")+"]}")
	e.create(t, "c", "outside", "metadataServer: {addresses: [10.0.0.9]}")
	for name, want := range map[string]string{"a/greedy": "lists 10000 addresses; an Instance may claim 16 at most", "c/outside": "10.0.0.9 is not in a network the operator lets namespace c claim"} {
		ns, n, _ := strings.Cut(name, "/")
		st := e.status(t, ns, n, func(st *v1alpha1.InstanceStatus) bool {
			return condition(st, v1alpha1.ConditionServed).Reason == "AddressRefused"
		})
		if s := condition(st, v1alpha1.ConditionServed); !strings.Contains(s.Message, want) {
			t.Errorf("%s's Served: %+v", name, s)
		}
	}
}

// TestServedGuestReported: Served counts only a VMI's pod network
// addresses, as the servers do (TestGuestReportedAddresses): tenant B's
// guest reporting A's addresses, through its guest agent, on a Multus
// interface and on one only the guest agent knows, leaves A's Instances
// served there (one by its spec's address, one by its VMI's pod network)
// and B's served at its own pod address alone.
func TestServedGuestReported(t *testing.T) {
	e := setup(t, true)
	for _, ns := range []string{"a", "b"} {
		if _, err := e.kube.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.run(t, controller.Config{KubeVirt: true})
	mentions := func(addr string) func(*v1alpha1.InstanceStatus) bool {
		return func(st *v1alpha1.InstanceStatus) bool {
			return strings.Contains(condition(st, v1alpha1.ConditionServed).Message, addr)
		}
	}
	e.create(t, "b", "evil", "hostname: evil")
	e.vmi(t, "b", "vm", "evil", []any{
		kubetest.VMIInterface("default", kubetest.InfoSourceAll, "10.0.1.9"),
		kubetest.VMIInterface("storage", kubetest.InfoSourceAll, "10.0.0.5", "10.0.0.7"),
		kubetest.VMIInterface("", kubetest.InfoSourceGuestAgent, "10.0.0.7", "10.0.0.5"),
	}, "storage")
	e.status(t, "b", "evil", mentions("10.0.1.9"))
	e.create(t, "a", "web", "metadataServer: {addresses: [10.0.0.5]}")
	e.create(t, "a", "db", "hostname: db")
	e.vmi(t, "a", "db", "db", []any{kubetest.VMIInterface("default", kubetest.InfoSourceAll, "10.0.0.7")})
	for name, addr := range map[string]string{"a/web": "10.0.0.5", "a/db": "10.0.0.7", "b/evil": "10.0.1.9"} {
		ns, n, _ := strings.Cut(name, "/")
		st := e.status(t, ns, n, mentions(addr))
		if s := condition(st, v1alpha1.ConditionServed); s.Status != metav1.ConditionTrue || s.Message != "served to "+addr {
			t.Errorf("%s's Served: %+v", name, s)
		}
	}
}

// The API server goes away and comes back: changes made after it returns
// (and the ones it had before) are all reconciled.
func TestAPIServerRestart(t *testing.T) {
	e := setup(t, false)
	e.run(t, controller.Config{Namespaces: []string{"default"},
		LeaderElection: controller.LeaderElection{Namespace: "default", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}})
	e.create(t, "default", "web-1", "hostname: one")
	e.status(t, "default", "web-1", isTrue(v1alpha1.ConditionRendered))
	e.s.Stop(t)
	time.Sleep(3 * time.Second) // past the renew deadline: the lease is lost
	e.s.Restart(t)
	e.setSpec(t, "default", "web-1", "hostname: two")
	e.create(t, "default", "web-2", "hostname: three")
	if st := e.status(t, "default", "web-1", isTrue(v1alpha1.ConditionRendered)); st.Hostname != "two" {
		t.Errorf("web-1 after the restart: %+v", st)
	}
	e.status(t, "default", "web-2", isTrue(v1alpha1.ConditionRendered))
}

// vm is a KubeVirt VirtualMachine.
func (e *env) vm(t *testing.T, name string, annotations map[string]string, volumes ...map[string]any) *unstructured.Unstructured {
	t.Helper()
	vols := make([]any, len(volumes))
	for i, v := range volumes {
		vols[i] = v
	}
	tmplSpec := map[string]any{"domain": map[string]any{"devices": map[string]any{}}}
	if len(vols) > 0 {
		tmplSpec["volumes"] = vols
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"runStrategy": "Always", "template": map[string]any{"spec": tmplSpec}}}}
	u.SetAnnotations(annotations)
	out, err := e.dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default").Create(e.ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) secret(name string) (*corev1.Secret, error) {
	return e.kube.CoreV1().Secrets("default").Get(e.ctx, name, metav1.GetOptions{})
}

func (e *env) waitSecret(t *testing.T, name string, cond func(*corev1.Secret) bool) *corev1.Secret {
	t.Helper()
	var s *corev1.Secret
	waitFor(t, "Secret "+name, func() bool {
		var err error
		s, err = e.secret(name)
		return err == nil && cond(s)
	})
	return s
}

func (e *env) waitGone(t *testing.T, name string) {
	t.Helper()
	waitFor(t, "Secret "+name+" deleted", func() bool {
		_, err := e.secret(name)
		return apierrors.IsNotFound(err)
	})
}

// TestVirtualMachines: a VM naming an Instance, and a VM with its own
// cloud-init volume reading a Secret, get a Secret each, owned by the VM;
// a rotated Secret is followed; nothing changes without a change; deleting
// the VM or the Instance removes what was made, and a Secret the
// controller did not make is never touched.
func TestVirtualMachines(t *testing.T) {
	e := setup(t, true)
	c := e.run(t, controller.Config{Namespaces: []string{"default"}, KubeVirt: true})

	e.create(t, "default", "web", "hostname: web\nnetwork: {ethernets: {eth0: {dhcp4: true}}}\n")
	vm1 := e.vm(t, "vm-1", map[string]string{v1alpha1.AnnotationInstance: "web"})
	s1 := e.waitSecret(t, "vm-1-vminit", func(*corev1.Secret) bool { return true })
	inst, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web}\nspec:\n  hostname: web\n  network: {ethernets: {eth0: {dhcp4: true}}}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	// The guest reports its first boot to its node's agent (report_test.go).
	sd, _ := seed.Build(inst, seed.NoCloud, seed.Options{ReportTo: controller.DefaultReportURL})
	ud, _ := sd.Lookup("user-data")
	nc, _ := sd.Lookup("network-config")
	if string(s1.Data["userdata"]) != string(ud) || string(s1.Data["networkdata"]) != string(nc) {
		t.Errorf("Secret data:\n%s\n%s\nwant\n%s\n%s", s1.Data["userdata"], s1.Data["networkdata"], ud, nc)
	}
	if o := s1.OwnerReferences; len(o) != 1 || o[0].UID != vm1.GetUID() || o[0].Kind != "VirtualMachine" || s1.Labels[controller.LabelManagedBy] != "vminit" {
		t.Errorf("Secret owner and labels: %+v %v", o, s1.Labels)
	}
	st := e.status(t, "default", "web", func(st *v1alpha1.InstanceStatus) bool {
		return len(st.VirtualMachines) == 1 && st.VirtualMachines[0].Secret == "vm-1-vminit"
	})
	if st.VirtualMachines[0].Patched {
		t.Error("patched without PatchVMs")
	}
	waitFor(t, "a SecretReady event naming the Secret", func() bool {
		evs := e.events(t, "default", "vm-1", "SecretReady")
		return len(evs) > 0 && strings.Contains(evs[0].Message, "vm-1-vminit") && strings.Contains(evs[0].Message, "networkDataSecretRef")
	})
	if vm, _ := e.dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default").Get(e.ctx, "vm-1", metav1.GetOptions{}); vm.GetResourceVersion() != vm1.GetResourceVersion() {
		t.Error("the VM was written without PatchVMs")
	}

	// The Instance changes: the Secret follows.
	e.setSpec(t, "default", "web", "hostname: web2\n")
	s1 = e.waitSecret(t, "vm-1-vminit", func(s *corev1.Secret) bool {
		return strings.Contains(string(s.Data["userdata"]), "web2") && s.Data["networkdata"] == nil
	})

	// A VM with its own cloud-init volume, its user data in a Secret.
	if _, err := e.kube.CoreV1().Secrets("default").Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ud"},
		StringData: map[string]string{"userdata": "#cloud-config\nruncmd: [echo one]\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.vm(t, "vm-2", nil, map[string]any{"name": "cloudinit", "cloudInitNoCloud": map[string]any{"secretRef": map[string]any{"name": "ud"}}})
	s2 := e.waitSecret(t, "vm-2-vminit", func(*corev1.Secret) bool { return true })
	if ud := string(s2.Data["userdata"]); !strings.Contains(ud, "echo one") {
		t.Errorf("converted user data:\n%s", ud)
	}
	// Rotated: followed.
	if _, err := e.kube.CoreV1().Secrets("default").Update(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ud"},
		StringData: map[string]string{"userdata": "#cloud-config\nruncmd: [echo two]\n"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s2 = e.waitSecret(t, "vm-2-vminit", func(s *corev1.Secret) bool { return strings.Contains(string(s.Data["userdata"]), "echo two") })

	// Same inputs, same bytes, no write: reconciles (a label on the VM)
	// leave both Secrets as they are.
	waitFor(t, "the queue drained", func() bool { return metric(t, c, "vminit_controller_queue_depth") == "0" })
	writes := metric(t, c, `vminit_controller_writes_total{object="secret"}`)
	skipped := metric(t, c, "vminit_controller_writes_skipped_total")
	for _, n := range []string{"vm-1", "vm-2"} {
		vm, _ := e.dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default").Get(e.ctx, n, metav1.GetOptions{})
		vm.SetLabels(map[string]string{"touched": "yes"})
		if _, err := e.dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default").Update(e.ctx, vm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "both VMs reconciled", func() bool {
		var a, b int
		fmt.Sscan(metric(t, c, "vminit_controller_writes_skipped_total"), &a)
		fmt.Sscan(skipped, &b)
		return a >= b+2
	})
	if got := metric(t, c, `vminit_controller_writes_total{object="secret"}`); got != writes {
		t.Errorf("Secret writes %s → %s without a change", writes, got)
	}
	for _, s := range []*corev1.Secret{s1, s2} {
		if now, _ := e.secret(s.Name); now.ResourceVersion != s.ResourceVersion {
			t.Errorf("%s rewritten without a change", s.Name)
		}
	}

	// An invalid VM: an Event with the field path; its last Secret stays.
	if _, err := e.kube.CoreV1().Secrets("default").Update(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ud"},
		StringData: map[string]string{"other": "x"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an Invalid event naming the secretRef", func() bool {
		for _, ev := range e.events(t, "default", "vm-2", "Invalid") {
			if strings.Contains(ev.Message, "spec.template.spec.volumes[0].cloudInitNoCloud.secretRef") {
				return true
			}
		}
		return false
	})
	if now, err := e.secret("vm-2-vminit"); err != nil || !strings.Contains(string(now.Data["userdata"]), "echo two") {
		t.Errorf("the last good Secret: %v", err)
	}

	// Someone else's Secret of the name the controller would use.
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vm-3-vminit"}, StringData: map[string]string{"userdata": "theirs"}}
	if _, err := e.kube.CoreV1().Secrets("default").Create(e.ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.vm(t, "vm-3", map[string]string{v1alpha1.AnnotationInstance: "web"})
	waitFor(t, "a SecretExists event", func() bool { return len(e.events(t, "default", "vm-3", "SecretExists")) > 0 })

	// Deleting: the VM's Secret goes with the VM; an Instance's with it.
	if err := e.dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default").Delete(e.ctx, "vm-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitGone(t, "vm-2-vminit")
	if err := e.instances("default").Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitGone(t, "vm-1-vminit")
	// Untouched throughout: the user's Secret and someone else's.
	if s, err := e.secret("vm-3-vminit"); err != nil || string(s.Data["userdata"]) != "theirs" {
		t.Errorf("someone else's Secret: %v %v", s, err)
	}
	if _, err := e.secret("ud"); err != nil {
		t.Errorf("the user's Secret: %v", err)
	}
}

// TestPatchVMs: with PatchVMs the VM's cloud-init volume reads the Secret
// (a VM without one gets one); what it replaced comes back when the
// Instance goes.
func TestPatchVMs(t *testing.T) {
	e := setup(t, true)
	e.run(t, controller.Config{Namespaces: []string{"default"}, KubeVirt: true, PatchVMs: true})
	e.create(t, "default", "web", "hostname: web\n")
	vms := e.dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default")

	// Without a volume: one is added, with a disk.
	e.vm(t, "bare", map[string]string{v1alpha1.AnnotationInstance: "web"})
	waitFor(t, "bare patched", func() bool {
		vm, _ := vms.Get(e.ctx, "bare", metav1.GetOptions{})
		vols, _, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "volumes")
		disks, _, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "domain", "devices", "disks")
		return len(vols) == 1 && len(disks) == 1 &&
			fmt.Sprint(vols[0]) == "map[cloudInitNoCloud:map[secretRef:map[name:bare-vminit]] name:vminit-cloudinit]"
	})
	e.status(t, "default", "web", func(st *v1alpha1.InstanceStatus) bool {
		return len(st.VirtualMachines) == 1 && st.VirtualMachines[0].Patched
	})
	// With an inline volume: it now reads the Secret, and its own data is
	// still what the Secret is made from.
	inline := map[string]any{"name": "ci", "cloudInitNoCloud": map[string]any{"userData": "#cloud-config\nruncmd: [echo inline]\n"}}
	e.vm(t, "own", nil, inline)
	waitFor(t, "own patched", func() bool {
		vm, _ := vms.Get(e.ctx, "own", metav1.GetOptions{})
		vols, _, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "volumes")
		return len(vols) == 1 && fmt.Sprint(vols[0]) == "map[cloudInitNoCloud:map[secretRef:map[name:own-vminit]] name:ci]"
	})
	s := e.waitSecret(t, "own-vminit", func(*corev1.Secret) bool { return true })
	if !strings.Contains(string(s.Data["userdata"]), "echo inline") {
		t.Errorf("patched VM's Secret:\n%s", s.Data["userdata"])
	}
	rv := s.ResourceVersion
	time.Sleep(time.Second) // reconciles of the patched VM write nothing
	if s, _ := e.secret("own-vminit"); s.ResourceVersion != rv {
		t.Error("the patched VM's Secret was rewritten")
	}

	// The Instance goes: bare's volume and disk go, its Secret too.
	if err := e.instances("default").Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "bare unpatched", func() bool {
		vm, _ := vms.Get(e.ctx, "bare", metav1.GetOptions{})
		_, hasVols, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "volumes")
		_, hasDisks, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "domain", "devices", "disks")
		return !hasVols && !hasDisks && vm.GetAnnotations()[controller.AnnotationPatched] == ""
	})
	e.waitGone(t, "bare-vminit")
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestStatusRetryBacksOff: an Instance whose status the controller may
// not write is retried with a growing wait (1 s, 2 s, 4 s…), not at
// client-go's default 5 ms doubling (a dozen failed writes in the first
// seconds) nor at a fixed pace forever. Counted over a window, the
// failures can only be fewer on a slower machine.
func TestStatusRetryBacksOff(t *testing.T) {
	e := setup(t, false)
	// An account that reads Instances (and the Secrets and ConfigMaps
	// they may refer to) and writes Events, and may not write their
	// status.
	acct := e.s.ServiceAccount(t, "default", "no-status")
	rbac := e.kube.RbacV1()
	if _, err := rbac.Roles("default").Create(e.ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "no-status"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"vminit.dev"}, Resources: []string{"instances"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings("default").Create(e.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "no-status"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "no-status"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "no-status", Namespace: "default"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := e.run(t, controller.Config{REST: acct.Config(), Namespaces: []string{"default"}})
	e.create(t, "default", "web-1", "hostname: web-1")
	failures := func() int {
		n, _ := strconv.Atoi(metric(t, c, `vminit_controller_reconciles_total{kind="Instance",result="error"}`))
		return n
	}
	waitFor(t, "a refused status write", func() bool { return failures() > 0 })
	// 1 + 1 s + 2 s: at most 3 failures in the next 3.5 s, whatever the
	// machine's speed; the default limiter makes about ten.
	time.Sleep(3500 * time.Millisecond)
	if n := failures(); n > 3 {
		t.Errorf("%d failed status writes within 3.5 s of the first", n)
	}
}
