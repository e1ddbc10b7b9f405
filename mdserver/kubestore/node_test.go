package kubestore_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/kubestore"
)

// nodeVMI is VMI ns/name on node, reporting ip on its pod network, naming
// instance ("" for none), controlled by its VirtualMachine when vm.
func nodeVMI(ns, name, node, instance, ip string, vm bool) *unstructured.Unstructured {
	u := kubetest.KubeVirtObject("VirtualMachineInstance", ns, name, instance, ip)
	u.SetLabels(map[string]string{kubestore.LabelNodeName: node})
	if vm {
		yes := true
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: name, UID: "0", Controller: &yes}})
	}
	return u
}

// TestNodeMode: a store in node mode for node-a serves the Instances its
// VMIs name (by annotation, or through their VirtualMachine), at their
// addresses, and holds nothing of node-b's; an Instance setting
// metadataServer options without addresses is served at its VMI's
// address with IMDSv2 required; a VMI that moves to node-b (a migration)
// stops being served, and one arriving from node-b is served. No
// controller runs, so nothing carries node-a's label: it counts the
// watches the store has open: one for the VMIs, one for the labelled
// Instances (none), and one per object it follows by name.
func TestNodeMode(t *testing.T) {
	s, dyn := start(t, true)
	ctx := ctxFor(t)
	createNS(t, s, "a", "b")
	res := func(r dynamic.NamespaceableResourceInterface, ns string) dynamic.ResourceInterface {
		return r.Namespace(ns)
	}
	inst := dyn.Resource(v1alpha1.GroupVersionResource)
	vmis := dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances)
	vms := dyn.Resource(v1alpha1.KubeVirtVirtualMachines)
	create := func(r dynamic.ResourceInterface, u *unstructured.Unstructured) *unstructured.Unstructured {
		t.Helper()
		out, err := r.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := u.Object["status"]; ok {
			// The status subresource: what virt-handler writes.
			out.Object["status"] = st
			if out, err = r.UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	if _, err := s.Clientset(t).CoreV1().ConfigMaps("a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "motd"},
		Data: map[string]string{"text": "hello"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Node A: a/web-1, named by its VMI and setting IMDSv2 without
	// addresses, reading a ConfigMap; b/web-2, named by its VM.
	create(res(inst, "a"), object(t, "a", "web-1", "hostname: one\nmetadataServer: {imdsv2: required}\nfiles:\n- path: /etc/motd\n  source: {configMapKeyRef: {name: motd, key: text}}"))
	create(res(vmis, "a"), nodeVMI("a", "vm-1", "node-a", "web-1", "127.0.0.21", false))
	create(res(inst, "b"), object(t, "b", "web-2", "hostname: two"))
	vm := kubetest.KubeVirtObject("VirtualMachine", "b", "vm-2", "web-2")
	create(res(vms, "b"), vm)
	create(res(vmis, "b"), nodeVMI("b", "vm-2", "node-a", "", "127.0.0.22", true))
	// Node B: a/web-3, and an Instance nobody names.
	create(res(inst, "a"), object(t, "a", "web-3", "hostname: three"))
	create(res(vmis, "a"), nodeVMI("a", "vm-3", "node-b", "web-3", "127.0.0.23", false))
	create(res(inst, "a"), object(t, "a", "loose", "hostname: loose"))

	cfg := s.Config()
	counter := kubetest.Count(cfg)
	st, err := kubestore.Open(ctx, kubestore.Config{REST: cfg, KubeVirt: true, Node: "node-a", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	held := func() []string {
		return st.Snapshot().Names()
	}
	if got := strings.Join(held(), " "); got != "a/web-1 b/web-2" {
		t.Fatalf("node-a's store holds %q, want a/web-1 b/web-2 (never node-b's a/web-3, nor a/loose)", got)
	}
	if addrOf(st.Snapshot(), "127.0.0.21") != "a/web-1" || addrOf(st.Snapshot(), "127.0.0.22") != "b/web-2" || addrOf(st.Snapshot(), "127.0.0.23") != "" {
		t.Errorf("served: .21 %q, .22 %q, .23 %q", addrOf(st.Snapshot(), "127.0.0.21"), addrOf(st.Snapshot(), "127.0.0.22"), addrOf(st.Snapshot(), "127.0.0.23"))
	}
	if i, v, c := st.Following(); i != 2 || v != 1 || c != 1 {
		t.Errorf("following %d Instances, %d VMs, %d ConfigMaps; want 2, 1, 1", i, v, c)
	}
	eventually(t, "6 watches open (the VMIs, the labelled Instances, 2 Instances, a VM, a ConfigMap)", func() bool { return counter.Open() == 6 })
	// The API server's own count: its watches of one object by name are
	// scope="resource" (docs/kubernetes.md, "Node mode").
	m, err := s.Clientset(t).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var watches []string
	for _, l := range strings.Split(string(m), "\n") {
		if strings.HasPrefix(l, "apiserver_longrunning_requests{") && strings.Contains(l, `verb="WATCH"`) &&
			(strings.Contains(l, `group="vminit.dev"`) || strings.Contains(l, `group="kubevirt.io"`)) && !strings.HasSuffix(l, " 0") {
			watches = append(watches, l)
		}
	}
	t.Logf("the API server's watches of vminit.dev and kubevirt.io:\n%s", strings.Join(watches, "\n"))
	if got := strings.Join(watches, "\n"); !strings.Contains(got, `resource="instances",scope="resource",subresource="",verb="WATCH",version="v1alpha1"} 2`) ||
		!strings.Contains(got, `resource="instances",scope="cluster",subresource="",verb="WATCH",version="v1alpha1"} 1`) ||
		!strings.Contains(got, `resource="virtualmachineinstances",scope="cluster",subresource="",verb="WATCH",version="v1"} 1`) {
		t.Errorf("the API server does not count 2 single-Instance watches, 1 cluster-wide (labelled) Instance watch and 1 cluster-wide VMI watch")
	}

	// IMDSv2 required, without addresses: served at the VMI's address,
	// token-less refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := mdserver.NewServer(mdserver.NewHandler(st, mdserver.Options{AllowLoopbackInstances: true}))
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.21")}}).DialContext}, Timeout: 10 * time.Second}
	do := func(method, path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+path, nil)
		if method == http.MethodPut {
			req.Header.Set(mdserver.HeaderTokenTTL, "60")
		}
		if token != "" {
			req.Header.Set(mdserver.HeaderToken, token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := do(http.MethodGet, "/latest/meta-data/hostname", ""); code != http.StatusUnauthorized {
		t.Errorf("IMDSv1 GET of an instance with imdsv2: required: %d, want 401", code)
	}
	code, tok := do(http.MethodPut, "/latest/api/token", "")
	if code != http.StatusOK {
		t.Fatalf("token PUT: %d", code)
	}
	if code, body := do(http.MethodGet, "/latest/meta-data/hostname", tok); code != http.StatusOK || body != "one" {
		t.Errorf("IMDSv2 GET: %d %q", code, body)
	}

	// Migrations: vm-1 moves to node-b, vm-3 arrives from it.
	relabel := func(ns, name, node string) {
		t.Helper()
		u, err := vmis.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.SetLabels(map[string]string{kubestore.LabelNodeName: node})
		if _, err := vmis.Namespace(ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel("a", "vm-1", "node-b")
	relabel("a", "vm-3", "node-a")
	eventually(t, "vm-1 gone, vm-3 served", func() bool {
		return strings.Join(held(), " ") == "a/web-3 b/web-2" && addrOf(st.Snapshot(), "127.0.0.23") == "a/web-3"
	})
	if addrOf(st.Snapshot(), "127.0.0.21") != "" {
		t.Error("127.0.0.21 still served after its VMI left the node")
	}
	if i, v, c := st.Following(); i != 2 || v != 1 || c != 0 {
		t.Errorf("after the migrations, following %d Instances, %d VMs, %d ConfigMaps; want 2, 1, 0", i, v, c)
	}
	eventually(t, "5 watches open", func() bool { return counter.Open() == 5 })

	// Writes are refused: a node agent follows what its VMIs name.
	if _, err := st.Put(ctx, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: x}\nspec: {}\n")); err == nil {
		t.Error("Put in node mode succeeded")
	}
}

// TestNodeModeFollowBound: without the controller's labels a node agent
// follows by name at most Config.MaxFollow objects; the others are
// refused, logged once each with the reason, and counted; an Instance
// the controller then labels for the node is served through the labelled
// watch, no follower needed. This is what bounds an agent whose node's
// VMIs a tenant fakes (a kubevirt.io/nodeName label on VMIs that never
// ran there).
func TestNodeModeFollowBound(t *testing.T) {
	s, dyn := start(t, true)
	ctx := ctxFor(t)
	inst := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default")
	vmis := dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances).Namespace("default")
	for i := range 3 {
		name := fmt.Sprintf("web-%d", i)
		if _, err := inst.Create(ctx, object(t, "default", name, "hostname: "+name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		v := nodeVMI("default", "vm-"+name, "node-a", name, fmt.Sprintf("127.0.0.%d", 31+i), false)
		out, err := vmis.Create(ctx, v, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out.Object["status"] = v.Object["status"]
		if _, err := vmis.UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	logs := &testtools.SyncBuffer{}
	cfg := s.Config()
	counter := kubetest.Count(cfg)
	st, err := kubestore.Open(ctx, kubestore.Config{REST: cfg, KubeVirt: true, Node: "node-a", MaxFollow: 2,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := strings.Join(st.Snapshot().Names(), " "); got != "default/web-0 default/web-1" {
		t.Errorf("held %q, want the first two (MaxFollow 2)", got)
	}
	if i, v, c := st.Following(); i != 2 || v != 0 || c != 0 || st.FollowRefused() != 1 {
		t.Errorf("following %d Instances, %d VMs, %d ConfigMaps, %d refused; want 2, 0, 0, 1", i, v, c, st.FollowRefused())
	}
	if n := strings.Count(logs.String(), "refuses to follow"); n != 1 || !strings.Contains(logs.String(), "object=default/web-2") ||
		!strings.Contains(logs.String(), "not covered by the node's label node.vminit.dev/node-a") || !strings.Contains(logs.String(), "--node-max-follow") {
		t.Errorf("logged %d refusals, want one naming default/web-2, the label and the flag:\n%s", n, logs.String())
	}
	eventually(t, "4 watches open (the VMIs, the labelled Instances, 2 Instances)", func() bool { return counter.Open() == 4 })
	metrics := mdserver.NewMetrics()
	mdserver.NewHandler(st, mdserver.Options{Metrics: metrics})
	var m strings.Builder
	metrics.WriteTo(&m)
	if !strings.Contains(m.String(), "\nvminit_node_follow_refused_total 1\n") || !strings.Contains(m.String(), `vminit_node_followed{kind="instance"} 2`) {
		t.Errorf("the server's metrics do not count 2 Instances followed and 1 refused:\n%s", m.String())
	}

	// The controller's label: web-2 is held through the labelled watch.
	u, err := inst.Get(ctx, "web-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{v1alpha1.NodeLabel("node-a"): ""})
	if _, err := inst.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web-2 served once labelled", func() bool { return addrOf(st.Snapshot(), "127.0.0.33") == "default/web-2" })
	if i, _, _ := st.Following(); i != 2 || st.FollowRefused() != 1 {
		t.Errorf("following %d Instances, %d refused; want 2, 1", i, st.FollowRefused())
	}
	if strings.Count(logs.String(), "refuses to follow") != 1 {
		t.Errorf("a refusal logged again:\n%s", logs.String())
	}
}

// TestListTimeout: serve's first-list limit fits node mode: at least
// NodeListTimeout, and more when the client's rate limit is too slow
// for the followers --node-max-follow allows; a server without --node
// keeps its own.
func TestListTimeout(t *testing.T) {
	slow := &rest.Config{QPS: 1}
	for _, c := range []struct {
		cfg  kubestore.Config
		want time.Duration
	}{
		{kubestore.Config{REST: slow}, time.Minute},
		{kubestore.Config{REST: &rest.Config{QPS: 50}, Node: "n"}, kubestore.NodeListTimeout},
		{kubestore.Config{REST: slow, Node: "n", MaxFollow: 1000}, 2 * 2 * 1002 * time.Second},
	} {
		if got := kubestore.ListTimeout(c.cfg, time.Minute); got != c.want {
			t.Errorf("ListTimeout(node %q, QPS %g, MaxFollow %d) = %v, want %v", c.cfg.Node, c.cfg.REST.QPS, c.cfg.MaxFollow, got, c.want)
		}
	}
}
