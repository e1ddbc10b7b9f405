// Package kubebench holds the fixtures of the Kubernetes benchmarks: many
// Instance objects, and KubeVirt VMIs spread over simulated nodes, created
// through a real API server, and the numbers a benchmark reports about
// processes (resident memory, CPU) and about the API server (its
// watches and requests, from its /metrics). BenchmarkNodeAgents, in this
// package's tests, sets a central `vminit serve --kubernetes` against a
// node agent per node.
package kubebench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/kube/api/v1alpha1"
)

// Count is how many Instances the benchmarks create: 10,000, or
// $VMINIT_BENCH_INSTANCES.
func Count() int {
	n := 10000
	if v := os.Getenv("VMINIT_BENCH_INSTANCES"); v != "" {
		fmt.Sscan(v, &n)
	}
	return n
}

// Instance is the i-th benchmark Instance: a typical small spec (a user
// with a key, a file, a command, a static address), each on an address of
// its own in 10.0.0.0/8.
func Instance(ns string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance",
		"metadata": map[string]any{"name": fmt.Sprintf("vm-%05d", i), "namespace": ns},
		"spec": map[string]any{
			"users": []any{map[string]any{"name": "ops", "sudo": "ALL=(ALL) NOPASSWD:ALL",
				"sshAuthorizedKeys": []any{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@example"}}},
			"files":          []any{map[string]any{"path": "/etc/motd", "content": fmt.Sprintf("vm %d\n", i)}},
			"commands":       []any{"systemctl enable --now app"},
			"metadataServer": map[string]any{"addresses": []any{Address(i)}},
		}}}
}

// Address is the i-th Instance's address.
func Address(i int) string { return fmt.Sprintf("10.%d.%d.%d", i/62500, i/250%250, i%250+1) }

// Create creates n Instances in ns with workers parallel clients and
// returns how long it took: the API server's own cost of the objects, what
// a controller reconciling them is compared with.
func Create(tb testing.TB, res dynamic.NamespaceableResourceInterface, ns string, n, workers int) time.Duration {
	tb.Helper()
	return CreateEach(tb, res, ns, n, workers, Instance)
}

// CreateEach is Create with the i-th object made by obj (Instance,
// VMInstance).
func CreateEach(tb testing.TB, res dynamic.NamespaceableResourceInterface, ns string, n, workers int, obj func(ns string, i int) *unstructured.Unstructured) time.Duration {
	tb.Helper()
	return parallel(tb, n, workers, func(i int) error {
		_, err := res.Namespace(ns).Create(context.Background(), obj(ns, i), metav1.CreateOptions{})
		return err
	})
}

// parallel runs do(i) for every i < n on workers goroutines, stops at the
// first error (tb.Fatal) and returns how long it took.
func parallel(tb testing.TB, n, workers int, do func(i int) error) time.Duration {
	tb.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return d
}

// RSS returns a process's resident set size and its peak (VmHWM), in MiB.
func RSS(tb testing.TB, pid int) (cur, peak float64) {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		var kib float64
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			fmt.Sscan(v, &kib)
			cur = kib / 1024
		}
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			fmt.Sscan(v, &kib)
			peak = kib / 1024
		}
	}
	return cur, peak
}

// CPU returns the CPU time a process has used (user and system), from
// /proc/PID/stat.
func CPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// Resource is the Instance resource of a dynamic client.
func Resource(dyn dynamic.Interface) dynamic.NamespaceableResourceInterface {
	return dyn.Resource(v1alpha1.GroupVersionResource)
}

// VMInstance is the i-th Instance of a KubeVirt fleet: Instance(ns, i)
// without addresses of its own, since the VMI that names it
// (NodeVMI) identifies it by the VMI's address.
func VMInstance(ns string, i int) *unstructured.Unstructured {
	u := Instance(ns, i)
	unstructured.RemoveNestedField(u.Object, "spec", "metadataServer")
	return u
}

// NodeName is the name of simulated node k.
func NodeName(k int) string { return fmt.Sprintf("node-%02d", k) }

// NodeOf is the node VMI i runs on, of nodes: the VMIs are dealt out in
// turn, so each node has n/nodes of them.
func NodeOf(i, nodes int) int { return i % nodes }

// VMIAddress is the pod-network address VMI i reports: a loopback
// address of its own (127.1.0.1 onwards), so that a benchmark on one
// machine can ask a server as that VM (the server runs with
// --allow-loopback-instances).
func VMIAddress(i int) netip.Addr {
	i++
	return netip.AddrFrom4([4]byte{127, byte(1 + i/65536), byte(i / 256 % 256), byte(i % 256)})
}

// NodeVMI is the i-th VirtualMachineInstance as KubeVirt keeps one:
// labelled kubevirt.io/nodeName with its node (of nodes), naming
// Instance i (vminit.dev/instance), on the pod network with masquerade;
// its status (set with UpdateStatus, as virt-handler does) reports
// VMIAddress(i) on that network.
func NodeVMI(ns string, i, nodes int) *unstructured.Unstructured {
	name := fmt.Sprintf("vm-%05d", i)
	u := kubetest.VMI(ns, name, map[string]string{v1alpha1.AnnotationInstance: name})
	u.SetLabels(map[string]string{LabelNodeName: NodeName(NodeOf(i, nodes))})
	unstructured.SetNestedSlice(u.Object, []any{kubetest.VMIInterface("default", kubetest.InfoSourceAll, VMIAddress(i).String())}, "status", "interfaces")
	return u
}

// LabelNodeName is the label KubeVirt puts on a VMI: the node it runs on.
const LabelNodeName = "kubevirt.io/nodeName"

// CreateVMIs creates n VMIs (NodeVMI) over nodes nodes in ns, each then
// given its status, with workers parallel clients, and returns how long
// it took.
func CreateVMIs(tb testing.TB, dyn dynamic.Interface, ns string, n, nodes, workers int) time.Duration {
	tb.Helper()
	res := dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances).Namespace(ns)
	return parallel(tb, n, workers, func(i int) error {
		u := NodeVMI(ns, i, nodes)
		out, err := res.Create(context.Background(), u, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		// The status subresource: create drops a status.
		out.Object["status"] = u.Object["status"]
		_, err = res.UpdateStatus(context.Background(), out, metav1.UpdateOptions{})
		return err
	})
}

// Watches reads the watches the API server of client (a REST client of
// its core group, which can GET /metrics) has open: the sum of
// apiserver_longrunning_requests for verb WATCH, and of
// apiserver_registered_watchers (its watch cache's count; kubetest runs
// without the cache, so that one is 0 there).
func Watches(tb testing.TB, client rest.Interface) (longrunning, registered float64) {
	tb.Helper()
	b := metrics(tb, client)
	longrunning = SumMetric(b, "apiserver_longrunning_requests", `verb="WATCH"`)
	registered = SumMetric(b, "apiserver_registered_watchers", "")
	return longrunning, registered
}

// EtcdWatchers reads how many watchers etcd at url (http://…) has
// (etcd_debugging_mvcc_watcher_total): without the API server's watch
// cache, each watch of the API server is one of etcd's.
func EtcdWatchers(tb testing.TB, url string) float64 {
	tb.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	res, err := c.Get(url + "/metrics")
	if err != nil {
		tb.Fatalf("etcd's /metrics: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatalf("etcd's /metrics: %v", err)
	}
	return SumMetric(b, "etcd_debugging_mvcc_watcher_total", "")
}

// SumMetric sums the samples of metric in a Prometheus text exposition
// whose labels contain label ("" for all).
func SumMetric(text []byte, metric, label string) float64 {
	var sum float64
	for _, l := range strings.Split(string(text), "\n") {
		rest, ok := strings.CutPrefix(l, metric)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		labels, value := "", rest
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, value = rest[:end+1], rest[end+1:]
		}
		if !strings.Contains(labels, label) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err == nil {
			sum += v
		}
	}
	return sum
}

// Requests reads how many requests the API server of client has served
// (the sum of apiserver_request_total), this read of /metrics excluded
// (it is counted once answered).
func Requests(tb testing.TB, client rest.Interface) float64 {
	tb.Helper()
	return SumMetric(metrics(tb, client), "apiserver_request_total", "")
}

// metrics is the API server's /metrics.
func metrics(tb testing.TB, client rest.Interface) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := client.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		tb.Fatalf("the API server's /metrics: %v", err)
	}
	return b
}
