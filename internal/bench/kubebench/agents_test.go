package kubebench_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/deploy/kubernetes/crd"
	"github.com/vminit/vminit/internal/bench/kubebench"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/spec"
)

// BenchmarkNodeAgents compares the two ways of serving a KubeVirt fleet
// from Kubernetes: one central `vminit serve --kubernetes` watching every
// Instance and VMI, and one node agent per node, `vminit serve
// --kubernetes --node NODE`, each watching its node's VMIs and, by name,
// the Instances they name (docs/benchmarks.md, "Kubernetes: node
// agents"). On one real kube-apiserver it creates kubebench.Count()
// Instances (10,000) and as many VMIs (kubebench.NodeVMI), dealt over
// $VMINIT_BENCH_NODES (20) simulated nodes by their kubevirt.io/nodeName
// label, each reporting a loopback address of its own. Then, b.N times,
// the central server and the node agents in turn (processes of their own,
// the vminit binary built from this tree, or $VMINIT_BENCH_VMINIT):
//
//   - start-up: from the process's start to its first answer to one of
//     its VMs (serve listens once its store has listed and watched
//     everything it serves, the node agents' followers included);
//   - each process's resident set (VmRSS) and peak (VmHWM) once all
//     are serving, and the CPU each used to start;
//   - the API server's and etcd's CPU during the start-up (all the node
//     agents starting at once, as after a cluster's restart), the watches
//     the API server holds (apiserver_longrunning_requests, verb WATCH)
//     and etcd's watchers, then their CPU (and the API requests made)
//     over 10 idle seconds, and their CPU over $VMINIT_BENCH_UPDATES
//     (500) Instance updates, one after another;
//   - the first process stopped and started again while the others run
//     (a DaemonSet's rolling update): its start-up alone;
//   - last, every VM of the fleet is asked once, as itself, and must be
//     answered with its own Instance's instance-id.
//
// Before the rounds, vminit-controller (built from this tree) starts and
// runs throughout, as in a cluster with node agents: it labels each
// Instance with its VMI's node (node.vminit.dev/NODE), which the node
// agents watch; the time and the API server's CPU it takes to label the
// fleet are logged. $VMINIT_BENCH_CONTROLLER=false leaves it out (the
// agents then follow by name, within --node-max-follow).
//
// $VMINIT_BENCH_SERVE_ARGS adds flags to every vminit serve (say
// "--kube-api-qps 500 --kube-api-burst 1000").
//
// The API server runs as a cluster's does, with its watch cache on, when
// an etcd new enough for it is there ($VMINIT_TEST_ETCD, else the one
// scripts/install-etcd.sh builds); else with the cache off, on Debian's
// etcd, as the tests run it. $VMINIT_BENCH_WATCH_CACHE=false turns the
// cache off on that same etcd, to compare. The output's first line says
// which was measured.
//
// The node agents need node mode (--node); with a binary without it,
// only the central server is measured. Each op is $VMINIT_BENCH_ROUNDS
// (3) rounds, the central server and the node agents in turn; the
// per-round figures are logged (-v), their medians reported. Run it once
// (the fleet takes a minute to create, and a benchmark runs once before
// it runs b.N times):
//
//	go test -run '^$' -bench NodeAgents -benchtime 1x -timeout 60m -v ./internal/bench/kubebench
func BenchmarkNodeAgents(b *testing.B) {
	bin, nodeMode := vminitBinary(b)
	s := kubetest.StartOptions(b, benchOptions())
	b.Logf("measured on %s", s.Describe())
	s.CreateCRDs(b, crd.Instances)
	s.CreateCRDs(b, kubetest.KubeVirtCRDs)
	n, nodes := kubebench.Count(), envInt("VMINIT_BENCH_NODES", 20)
	dyn := s.Dynamic(b)
	api := kubebench.CPU(b, s.PID())
	ci := kubebench.CreateEach(b, kubebench.Resource(dyn), "default", n, 16, kubebench.VMInstance)
	cv := kubebench.CreateVMIs(b, dyn, "default", n, nodes, 16)
	b.Logf("created %d Instances in %.1f s and %d VMIs over %d nodes in %.1f s; kube-apiserver CPU %.1f s",
		n, ci.Seconds(), n, nodes, cv.Seconds(), (kubebench.CPU(b, s.PID()) - api).Seconds())
	if os.Getenv("VMINIT_BENCH_CONTROLLER") != "false" {
		ctl := startController(b, s)
		defer ctl.stop()
		api0, took := kubebench.CPU(b, s.PID()), time.Now()
		labelled(b, s, n, nodes, ctl)
		b.Logf("vminit-controller labelled %d Instances over %d nodes in %.1f s; kube-apiserver CPU %.1f s",
			n, nodes, time.Since(took).Seconds(), (kubebench.CPU(b, s.PID()) - api0).Seconds())
	}
	f := &fleet{s: s, bin: bin, n: n, nodes: nodes, updates: envInt("VMINIT_BENCH_UPDATES", 500)}
	f.baseWatches, _ = kubebench.Watches(b, s.Clientset(b).CoreV1().RESTClient())
	f.baseEtcd = kubebench.EtcdWatchers(b, s.Etcd.ClientURL)
	modes := []string{"central"}
	if nodeMode {
		modes = append(modes, "node")
	} else {
		b.Logf("%s has no --node: the node agents are not measured", bin)
	}
	results := map[string][]round{}
	for r := range envInt("VMINIT_BENCH_ROUNDS", 3) * b.N {
		for _, mode := range modes {
			res := f.run(b, mode, r)
			b.Logf("round %d %s: %s", r+1, mode, res)
			results[mode] = append(results[mode], res)
		}
	}
	for _, mode := range modes {
		rs := results[mode]
		med := func(f func(round) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		b.ReportMetric(med(func(r round) float64 { return r.startup.median() }), mode+"-s-startup-p50")
		b.ReportMetric(med(func(r round) float64 { return r.startup.max() }), mode+"-s-startup-max")
		b.ReportMetric(med(func(r round) float64 { return r.rss.median() }), mode+"-MiB-RSS-p50")
		b.ReportMetric(med(func(r round) float64 { return r.rss.max() }), mode+"-MiB-RSS-max")
		b.ReportMetric(med(func(r round) float64 { return r.rss.sum() }), mode+"-MiB-RSS-sum")
		b.ReportMetric(med(func(r round) float64 { return r.apiStart }), mode+"-s-apiserver-CPU-startup")
		b.ReportMetric(med(func(r round) float64 { return r.watches }), mode+"-watches")
		b.ReportMetric(med(func(r round) float64 { return r.apiIdle }), mode+"-s-apiserver-CPU-idle-10s")
		b.ReportMetric(med(func(r round) float64 { return r.apiPerUpdate }), mode+"-ms-apiserver-CPU/update")
		b.ReportMetric(med(func(r round) float64 { return r.restart }), mode+"-s-restart-one")
		b.ReportMetric(med(func(r round) float64 { return float64(r.exits) }), mode+"-starts-gave-up")
	}
}

// fleet is the cluster the rounds run against.
type fleet struct {
	s                     *kubetest.Server
	bin                   string
	n, nodes, updates     int
	baseWatches, baseEtcd float64 // before any server runs: the API server's own
	updated               int     // Instance updates made so far
}

// samples are one figure per process of a round.
type samples []float64

func (s samples) median() float64 {
	if len(s) == 0 {
		return 0 // no process served
	}
	c := slices.Clone(s)
	slices.Sort(c)
	return c[len(c)/2]
}

func (s samples) max() float64 {
	if len(s) == 0 {
		return 0
	}
	return slices.Max(s)
}

func (s samples) sum() (t float64) {
	for _, v := range s {
		t += v
	}
	return t
}

// round is what one start of the central server, or of every node agent,
// measured.
type round struct {
	never               int // processes that never served (five starts that gave up)
	exits               int // starts that gave up before serving (each started again)
	procs               int
	startup             samples // s, each process's start to its first answer
	rss, peak           samples // MiB, once all serve
	cpu                 samples // s, each process's CPU to then
	apiStart, etcdStart float64 // s of CPU, the start of the first to the last serving
	watches, etcdWatch  float64 // held once all serve, beyond the API server's own
	apiIdle, etcdIdle   float64 // s of CPU over 10 idle seconds
	idleRequests        float64 // API requests (WATCH included) meanwhile
	apiPerUpdate        float64 // ms of the API server's CPU per Instance update
	etcdPerUpdate       float64
	restart             float64 // s, one process's start-up, restarted while the others run
	apiRestart          float64 // s of the API server's CPU meanwhile
}

func (r round) String() string {
	return fmt.Sprintf("%d processes (%d starts gave up, %d never served); start-up p50 %.2f s, max %.2f s; RSS p50 %.1f MiB, max %.1f MiB, sum %.1f MiB (peak max %.1f MiB); "+
		"process CPU to serving, sum %.2f s; kube-apiserver CPU %.2f s, etcd %.2f s meanwhile; watches %.0f (etcd watchers %.0f); "+
		"idle 10 s: kube-apiserver %.3f s, etcd %.3f s of CPU, %.0f API requests; per Instance update: kube-apiserver %.2f ms, etcd %.2f ms of CPU; "+
		"one restarted: %.2f s to serve, kube-apiserver CPU %.2f s",
		r.procs, r.exits, r.never, r.startup.median(), r.startup.max(), r.rss.median(), r.rss.max(), r.rss.sum(), r.peak.max(),
		r.cpu.sum(), r.apiStart, r.etcdStart, r.watches, r.etcdWatch, r.apiIdle, r.etcdIdle, r.idleRequests, r.apiPerUpdate, r.etcdPerUpdate,
		r.restart, r.apiRestart)
}

// proc is one vminit serve process of a round.
type proc struct {
	args    []string
	cmd     *exec.Cmd
	addr    string
	log     *testtools.SyncBuffer
	vms     []int         // the VMIs it serves
	exited  chan struct{} // closed when the process has ended
	exits   int           // how often it ended before it served, and was started again
	exitLog []string      // the last line of each of those
	ready   time.Duration
	failed  error
}

// start starts p's process.
func (p *proc) start(bin, dir string) error {
	p.cmd = exec.Command(bin, p.args...)
	p.cmd.Dir = dir
	p.log = &testtools.SyncBuffer{}
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, p.log // the audit log goes to stderr with the rest
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	p.exited = exited
	go func() { p.cmd.Wait(); close(exited) }()
	return nil
}

// stop ends p's process, if it runs, and waits for it.
func (p *proc) stop() {
	if p.exited != nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
		p.exited = nil
	}
}

// run starts the central server (mode "central") or one agent per node
// ("node"), all at once, measures them and stops them.
func (f *fleet) run(b *testing.B, mode string, r int) round {
	var procs []*proc
	if mode == "central" {
		p := &proc{}
		for i := range f.n {
			p.vms = append(p.vms, i)
		}
		procs = append(procs, p)
	} else {
		for range f.nodes {
			procs = append(procs, &proc{})
		}
		for i := range f.n {
			k := kubebench.NodeOf(i, f.nodes)
			procs[k].vms = append(procs[k].vms, i)
		}
	}
	dir := b.TempDir()
	for k, p := range procs {
		p.addr = "127.0.0.1:" + strconv.Itoa(testtools.FreePort(b))
		args := []string{"serve", "--kubernetes", "--kubeconfig", f.s.Kubeconfig, "--namespace", "default", "--kubevirt", "true",
			"--listen", p.addr, "--allow-loopback-instances"}
		if mode == "node" {
			args = append(args, "--node", kubebench.NodeName(k))
		}
		p.args = append(append(args, strings.Fields(os.Getenv("VMINIT_BENCH_SERVE_ARGS"))...), "--log-format", "text")
	}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()

	api0, etcd0 := kubebench.CPU(b, f.s.PID()), kubebench.CPU(b, f.s.Etcd.PID())
	start := time.Now()
	for _, p := range procs {
		if err := p.start(f.bin, dir); err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.ready, p.failed = firstAnswer(p, start, f.bin, dir) })
	}
	wg.Wait()
	api1, etcd1 := kubebench.CPU(b, f.s.PID()), kubebench.CPU(b, f.s.Etcd.PID())
	res := round{procs: len(procs), apiStart: (api1 - api0).Seconds(), etcdStart: (etcd1 - etcd0).Seconds()}
	for _, p := range procs {
		if p.failed != nil {
			// Counted, not fatal: that a start can fail is a finding.
			b.Logf("round %d %s: never served: %v", r+1, mode, p.failed)
			res.never++
			p.stop()
			continue
		}
		cur, peak := kubebench.RSS(b, p.cmd.Process.Pid)
		res.startup = append(res.startup, p.ready.Seconds())
		res.exits += p.exits
		for _, l := range p.exitLog {
			b.Logf("round %d %s: %s ended before it served, started again: %s", r+1, mode, p.addr, l)
		}
		res.rss, res.peak = append(res.rss, cur), append(res.peak, peak)
		res.cpu = append(res.cpu, kubebench.CPU(b, p.cmd.Process.Pid).Seconds())
	}
	w, _ := kubebench.Watches(b, f.s.Clientset(b).CoreV1().RESTClient())
	res.watches = w - f.baseWatches
	res.etcdWatch = kubebench.EtcdWatchers(b, f.s.Etcd.ClientURL) - f.baseEtcd

	core := f.s.Clientset(b).CoreV1().RESTClient()
	req0 := kubebench.Requests(b, core)
	api0, etcd0 = kubebench.CPU(b, f.s.PID()), kubebench.CPU(b, f.s.Etcd.PID())
	time.Sleep(10 * time.Second)
	res.apiIdle = (kubebench.CPU(b, f.s.PID()) - api0).Seconds()
	res.etcdIdle = (kubebench.CPU(b, f.s.Etcd.PID()) - etcd0).Seconds()
	res.idleRequests = kubebench.Requests(b, core) - req0 - 1 // less the first read of /metrics

	// Instance updates, spread over the fleet: what each costs the API
	// server, with its watches as they are.
	inst := kubebench.Resource(f.s.Dynamic(b)).Namespace("default")
	ctx := context.Background()
	api0, etcd0 = kubebench.CPU(b, f.s.PID()), kubebench.CPU(b, f.s.Etcd.PID())
	for range f.updates {
		i := f.updated * 7919 % f.n // a prime stride: every node in turn
		f.updated++
		u, err := inst.Get(ctx, fmt.Sprintf("vm-%05d", i), metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		unstructured.SetNestedField(u.Object, fmt.Sprintf("h%d", f.updated), "spec", "hostname")
		if _, err := inst.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if f.updates > 0 {
		res.apiPerUpdate = float64((kubebench.CPU(b, f.s.PID()) - api0).Milliseconds()) / float64(f.updates)
		res.etcdPerUpdate = float64((kubebench.CPU(b, f.s.Etcd.PID()) - etcd0).Milliseconds()) / float64(f.updates)
	}

	// One process restarted, the others running (a node agent's rolling
	// update): its start-up alone.
	p := procs[0]
	if p.failed != nil {
		return res
	}
	p.stop()
	api0 = kubebench.CPU(b, f.s.PID())
	start = time.Now()
	p.exits, p.exitLog = 0, nil
	if err := p.start(f.bin, dir); err != nil {
		b.Fatal(err)
	}
	ready, err := firstAnswer(p, start, f.bin, dir)
	if err != nil {
		b.Fatalf("round %d %s, restarted: %v\n%s", r+1, mode, err, p.log)
	}
	res.restart = ready.Seconds()
	res.apiRestart = (kubebench.CPU(b, f.s.PID()) - api0).Seconds()

	// Last, every VM of the fleet is served, by its own process: last,
	// since a VM's first fetch is written into its Instance's
	// status.firstBoot, 10,000 writes that would fall into what is
	// measured above.
	for _, p := range procs {
		if p.failed != nil {
			continue
		}
		if err := everyVM(p); err != nil {
			b.Fatalf("round %d %s: %v\n%s", r+1, mode, err, p.log)
		}
	}
	return res
}

// firstAnswer asks p, as its first VM, until it answers 200, and returns
// the time from start. A process that ends first (serve gives up when its
// store has not listed everything within a minute) is started again, as
// the kubelet restarts a DaemonSet's pod, up to four times; p.exits
// counts those, p.exitLog keeps the last line each wrote.
func firstAnswer(p *proc, start time.Time, bin, dir string) (time.Duration, error) {
	for {
		err := ask(p.addr, p.vms[0])
		if err == nil {
			return time.Since(start), nil
		}
		select {
		case <-p.exited:
			p.exits++
			lines := strings.Split(strings.TrimSpace(p.log.String()), "\n")
			p.exitLog = append(p.exitLog, fmt.Sprintf("%v: %s", p.cmd.ProcessState, lines[len(lines)-1]))
			if p.exits >= 5 {
				return 0, fmt.Errorf("%s ended %d times before it answered VM %d: %v", p.addr, p.exits, p.vms[0], p.exitLog)
			}
			p.exited = nil
			if err := p.start(bin, dir); err != nil {
				return 0, err
			}
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(start) > time.Duration(envInt("VMINIT_BENCH_STARTUP_TIMEOUT", 600))*time.Second {
			return 0, fmt.Errorf("%s never answered VM %d: %v", p.addr, p.vms[0], err)
		}
	}
}

// everyVM asks p as each of its VMs once.
func everyVM(p *proc) error {
	for _, i := range p.vms {
		if err := ask(p.addr, i); err != nil {
			return err
		}
	}
	return nil
}

// ask GETs the instance ID from addr as VMI i (from its address), and
// wants its Instance's.
func ask(addr string, i int) error {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: kubebench.VMIAddress(i).AsSlice()}, Timeout: 5 * time.Second}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	res, err := c.Get("http://" + addr + "/latest/meta-data/instance-id")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4096))
	if err != nil {
		return err
	}
	if want := spec.DefaultInstanceID(fmt.Sprintf("vm-%05d", i)); res.StatusCode != http.StatusOK || string(body) != want {
		return fmt.Errorf("VMI %d: %s %q, want 200 and %s", i, res.Status, body, want)
	}
	return nil
}

// vminitBinary is $VMINIT_BENCH_VMINIT, else vminit built from this tree,
// and whether it has node mode.
func vminitBinary(b *testing.B) (string, bool) {
	bin := os.Getenv("VMINIT_BENCH_VMINIT")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "vminit")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/vminit/vminit/cmd/vminit").CombinedOutput(); err != nil {
			b.Fatalf("go build vminit: %v\n%s", err, out)
		}
	}
	help, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		b.Fatalf("%s serve --help: %v\n%s", bin, err, help)
	}
	return bin, strings.Contains(string(help), "--node")
}

// benchOptions run the API server with its watch cache when an etcd new
// enough for it is installed, unless $VMINIT_BENCH_WATCH_CACHE=false.
func benchOptions() kubetest.Options {
	opts := kubetest.DefaultOptions() // $VMINIT_TEST_ETCD: that etcd, the cache on
	if p := kubetest.InstalledEtcd(); !opts.WatchCache && p != "" {
		opts = kubetest.Options{Etcd: p, WatchCache: true}
	}
	if os.Getenv("VMINIT_BENCH_WATCH_CACHE") == "false" {
		opts.WatchCache = false
	}
	return opts
}

// envInt is $name as a number, else def.
func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		fmt.Sscan(v, &def)
	}
	return def
}

// startController starts vminit-controller, built from this tree, on s's
// fleet: its client may make 500 requests a second (10,000 labels and
// statuses to write), its metrics on a port of its own.
func startController(b *testing.B, s *kubetest.Server) *proc {
	bin := filepath.Join(b.TempDir(), "vminit-controller")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/vminit/vminit/cmd/vminit-controller").CombinedOutput(); err != nil {
		b.Fatalf("go build vminit-controller: %v\n%s", err, out)
	}
	p := &proc{addr: "127.0.0.1:" + strconv.Itoa(testtools.FreePort(b))}
	p.args = []string{"--kubeconfig", s.Kubeconfig, "--namespace", "default", "--kubevirt", "true", "--leader-elect=false",
		"--metrics-listen", p.addr, "--kube-api-qps", "500", "--kube-api-burst", "1000", "--log-format", "text"}
	if err := p.start(bin, b.TempDir()); err != nil {
		b.Fatal(err)
	}
	return p
}

// labelled waits until every node's Instances carry its label and the
// controller's queue is empty (its status writes done too).
func labelled(b *testing.B, s *kubetest.Server, n, nodes int, ctl *proc) {
	inst := kubebench.Resource(s.Dynamic(b)).Namespace("default")
	deadline := time.Now().Add(30 * time.Minute)
	for k := range nodes {
		want := 0
		for i := range n {
			if kubebench.NodeOf(i, nodes) == k {
				want++
			}
		}
		for {
			l, err := inst.List(context.Background(), metav1.ListOptions{LabelSelector: v1alpha1.NodeLabel(kubebench.NodeName(k))})
			if err == nil && len(l.Items) == want {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: Instances not labelled after 30 minutes (%v)\n%s", kubebench.NodeName(k), err, ctl.log)
			}
			time.Sleep(2 * time.Second)
		}
	}
	for {
		res, err := http.Get("http://" + ctl.addr + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if strings.Contains(string(body), "\nvminit_controller_queue_depth 0\n") {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("vminit-controller's queue not empty after 30 minutes (%v)", err)
		}
		time.Sleep(2 * time.Second)
	}
}
