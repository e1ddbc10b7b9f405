package deploy

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vminit/vminit/cmd/internal/controller"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/kubestore"
	"github.com/vminit/vminit/seed"
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
	out, err = s.Kubectl(t, "apply", "-k", "kubernetes")
	admin := s.Clientset(t)
	// kubectl's client-side apply says an admission policy is
	// "configured" each time, changing nothing: its generation tells.
	const policyConfigured = "validatingadmissionpolicy.admissionregistration.k8s.io/vminit-controller-secrets configured"
	if p, perr := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "vminit-controller-secrets", metav1.GetOptions{}); perr != nil || p.Generation != 1 {
		t.Errorf("a second apply changed the admission policy: %v", perr)
	}
	if err != nil || strings.Contains(strings.ReplaceAll(out, policyConfigured, ""), "configured") {
		t.Errorf("a second apply changed something: %v\n%s", err, out)
	}

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
	if _, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-ops"},
		StringData: map[string]string{"user-data": "#cloud-config\nruncmd: [[echo, first]]\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := s.Dynamic(t)
	db := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance",
		"metadata": map[string]any{"name": "db"}, "spec": map[string]any{"hostname": "db",
			"cloudInit": map[string]any{"userDataFrom": map[string]any{"secretKeyRef": map[string]any{"name": "db-ops", "key": "user-data"}}}}}}
	if _, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Create(ctx, db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
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
		if _, err := dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
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
	if err != nil || len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME HOSTNAME AGENT VALID FIRST-BOOT AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "web-1 web-1 cloud-init True ") {
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

	// The server reads Instances and KubeVirt objects, and the Secrets of
	// the managed namespace only (those an Instance refers to).
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
	for _, ns := range []string{"vminit-system", "elsewhere"} {
		if _, err := scs.CoreV1().Secrets(ns).Get(ctx, "user-data", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the server reads Secrets in %s: %v", ns, err)
		}
	}
	denied(t, ctx, scs, "default", "update", "vminit.dev", "instances")
	denied(t, ctx, scs, "default", "list", "", "secrets")
	if _, err := scs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the server lists the Secrets of a managed namespace: %v", err)
	}
	checkSecretServed(t, ctx, st, admin)
	checkFirstBootWrites(t, ctx, st, dyn, admin)

	checkRBAC(t, s)
	checkDeployments(t, ctx, admin)
	checkSecretWritesAdmitted(t, ctx, admin, cs)
}

// checkSecretServed: the server, which may get a Secret by name but not
// list or watch them, serves an Instance whose spec refers to one, and
// serves a change of the Secret: the controller, which watches Secrets,
// records its new resourceVersion in the Instance's status.secrets.
func checkSecretServed(t *testing.T, ctx context.Context, st *kubestore.Store, admin kubernetes.Interface) {
	t.Helper()
	userData := func() string {
		rec, ok := st.Snapshot().ByName("default/db")
		if !ok {
			return ""
		}
		ud, err := seed.UserData(rec.Instance())
		if err != nil {
			t.Fatal(err)
		}
		return string(ud)
	}
	waitFor(t, "db served with its Secret", func() bool { return strings.Contains(userData(), "first") })
	sec, err := admin.CoreV1().Secrets("default").Get(ctx, "db-ops", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data["user-data"] = []byte("#cloud-config\nruncmd: [[echo, rotated]]\n")
	if _, err := admin.CoreV1().Secrets("default").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "db served with its rotated Secret", func() bool { return strings.Contains(userData(), "rotated") })
}

// checkFirstBootWrites: the server, as its service account, writes a
// failed first boot to an Instance's status and records its Event.
func checkFirstBootWrites(t *testing.T, ctx context.Context, st *kubestore.Store, dyn dynamic.Interface, admin kubernetes.Interface) {
	t.Helper()
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	failed := firstboot.Status{Name: "default/web-1", UID: string(u.GetUID()), Agent: "cloud-init", State: firstboot.Failed,
		FirstFetch: time.Unix(1e9, 0), LastEvent: time.Unix(1e9+60, 0), Finished: time.Unix(1e9+60, 0),
		Errors: []firstboot.Failure{{Stage: "modules-final", Module: "config-scripts-user", Message: "exit 1"}}}
	waitFor(t, "the server's first-boot write", func() bool {
		if err := st.WriteBoot(ctx, []firstboot.Status{failed}); err != nil {
			t.Fatal(err)
		}
		u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Get(ctx, "web-1", metav1.GetOptions{})
		state, _, _ := unstructured.NestedString(u.Object, "status", "firstBoot", "state")
		return err == nil && state == "failed"
	})
	ev, err := admin.CoreV1().Events("default").Get(ctx, kubestore.FailureEventName(u.GetUID()), metav1.GetOptions{})
	if err != nil || ev.Reason != v1alpha1.ReasonFirstBootFailed {
		t.Errorf("the FirstBootFailed Event: %v %v", ev, err)
	}
}

// checkRBAC asks the API server, as each service account (kubectl auth
// can-i --as), what it may do with Secrets: the controller reads them in
// the namespaces it manages and writes there, never patches or deletes
// them in bulk, nor touches another namespace's, and patches Instances
// (its node labels) but never updates one whole; the server reads those
// of the managed namespaces (an Instance's references) and writes none,
// and reads none elsewhere, not even its token key, which the kubelet
// mounts. Both read the managed namespaces' ConfigMaps, and write none.
func checkRBAC(t *testing.T, s *kubetest.Server) {
	t.Helper()
	const ctl, srv = "system:serviceaccount:vminit-system:vminit-controller", "system:serviceaccount:vminit-system:vminit-server"
	for _, c := range []struct {
		as, verb, resource, ns string
		want                   string
	}{
		{ctl, "get", "secrets", "default", "yes"},
		{ctl, "watch", "secrets", "default", "yes"},
		{ctl, "create", "secrets", "default", "yes"},
		{ctl, "patch", "secrets", "default", "no"},
		{ctl, "deletecollection", "secrets", "default", "no"},
		{ctl, "get", "secrets", "vminit-system", "no"},
		{ctl, "get", "secrets", "elsewhere", "no"},
		{ctl, "list", "secrets", "", "no"},                       // every namespace
		{ctl, "patch", "instances.vminit.dev", "default", "yes"}, // its node labels, for the node agents
		{ctl, "update", "instances.vminit.dev", "default", "no"},
		{srv, "get", "secrets", "vminit-system", "no"},
		{srv, "get", "secrets", "default", "yes"},
		{srv, "list", "secrets", "default", "no"}, // every Secret's data: only those Instances name, by get
		{srv, "watch", "secrets", "default", "no"},
		{srv, "create", "secrets", "default", "no"},
		{srv, "get", "secrets", "elsewhere", "no"},
		{srv, "list", "secrets", "", "no"}, // every namespace
		{ctl, "watch", "configmaps", "default", "yes"},
		{ctl, "update", "configmaps", "default", "no"},
		{ctl, "get", "configmaps", "elsewhere", "no"},
		{srv, "watch", "configmaps", "default", "yes"},
		{srv, "update", "configmaps", "default", "no"},
		{srv, "watch", "instances.vminit.dev", "default", "yes"},
		{srv, "patch", "instances.vminit.dev", "default", "no"},
		{srv, "patch", "instances.vminit.dev/status", "default", "yes"},
		{srv, "update", "instances.vminit.dev/status", "default", "no"},
		{srv, "create", "events", "default", "yes"},
		{srv, "create", "events", "vminit-system", "no"},
	} {
		args := []string{"auth", "can-i", c.verb, c.resource, "--as", c.as}
		if res, sub, ok := strings.Cut(c.resource, "/"); ok {
			args = []string{"auth", "can-i", c.verb, res, "--subresource", sub, "--as", c.as}
		}
		if c.ns == "" {
			args = append(args, "-A")
		} else {
			args = append(args, "-n", c.ns)
		}
		out, _ := s.Kubectl(t, args...) // exit 1 for "no"
		if got := strings.TrimSpace(out); got != c.want {
			t.Errorf("kubectl %s: %q, want %q", strings.Join(args, " "), got, c.want)
		}
	}
}

// checkSecretWritesAdmitted: what RBAC cannot narrow, the admission policy
// vminit-controller-secrets does. As the controller (dry runs, which
// admission judges like any write), a Secret that is not a <vm>-vminit
// labelled as vminit's is not created, and a user's is neither updated
// nor deleted; its own are.
func checkSecretWritesAdmitted(t *testing.T, ctx context.Context, admin, ctl kubernetes.Interface) {
	t.Helper()
	dry := []string{metav1.DryRunAll}
	ours := map[string]string{controller.LabelManagedBy: "vminit"}
	create := func(name string, labels map[string]string) error {
		_, err := ctl.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}},
			metav1.CreateOptions{DryRun: dry})
		return err
	}
	refused := func(err error) bool { return err != nil && strings.Contains(err.Error(), "the vminit controller") }
	// The policy takes effect once the API server has loaded it.
	waitFor(t, "the admission policy refuses the controller a Secret of its choosing", func() bool { return refused(create("not-mine", nil)) })
	if err := create("web-1-vminit", nil); !refused(err) {
		t.Errorf("a <vm>-vminit Secret without vminit's label: %v", err)
	}
	if err := create("web-1-vminit", ours); err != nil {
		t.Errorf("its own Secret: %v", err)
	}
	user, err := admin.CoreV1().Secrets("default").Get(ctx, "user-data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user.Data["userdata"] = []byte("#!/bin/sh\necho owned\n")
	user.Labels = ours // the label alone does not make it the controller's
	if _, err := ctl.CoreV1().Secrets("default").Update(ctx, user, metav1.UpdateOptions{DryRun: dry}); !refused(err) {
		t.Errorf("the controller updates a user's Secret: %v", err)
	}
	if err := ctl.CoreV1().Secrets("default").Delete(ctx, "user-data", metav1.DeleteOptions{DryRun: dry}); !refused(err) {
		t.Errorf("the controller deletes a user's Secret: %v", err)
	}
	own, err := admin.CoreV1().Secrets("default").Get(ctx, "own-vminit", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.CoreV1().Secrets("default").Update(ctx, own, metav1.UpdateOptions{DryRun: dry}); err != nil {
		t.Errorf("the controller updates its own Secret: %v", err)
	}
	if err := ctl.CoreV1().Secrets("default").Delete(ctx, "own-vminit", metav1.DeleteOptions{DryRun: dry}); err != nil {
		t.Errorf("the controller deletes its own Secret: %v", err)
	}
}

// checkDeployments reads the Deployments back from the API server: the
// metadata server's replicas share one IMDSv2 token key, from a Secret
// they cannot start without; the controller's metrics, which have no
// authentication, listen on loopback, and its probes reach a listener
// that serves health alone.
func checkDeployments(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	get := func(name string) *corev1.PodSpec {
		d, err := admin.AppsV1().Deployments("vminit-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &d.Spec.Template.Spec
	}
	server := get("vminit-server")
	c := server.Containers[0]
	mounted := ""
	for _, v := range server.Volumes {
		if s := v.Secret; s != nil && s.SecretName == "vminit-server-token-key" && (s.Optional == nil || !*s.Optional) {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					mounted = m.MountPath
				}
			}
		}
	}
	if mounted == "" || !slices.Contains(c.Args, "--token-key-file="+mounted+"/token-key") {
		t.Errorf("vminit-server: the token key Secret mounted at %q (required), args %v", mounted, c.Args)
	}

	ctl := get("vminit-controller").Containers[0]
	health := ""
	for _, a := range ctl.Args {
		if addr, ok := strings.CutPrefix(a, "--metrics-listen="); ok && !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Errorf("vminit-controller: metrics on %s, beyond loopback", addr)
		}
		if addr, ok := strings.CutPrefix(a, "--health-listen="); ok {
			_, health, _ = strings.Cut(addr, ":")
		}
	}
	if !slices.Contains(ctl.Args, "--metrics-listen=127.0.0.1:8080") {
		t.Errorf("vminit-controller: no --metrics-listen on loopback: %v", ctl.Args)
	}
	for _, p := range []*corev1.Probe{ctl.ReadinessProbe, ctl.LivenessProbe} {
		port := ""
		for _, cp := range ctl.Ports {
			if p != nil && p.HTTPGet != nil && cp.Name == p.HTTPGet.Port.String() {
				port = strconv.Itoa(int(cp.ContainerPort))
			}
		}
		if health == "" || port != health {
			t.Errorf("vminit-controller: a probe on port %q, --health-listen's is %q", port, health)
		}
	}
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
