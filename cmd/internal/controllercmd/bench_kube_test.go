package controllercmd

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/internal/bench/kubebench"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// BenchmarkController creates kubebench.Count() Instances (10,000) through
// a real API server with no controller running (the time to create the
// objects alone: the API server's and etcd's cost, on the same two cores),
// then starts vminit-controller as a process of its own and measures the
// time until it has written every Instance's status (each then says Valid
// and Rendered for its generation), the controller's peak RSS, and the CPU
// time of the controller, kube-apiserver and etcd meanwhile:
//
//	go test -run '^$' -bench Controller -benchtime 1x ./cmd/internal/controllercmd
func BenchmarkController(b *testing.B) {
	s, _ := startCluster(b)
	n := kubebench.Count()
	res := kubebench.Resource(s.Dynamic(b))
	cpu0 := kubebench.CPU(b, s.PID())
	created := kubebench.Create(b, res, "default", n, 16)
	b.ReportMetric(created.Seconds(), "s-create")
	b.ReportMetric((kubebench.CPU(b, s.PID()) - cpu0).Seconds(), "s-apiserver-CPU-create")
	for range b.N {
		// Done is the controller's own count of status writes reaching n
		// (polled on /metrics: a watch of its own here would double the
		// API server's work per write); every status is checked after.
		maddr := freeAddr(b)
		args := []string{"--kubeconfig", s.Kubeconfig, "--namespace", "default", "--leader-elect=false",
			"--kubevirt=false", "--workers", benchWorkers(), "--kube-api-qps", "2000", "--kube-api-burst", "4000",
			"--metrics-listen", maddr, "--log-format", "text"}
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
		for statusWrites(maddr) < n {
			if time.Since(start) > 20*time.Minute {
				b.Fatalf("%d of %d statuses written\n%s", statusWrites(maddr), n, log)
			}
			time.Sleep(100 * time.Millisecond)
		}
		elapsed := time.Since(start)
		_, peak := kubebench.RSS(b, cmd.Process.Pid)
		b.ReportMetric(kubebench.CPU(b, cmd.Process.Pid).Seconds(), "s-controller-CPU")
		b.ReportMetric((kubebench.CPU(b, s.PID()) - apiCPU).Seconds(), "s-apiserver-CPU")
		b.ReportMetric((kubebench.CPU(b, s.Etcd.PID()) - etcdCPU).Seconds(), "s-etcd-CPU")
		cmd.Process.Kill()
		cmd.Wait()
		list, err := res.Namespace("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range list.Items {
			if !reconciled(&list.Items[i]) {
				b.Fatalf("%s: not Valid and Rendered for its generation: %v", list.Items[i].GetName(), list.Items[i].Object["status"])
			}
		}
		b.ReportMetric(elapsed.Seconds(), "s-all-valid")
		b.ReportMetric(peak, "MiB-peak-RSS")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "instances/s")
	}
	cur, _ := kubebench.RSS(b, s.PID())
	b.ReportMetric(cur, "MiB-apiserver")
}

// statusWrites reads the controller's count of status writes.
func statusWrites(addr string) int {
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, `vminit_controller_writes_total{object="status"} `); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
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
