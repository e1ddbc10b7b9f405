package controllercmd

import (
	"context"
	"io"
	"net"
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

	"github.com/vminit/vminit/cmd/internal/cli"
	"github.com/vminit/vminit/cmd/internal/cmdkit"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// startCluster and createInstance are kubetest's, under their short names.
var (
	startCluster   = kubetest.StartWithInstances
	createInstance = kubetest.CreateInstance
)

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// run runs vminit-controller with args in this process.
func run(args ...string) (code int, stderr string) {
	var out, errb strings.Builder
	code = Main(args, &out, &errb)
	return code, errb.String()
}

// TestSpecAddressesFlag: a malformed --spec-addresses is a usage error
// naming the flag, before any cluster is contacted.
func TestSpecAddressesFlag(t *testing.T) {
	want := `--spec-addresses "=10.0.0.0/8"`
	if code, stderr := run("--spec-addresses", "=10.0.0.0/8"); code != cmdkit.ExitUsage || !strings.Contains(stderr, want) ||
		!strings.HasPrefix(stderr, "vminit-controller: ") {
		t.Errorf("exit %d, want %q in\n%s", code, want, stderr)
	}
}

// TestReportFlags: --boot-reports and --report-url are vminit serve's
// flags of the same meaning, by name and type; a --report-url the guests
// could not use is a usage error naming the flag, before any cluster is
// contacted.
func TestReportFlags(t *testing.T) {
	serve, _, err := cli.NewRootCommand().Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"boot-reports", "report-url"} {
		mine, theirs := New().Flags().Lookup(name), serve.Flags().Lookup(name)
		if mine == nil || theirs == nil || mine.Value.Type() != theirs.Value.Type() {
			t.Errorf("--%s: vminit-controller's %v, vminit serve's %v", name, mine, theirs)
		}
	}
	for _, u := range []string{"169.254.169.254", "http://u:p@h/", "http://h/?q"} {
		if code, stderr := run("--report-url", u); code != cmdkit.ExitUsage || !strings.Contains(stderr, "--report-url="+strconv.Quote(u)) {
			t.Errorf("--report-url %s: exit %d\n%s", u, code, stderr)
		}
	}
}

// TestControllerHelper is `vminit-controller` in a process of its own,
// for TestControllerReplicas.
func TestControllerHelper(t *testing.T) {
	args := os.Getenv("VMINIT_TEST_CONTROLLER_ARGS")
	if args == "" {
		return
	}
	os.Exit(Main(strings.Split(args, "\n"), os.Stdout, os.Stderr))
}

// TestControllerReplicas: two `vminit-controller` processes elect one
// leader on a Lease; the leader is killed (SIGKILL: no release), and the
// other takes over within the lease duration and reconciles what changed.
func TestControllerReplicas(t *testing.T) {
	s, res := startCluster(t)
	lease := func() string {
		l, err := s.Clientset(t).CoordinationV1().Leases("default").Get(context.Background(), "vminit-controller", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	procs := map[string]*exec.Cmd{}
	metrics, health := map[string]string{}, map[string]string{}
	for _, id := range []string{"a", "b"} {
		metrics[id], health[id] = freeAddr(t), freeAddr(t)
		args := []string{"--kubeconfig", s.Kubeconfig, "--namespace", "default", "--leader-election-namespace", "default",
			"--identity", id, "--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "250ms",
			"--metrics-listen", metrics[id], "--health-listen", health[id], "--log-format", "text"}
		cmd := exec.Command(os.Args[0], "-test.run=^TestControllerHelper$")
		cmd.Env = append(os.Environ(), "VMINIT_TEST_CONTROLLER_ARGS="+strings.Join(args, "\n"))
		log := &testtools.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[id] = cmd
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("controller %s:\n%s", id, log)
			}
		})
	}
	leaderMetric := func(id string) string {
		res, err := http.Get("http://" + metrics[id] + "/metrics")
		if err != nil {
			return ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "vminit_controller_leader "); ok {
				return v
			}
		}
		return ""
	}
	valid := func(name string) bool {
		u, err := res.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Valid" && m["status"] == "True" {
				return true
			}
		}
		return false
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	createInstance(t, res, "one", "hostname: one")
	waitUntil("one leader, reconciling", func() bool { return lease() != "" && valid("one") })
	first := lease()
	other := map[string]string{"a": "b", "b": "a"}[first]
	waitUntil("both replicas report who leads", func() bool { return leaderMetric(first) == "1" && leaderMetric(other) == "0" })

	procs[first].Process.Signal(syscall.SIGKILL)
	procs[first].Wait()
	killed := time.Now()
	createInstance(t, res, "two", "hostname: two")
	waitUntil("the other replica leads and reconciles", func() bool { return lease() == other && valid("two") })
	t.Logf("failover: %s killed, %s reconciled a new Instance %v later", first, other, time.Since(killed).Round(10*time.Millisecond))
	if leaderMetric(other) != "1" {
		t.Error("the new leader's metric")
	}
	if r, err := http.Get("http://" + metrics[other] + "/readyz"); err != nil || r.StatusCode != 200 {
		t.Errorf("readyz: %v %v", r, err)
	}
	// The probes' listener (the Deployment's, beyond the pod) serves
	// health alone: the metrics, unauthenticated, stay on loopback.
	if r, err := http.Get("http://" + health[other] + "/readyz"); err != nil || r.StatusCode != 200 {
		t.Errorf("readyz on --health-listen: %v %v", r, err)
	}
	if r, err := http.Get("http://" + health[other] + "/metrics"); err != nil || r.StatusCode != 404 {
		t.Errorf("/metrics on --health-listen: %v %v", r, err)
	}
}

// TestVersion: vminit-controller --version prints what vminit version
// prints, the module's version and Go's.
func TestVersion(t *testing.T) {
	var out strings.Builder
	if code := Main([]string{"--version"}, &out, io.Discard); code != 0 || out.String() != cmdkit.Version()+"\n" {
		t.Errorf("exit %d: %q, want %q", code, out.String(), cmdkit.Version()+"\n")
	}
}
