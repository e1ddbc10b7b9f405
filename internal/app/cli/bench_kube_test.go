package cli

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/vminit/vminit/internal/bench/kubebench"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/kube/api/v1alpha1"
)

// BenchmarkController creates kubebench.Count() Instances (10,000) through
// a real API server with no controller running (the time to create the
// objects alone: the API server's and etcd's cost, on the same two cores),
// then starts `vminit controller` as a process of its own and measures the
// time until every Instance's status says Valid and Rendered for its
// generation (the last status write), and the controller's peak RSS:
//
//	go test -run '^$' -bench Controller -benchtime 1x ./internal/app/cli
func BenchmarkController(b *testing.B) {
	s, _ := startCluster(b)
	n := kubebench.Count()
	res := kubebench.Resource(s.Dynamic(b))
	cpu0 := kubebench.CPU(b, s.PID())
	created := kubebench.Create(b, res, "default", n, 16)
	b.ReportMetric(created.Seconds(), "s-create")
	b.ReportMetric((kubebench.CPU(b, s.PID()) - cpu0).Seconds(), "s-apiserver-CPU-create")
	for range b.N {
		var mu sync.Mutex
		done := map[string]bool{}
		all := make(chan struct{})
		var last time.Time
		note := func(obj any) {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok || !reconciled(u) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !done[u.GetName()] {
				done[u.GetName()] = true
				last = time.Now()
				if len(done) == n {
					close(all)
				}
			}
		}
		inf := dynamicinformer.NewFilteredDynamicInformer(s.Dynamic(b), v1alpha1.GroupVersionResource, "default", 0, cache.Indexers{}, nil).Informer()
		inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }})
		stop := make(chan struct{})
		go inf.Run(stop)
		cache.WaitForCacheSync(stop, inf.HasSynced)

		args := []string{"controller", "--kubeconfig", s.Kubeconfig, "--namespace", "default", "--leader-elect=false",
			"--kubevirt=false", "--workers", benchWorkers(), "--kube-api-qps", "2000", "--kube-api-burst", "4000", "--metrics-listen", "", "--log-format", "text"}
		cmd := exec.Command(os.Args[0], "-test.run=^TestControllerHelper$")
		cmd.Env = append(os.Environ(), "VMINIT_TEST_CONTROLLER_ARGS="+strings.Join(args, "\n"))
		log := &testtools.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		apiCPU, etcdCPU := kubebench.CPU(b, s.PID()), kubebench.CPU(b, s.Etcd.PID())
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		select {
		case <-all:
		case <-time.After(20 * time.Minute):
			b.Fatalf("%d of %d reconciled\n%s", len(done), n, log)
		}
		mu.Lock()
		elapsed := last.Sub(start)
		mu.Unlock()
		_, peak := kubebench.RSS(b, cmd.Process.Pid)
		b.ReportMetric(kubebench.CPU(b, cmd.Process.Pid).Seconds(), "s-controller-CPU")
		b.ReportMetric((kubebench.CPU(b, s.PID()) - apiCPU).Seconds(), "s-apiserver-CPU")
		b.ReportMetric((kubebench.CPU(b, s.Etcd.PID()) - etcdCPU).Seconds(), "s-etcd-CPU")
		cmd.Process.Kill()
		cmd.Wait()
		close(stop)
		b.ReportMetric(elapsed.Seconds(), "s-all-valid")
		b.ReportMetric(peak, "MiB-peak-RSS")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "instances/s")
	}
	cur, _ := kubebench.RSS(b, s.PID())
	b.ReportMetric(cur, "MiB-apiserver")
}

// reconciled reports whether an Instance's status describes its generation
// and says Valid and Rendered.
func reconciled(u *unstructured.Unstructured) bool {
	og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if og != u.GetGeneration() {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	ok := 0
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if (m["type"] == "Valid" || m["type"] == "Rendered") && m["status"] == "True" {
			ok++
		}
	}
	return ok == 2
}

// benchWorkers is the controller's --workers: $VMINIT_BENCH_WORKERS, else
// its default.
func benchWorkers() string {
	if w := os.Getenv("VMINIT_BENCH_WORKERS"); w != "" {
		return w
	}
	return "4"
}
