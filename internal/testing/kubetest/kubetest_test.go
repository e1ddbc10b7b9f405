package kubetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vminit/vminit/internal/testing/kubetest"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// rssKiB is a process's resident set size.
func rssKiB(t testing.TB, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kib int
			fmt.Sscan(v, &kib)
			return kib
		}
	}
	return 0
}

// The client libraries in go.mod are the release of the server the tests
// run (v1.N.P ↔ v0.N.P), as client-go supports best.
func TestClientMatchesServer(t *testing.T) {
	gomod, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := "v0." + strings.TrimPrefix(kubetest.Version, "v1.")
	for _, m := range []string{"k8s.io/client-go", "k8s.io/api", "k8s.io/apimachinery"} {
		re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(m) + ` (\S+)`)
		got := re.FindSubmatch(gomod)
		if got == nil || string(got[1]) != want {
			t.Errorf("go.mod requires %s %s; kubetest.Version %s wants %s", m, got, kubetest.Version, want)
		}
	}
}

func TestObjects(t *testing.T) {
	start := time.Now()
	s := kubetest.Start(t)
	t.Logf("etcd and kube-apiserver ready in %v; kube-apiserver RSS %d MiB", time.Since(start).Round(time.Millisecond), rssKiB(t, s.PID())/1024)
	ctx := ctxFor(t)
	cs := s.Clientset(t)

	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != kubetest.Version {
		t.Errorf("server version %s, want %s", v.GitVersion, kubetest.Version)
	}

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vms"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"hostname": "web-1"}}
	if _, err := cs.CoreV1().ConfigMaps("vms").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ud"}, StringData: map[string]string{"userdata": "#cloud-config\n"}}
	if _, err := cs.CoreV1().Secrets("vms").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().Secrets("vms").Get(ctx, "ud", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data["userdata"]) != "#cloud-config\n" { // stringData comes back as data
		t.Errorf("secret data %q", got.Data)
	}
	// Admission runs: a namespace that does not exist refuses objects.
	_, err = cs.CoreV1().ConfigMaps("nope").Create(ctx, cm, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("create in a missing namespace: %v, want NotFound", err)
	}

	// The kubeconfig file reaches the same server as the same user.
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != s.URL || cfg.BearerToken != s.Token {
		t.Errorf("kubeconfig: host %s token %q, want %s and the admin token", cfg.Host, cfg.BearerToken, s.URL)
	}
	raw, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if ns := raw.Contexts[raw.CurrentContext].Namespace; ns != "default" {
		t.Errorf("kubeconfig namespace %q", ns)
	}
	ssr, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Error(err)
	} else if ssr.Status.UserInfo.Username != s.User {
		t.Errorf("authenticated as %q, want %q", ssr.Status.UserInfo.Username, s.User)
	}
	t.Logf("kube-apiserver RSS after the test's objects: %d MiB", rssKiB(t, s.PID())/1024)
}

// A CRD in the shape issue tests need: structural schema with validation,
// a status subresource, printer columns.
const instanceCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.vminit.dev
spec:
  group: test.vminit.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Hostname, type: string, jsonPath: .spec.hostname}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [hostname]
            properties:
              hostname: {type: string, maxLength: 63, pattern: '^[a-z0-9-]+$'}
              replicas: {type: integer, minimum: 0}
          status:
            type: object
            properties:
              observedGeneration: {type: integer}
              valid: {type: boolean}
---
# an empty document, as multi-document files often have
`

var widgets = schema.GroupVersionResource{Group: "test.vminit.dev", Version: "v1alpha1", Resource: "widgets"}

func widget(name, hostname string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.vminit.dev/v1alpha1", "kind": "Widget",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"hostname": hostname},
	}}
}

func TestCRD(t *testing.T) {
	s := kubetest.Start(t)
	ctx := ctxFor(t)
	if names := s.CreateCRDs(t, []byte(instanceCRD)); len(names) != 1 || names[0] != "widgets.test.vminit.dev" {
		t.Fatalf("CreateCRDs = %v", names)
	}
	res := s.Dynamic(t).Resource(widgets).Namespace("default")

	// A watch opened before the objects exist sees them come.
	w, err := res.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	created, err := res.Create(ctx, widget("w1", "web-1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The structural schema is enforced, with the field path in the error.
	_, err = res.Create(ctx, widget("w2", "Not_A_Hostname"), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.hostname") {
		t.Errorf("invalid widget: %v, want Invalid naming spec.hostname", err)
	}
	// The status subresource: status written through /status, and
	// ignored on the main resource.
	st := created.DeepCopy()
	unstructured.SetNestedField(st.Object, true, "status", "valid")
	unstructured.SetNestedField(st.Object, created.GetGeneration(), "status", "observedGeneration")
	if _, err := res.UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := res.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedField(cur.Object, "web-2", "spec", "hostname")
	unstructured.SetNestedField(cur.Object, false, "status", "valid")
	upd, err := res.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if valid, _, _ := unstructured.NestedBool(upd.Object, "status", "valid"); !valid {
		t.Error("an update of the main resource changed status")
	}
	if upd.GetGeneration() != 2 {
		t.Errorf("generation %d after a spec change, want 2", upd.GetGeneration())
	}

	want := []watch.EventType{watch.Added, watch.Modified, watch.Modified}
	for i, typ := range want {
		select {
		case ev := <-w.ResultChan():
			u, _ := ev.Object.(*unstructured.Unstructured)
			if ev.Type != typ || u == nil || u.GetName() != "w1" {
				t.Fatalf("watch event %d: %s %v, want %s of w1", i, ev.Type, ev.Object, typ)
			}
		case <-ctx.Done():
			t.Fatalf("watch event %d: %v", i, ctx.Err())
		}
	}
}

func TestServiceAccountRBAC(t *testing.T) {
	s := kubetest.Start(t)
	ctx := ctxFor(t)
	admin := s.Clientset(t)
	sa := s.ServiceAccount(t, "vminit-system", "controller")
	if sa.User != "system:serviceaccount:vminit-system:controller" {
		t.Errorf("user %q", sa.User)
	}
	// The account may read ConfigMaps in its namespace and nothing else.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read-configmaps"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := admin.RbacV1().Roles("vminit-system").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "controller"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "read-configmaps"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "controller", Namespace: "vminit-system"}}}
	if _, err := admin.RbacV1().RoleBindings("vminit-system").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []struct{ kind, name string }{{"cm", "allowed"}, {"secret", "hidden"}} {
		var err error
		if obj.kind == "cm" {
			_, err = admin.CoreV1().ConfigMaps("vminit-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: obj.name}}, metav1.CreateOptions{})
		} else {
			_, err = admin.CoreV1().Secrets("vminit-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: obj.name}}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	cs := sa.Clientset(t)
	if _, err := cs.CoreV1().ConfigMaps("vminit-system").Get(ctx, "allowed", metav1.GetOptions{}); err != nil {
		t.Errorf("get the allowed ConfigMap: %v", err)
	}
	if _, err := cs.CoreV1().Secrets("vminit-system").Get(ctx, "hidden", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get a Secret: %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list ConfigMaps in another namespace: %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("vminit-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create a ConfigMap: %v, want Forbidden", err)
	}
	// Asking twice reuses the account and hands out a fresh token.
	again := s.ServiceAccount(t, "vminit-system", "controller")
	if again.Token == "" || again.User != sa.User {
		t.Errorf("second ServiceAccount: %+v", again)
	}
}

// The API server stops and comes back on the same etcd: objects survive,
// the clients and tokens handed out before keep working, and an informer
// (list and watch, as controllers use) running across the restart catches
// up with every update.
func TestRestart(t *testing.T) {
	s := kubetest.Start(t)
	ctx := ctxFor(t)
	cs := s.Clientset(t)
	sa := s.ServiceAccount(t, "default", "reader")

	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	cms := factory.Core().V1().ConfigMaps()
	seen := make(chan string, 100)
	cms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen <- obj.(*corev1.ConfigMap).Data["n"] },
		UpdateFunc: func(_, obj any) { seen <- obj.(*corev1.ConfigMap).Data["n"] },
	})
	stop := make(chan struct{})
	factory.Start(stop)
	defer factory.Shutdown() // after close(stop), which it waits for
	defer close(stop)
	factory.WaitForCacheSync(stop)

	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitSeen := func(want string) {
		t.Helper()
		for {
			select {
			case n := <-seen:
				if n == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("the informer never saw n=%s", want)
			}
		}
	}
	waitSeen("0")

	pid := s.PID()
	start := time.Now()
	s.Stop(t) // while the informer's watch is open
	stopped := time.Since(start)
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "c", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server answered while stopped")
	}
	start = time.Now()
	s.Restart(t)
	t.Logf("stopped in %v (an informer's watch open), restarted in %v", stopped.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if s.PID() == pid {
		t.Error("same process after Restart")
	}

	for i := 1; i <= 3; i++ {
		cm.Data["n"] = fmt.Sprint(i)
		if cm, err = cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitSeen("3")
	if got, err := cms.Lister().ConfigMaps("default").Get("c"); err != nil || got.Data["n"] != "3" || got.ResourceVersion != cm.ResourceVersion {
		t.Errorf("informer cache after the restart: %v %v, want n=3 at resourceVersion %s", got, err, cm.ResourceVersion)
	}
	// A service-account token issued before the restart is still valid.
	if _, err := sa.Clientset(t).CoreV1().ConfigMaps("default").Get(ctx, "c", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("service account after restart: %v, want Forbidden (authenticated, not authorized)", err)
	}
}

func TestKubectl(t *testing.T) {
	s := kubetest.Start(t)
	dir := t.TempDir()
	files := map[string]string{
		"kustomization.yaml": "namespace: app\nresources: [namespace.yaml, config.yaml]\ncommonLabels: {app.kubernetes.io/name: vminit}\n",
		"namespace.yaml":     "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n",
		"config.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {listen: \"127.0.0.1:8080\"}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := s.Kubectl(t, "apply", "-k", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "configmap/settings created") {
		t.Errorf("kubectl apply -k: %s", out)
	}
	out, err = s.Kubectl(t, "get", "configmap", "settings", "-n", "app", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal([]byte(out), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["listen"] != "127.0.0.1:8080" || cm.Labels["app.kubernetes.io/name"] != "vminit" {
		t.Errorf("applied ConfigMap: %+v", cm)
	}
	// A second apply changes nothing.
	if out, err = s.Kubectl(t, "apply", "-k", dir); err != nil || !strings.Contains(out, "configmap/settings unchanged") {
		t.Errorf("second kubectl apply -k: %v\n%s", err, out)
	}
	// As a service account without rights, kubectl reports the denial.
	sa := s.ServiceAccount(t, "app", "nobody")
	if _, err := sa.Kubectl(t, "get", "configmaps"); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("kubectl as an account without rights: %v", err)
	}
	// kubectl can read the CRDs CreateCRDs made as soon as it returns.
	s.CreateCRDs(t, []byte(instanceCRD))
	if _, err := s.Kubectl(t, "get", "widgets"); err != nil {
		t.Errorf("kubectl get widgets: %v", err)
	}
}

// BenchmarkStart measures Start (etcd and kube-apiserver, until ready) and
// the API server's resident memory once ready:
//
//	go test -run '^$' -bench Start -benchtime 5x ./internal/testing/kubetest
func BenchmarkStart(b *testing.B) {
	var rss int
	for i := 0; i < b.N; i++ {
		s := kubetest.Start(b)
		b.StopTimer()
		rss += rssKiB(b, s.PID())
		s.Stop(b)
		s.Etcd.Kill()
		b.StartTimer()
	}
	b.ReportMetric(float64(rss)/float64(b.N)/1024, "MiB-RSS")
}
