package deploy

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/vminit/vminit/internal/app/controller"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/kubestore"
)

// TestKustomization applies deploy/kubernetes as an operator does
// (kubectl apply -k) to a real API server, then runs the controller and the
// metadata server's store with the tokens of the manifests' own service
// accounts: what they need, their Roles grant; Secrets they do not need,
// they cannot read.
func TestKustomization(t *testing.T) {
	s := kubetest.Start(t)
	s.CreateCRDs(t, kubetest.KubeVirtCRDs)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := s.Kubectl(t, "apply", "-k", "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"namespace/vminit-system created", "customresourcedefinition.apiextensions.k8s.io/instances.vminit.dev created",
		"deployment.apps/vminit-controller created", "deployment.apps/vminit-server created",
		"rolebinding.rbac.authorization.k8s.io/vminit-controller created",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k: no %q in:\n%s", want, out)
		}
	}
	if out, err := s.Kubectl(t, "wait", "--for=condition=Established", "crd/instances.vminit.dev", "--timeout=60s"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := s.Kubectl(t, "apply", "-k", "kubernetes"); err != nil || strings.Contains(out, "configured") {
		t.Errorf("a second apply changed something: %v\n%s", err, out)
	}
	admin := s.Clientset(t)

	// Secrets the service accounts must not read: one in their own
	// namespace, one in a namespace vminit does not manage.
	for _, ns := range []string{"vminit-system", "elsewhere"} {
		admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "private"},
			StringData: map[string]string{"key": "x"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What a managed namespace holds: a user's Secret a VM reads, an
	// Instance, a VM of each kind.
	if _, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-data"},
		StringData: map[string]string{"userdata": "#cloud-config\nruncmd: [echo hi]\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := s.Dynamic(t)
	inst := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance",
		"metadata": map[string]any{"name": "web-1"}, "spec": map[string]any{"hostname": "web-1",
			"metadataServer": map[string]any{"addresses": []any{"10.0.0.1"}}}}}
	if _, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Create(ctx, inst, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, vm := range []map[string]any{
		{"name": "named", "annotations": map[string]any{v1alpha1.AnnotationInstance: "web-1"}},
		{"name": "own"},
	} {
		tmpl := map[string]any{"domain": map[string]any{"devices": map[string]any{}}}
		if vm["name"] == "own" {
			tmpl["volumes"] = []any{map[string]any{"name": "ci", "cloudInitNoCloud": map[string]any{"secretRef": map[string]any{"name": "user-data"}}}}
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
			"metadata": vm, "spec": map[string]any{"template": map[string]any{"spec": tmpl}}}}
		if _, err := dyn.Resource(kubestore.VirtualMachines).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The controller, as its service account, as the Deployment runs it.
	ctl := s.ServiceAccount(t, "vminit-system", "vminit-controller")
	c, err := controller.New(controller.Config{REST: ctl.Config(), Namespaces: []string{"default"}, KubeVirt: true,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		LeaderElection: controller.LeaderElection{Namespace: "vminit-system", Identity: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(cctx) }()
	defer func() { stop(); <-done }()
	waitFor(t, "web-1 Valid and both VMs' Secrets written", func() bool {
		u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Get(ctx, "web-1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		valid := false
		for _, cd := range conds {
			m := cd.(map[string]any)
			valid = valid || m["type"] == "Valid" && m["status"] == "True"
		}
		_, e1 := admin.CoreV1().Secrets("default").Get(ctx, "named-vminit", metav1.GetOptions{})
		s2, e2 := admin.CoreV1().Secrets("default").Get(ctx, "own-vminit", metav1.GetOptions{})
		return valid && e1 == nil && e2 == nil && strings.Contains(string(s2.Data["userdata"]), "echo hi")
	})
	if l, err := admin.CoordinationV1().Leases("vminit-system").Get(ctx, "vminit-controller", metav1.GetOptions{}); err != nil || *l.Spec.HolderIdentity != "test" {
		t.Errorf("the Lease: %v %v", l, err)
	}
	// kubectl get shows the printer columns.
	out, err = s.Kubectl(t, "get", "instances", "-n", "default")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME HOSTNAME AGENT VALID AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "web-1 web-1 cloud-init True ") {
		t.Errorf("kubectl get instances: %v\n%s", err, out)
	}

	// The controller may not read Secrets beyond the managed namespace,
	// nor list them cluster-wide.
	cs := ctl.Clientset(t)
	for _, ns := range []string{"vminit-system", "elsewhere"} {
		if _, err := cs.CoreV1().Secrets(ns).Get(ctx, "private", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("controller reads Secret %s/private: %v", ns, err)
		}
	}
	if _, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("controller lists every Secret: %v", err)
	}
	denied(t, ctx, cs, "default", "update", "kubevirt.io", "virtualmachines") // only with vminit-controller-patch-vms
	denied(t, ctx, cs, "vminit-system", "update", "coordination.k8s.io", "leases", "another-lease")

	// The server reads Instances and KubeVirt objects, and no Secret.
	srv := s.ServiceAccount(t, "vminit-system", "vminit-server")
	st, err := kubestore.Open(ctx, kubestore.Config{REST: srv.Config(), Namespaces: []string{"default"}, KubeVirt: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := st.Snapshot().ByName("default/web-1"); !ok {
		t.Error("the server's store does not serve web-1")
	}
	scs := srv.Clientset(t)
	for _, ns := range []string{"default", "vminit-system"} {
		if _, err := scs.CoreV1().Secrets(ns).Get(ctx, "user-data", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the server reads Secrets in %s: %v", ns, err)
		}
	}
	denied(t, ctx, scs, "default", "update", "vminit.dev", "instances")
}

// denied checks that the account may not do verb on resource.
func denied(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, verb, group, resource string, name ...string) {
	t.Helper()
	ra := &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource}
	if len(name) > 0 {
		ra.Name = name[0]
	}
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.Allowed {
		t.Errorf("allowed to %s %s.%s in %s", verb, resource, group, ns)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
