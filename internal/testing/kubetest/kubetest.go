// Package kubetest runs a real Kubernetes API server for tests: the
// kube-apiserver that scripts/install-kube-apiserver.sh builds (release
// Version), on Debian's etcd (started through etcdtest), both on free
// 127.0.0.1 ports with their state under t.TempDir(). Its watch cache is
// off unless asked for (Options), on an etcd new enough for it. No kubelet, scheduler
// or controller-manager runs: objects, watches, RBAC, admission, CRDs with
// structural schemas and status subresources behave as in a cluster, but
// pods never run and nothing garbage-collects owner-referenced objects.
//
//	s := kubetest.Start(t)
//	cs := s.Clientset(t)                  // the admin (system:masters)
//	s.CreateCRDs(t, crdYAML)              // returns once they are served
//	sa := s.ServiceAccount(t, "ns", "ctl") // a token and kubeconfig of its own
//	out, err := s.Kubectl(t, "apply", "-k", "deploy/kubernetes")
//	s.Restart(t)                          // same port, same etcd
//
// The server is stopped at cleanup, and, through Pdeathsig, when the test
// binary dies without running its cleanups (a -timeout panic, a kill).
//
// Written here rather than taken from controller-runtime's envtest, which
// does the same: envtest fetches its binaries from a download site that
// this project's machines cannot reach, and it would bring
// controller-runtime into vminit's go.mod for the tests of packages that do
// not use it.
package kubetest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vminit/vminit/internal/testing/etcdtest"
	"github.com/vminit/vminit/internal/testing/testpki"
	"github.com/vminit/vminit/internal/testing/testproc"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// Server is one kube-apiserver process and the etcd it stores in. Its
// embedded Account is the admin: user "admin" in group system:masters,
// which RBAC lets do anything.
type Server struct {
	Account
	// URL is the API server's address, https://127.0.0.1:PORT.
	URL string
	// CAFile is the PEM file of the CA that signed the serving certificate
	// (the kubeconfigs and Config() carry it too).
	CAFile string
	// Etcd is the server's storage; tests may stop it as well.
	Etcd *etcdtest.Server
	// Options are what it was started with.
	Options Options

	bin, dir string
	ca       []byte
	args     []string
	proc     *process
}

// Options are how a Server's storage is run.
type Options struct {
	// Etcd is the etcd program; "" is etcdtest's ($VMINIT_TEST_ETCD, else
	// Debian's etcd on PATH).
	Etcd string
	// WatchCache turns kube-apiserver's watch cache on, as every cluster
	// runs it: lists and watches served from the API server's memory.
	// It needs etcd 3.4.31, 3.5.13, 3.6 or later (watchCacheEtcd);
	// Debian's 3.4.23 is older, so it is off by default (see the flag
	// below).
	WatchCache bool
}

// watchCacheEtcd says whether etcd release v has the progress
// notifications the watch cache relies on: fixed in 3.4.31 and 3.5.13,
// there from 3.6.0.
func watchCacheEtcd(v [3]int) bool {
	switch {
	case v[0] != 3:
		return v[0] > 3
	case v[1] == 4:
		return v[2] >= 31
	case v[1] == 5:
		return v[2] >= 13
	}
	return v[1] > 5
}

// DefaultOptions are Start's: with $VMINIT_TEST_ETCD set (an etcd new
// enough, such as scripts/install-etcd.sh's), that etcd and the watch
// cache on; else Debian's etcd and the watch cache off, as CI runs.
func DefaultOptions() Options {
	return Options{WatchCache: os.Getenv("VMINIT_TEST_ETCD") != ""}
}

// InstalledEtcd is the path of the etcd scripts/install-etcd.sh builds,
// $VMINIT_TEST_TOOLS_DIR (default /var/cache/vminit-test-tools)/
// etcd-EtcdVersion/etcd, or "" when it is not there.
func InstalledEtcd() string {
	p := filepath.Join(toolsDir(), "etcd-"+EtcdVersion, "etcd")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// Start starts etcd and kube-apiserver with DefaultOptions and waits
// until the API server is ready (/readyz) and its "default" namespace
// exists. It skips the test when kube-apiserver or etcd is not installed,
// unless VMINIT_REQUIRE_TOOLS=1 or CI=true. Both are stopped at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartOptions(t, DefaultOptions())
}

// StartOptions is Start with opts. With WatchCache, it fails the test when
// the etcd lacks the fix the cache needs (its reads would stall).
func StartOptions(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := Binary(t, "kube-apiserver")
	if opts.Etcd == "" {
		opts.Etcd = etcdtest.Program(t)
	}
	etcd := etcdtest.StartProgram(t, opts.Etcd, nil)
	if opts.WatchCache {
		v, err := etcd.Version()
		if err != nil {
			t.Fatal(err)
		}
		if !watchCacheEtcd(v) {
			t.Fatalf("kubetest: the watch cache needs etcd 3.4.31, 3.5.13, 3.6 or later; %s is %d.%d.%d (scripts/install-etcd.sh builds one)",
				opts.Etcd, v[0], v[1], v[2])
		}
	}
	dir := filepath.Join(t.TempDir(), "kube-apiserver")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	pki := testpki.New(t)
	ca, err := os.ReadFile(pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(dir, "service-account-key.pem")
	writeECKey(t, saKey)
	token := randomToken(t)
	tokens := filepath.Join(dir, "tokens.csv")
	// token,user,uid,"group1,group2"
	if err := os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := testtools.FreePort(t)
	s := &Server{URL: "https://127.0.0.1:" + strconv.Itoa(port), CAFile: pki.CA, Etcd: etcd, Options: opts,
		bin: bin, dir: dir, ca: ca}
	s.args = []string{
		"--etcd-servers=" + etcd.ClientURL,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		// Without an address to advertise, the server looks for a
		// non-loopback interface; and it may not write a loopback address
		// into the "kubernetes" Service's endpoints, so it writes none.
		"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--tls-cert-file=" + pki.ServerCert, "--tls-private-key-file=" + pki.ServerKey,
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saKey, "--service-account-signing-key-file=" + saKey,
		// Configuration only: no Service is ever routed on this machine.
		"--service-cluster-ip-range=10.96.0.0/24",
		"--profiling=false",
		// Debian's etcd (3.4.23) predates the progress-notification fix
		// (3.4.31) that the watch cache relies on to learn the current
		// revision of a resource nobody writes: with the cache on, a watch
		// or read of such a resource stalls for 3 s and fails with "Too
		// large resource version". Without it etcd serves every read and
		// watch, with a cluster's results, except that a watch resuming
		// from a resourceVersion older than the server's start is answered
		// from etcd's history instead of with 410 Gone: tests must not
		// depend on either (informers handle both). What differs is the
		// cost: a selected list or watch is filtered per request from
		// etcd, not once in memory, which is why the benchmarks run the
		// cache on a newer etcd (Options.WatchCache).
		"--watch-cache=" + strconv.FormatBool(opts.WatchCache),
		// Close open watches on SIGTERM instead of waiting for them to
		// end, which Stop would otherwise wait out.
		"--shutdown-watch-termination-grace-period=2s",
	}
	s.Account = s.newAccount(t, "admin", token, metav1.NamespaceDefault)
	s.start(t)
	t.Cleanup(func() {
		s.proc.kill()
		if t.Failed() {
			t.Logf("kube-apiserver log (its end):\n%s", s.Log())
		}
	})
	return s
}

// Binary returns the path of a program install-kube-apiserver.sh built
// ("kube-apiserver" or "kubectl"), $VMINIT_TEST_TOOLS_DIR (default
// /var/cache/vminit-test-tools)/NAME-Version/NAME, or stops the test as
// testtools does for a missing tool.
func Binary(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(toolsDir(), name+"-"+Version, name)
	if _, err := os.Stat(p); err != nil {
		testtools.Missing(t, p+" not found (scripts/install-kube-apiserver.sh builds it)")
	}
	return p
}

// toolsDir is where the install scripts put what they build.
func toolsDir() string {
	if dir := os.Getenv("VMINIT_TEST_TOOLS_DIR"); dir != "" {
		return dir
	}
	return "/var/cache/vminit-test-tools"
}

// Describe says what the server runs on, for a benchmark's output:
// "kube-apiserver v1.36.3, watch cache on; etcd 3.6.16".
func (s *Server) Describe() string {
	cache := "off"
	if s.Options.WatchCache {
		cache = "on"
	}
	ev := "unknown version"
	if v, err := s.Etcd.Version(); err == nil {
		ev = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
	}
	return fmt.Sprintf("kube-apiserver %s, watch cache %s; etcd %s (%s)", Version, cache, ev, s.Options.Etcd)
}

// Stop stops the API server gracefully (SIGTERM, then SIGKILL after 30 s)
// and waits for it to exit. Etcd keeps running; Restart starts the API
// server again.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.proc.stop(30 * time.Second); err != nil {
		t.Error(err)
	}
}

// Restart stops the API server if it runs, then starts it again on the
// same port, etcd, certificates, tokens and service-account key, so every
// client configuration and token handed out stays valid, and waits until
// it is ready.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop(t)
	s.start(t)
}

// PID is the process id of the running API server (for measurements).
func (s *Server) PID() int { return s.proc.cmd.Process.Pid }

// Log returns the end of the API server's log (its last 256 KiB), from
// all of its runs. A failed test prints it at cleanup.
func (s *Server) Log() string { return s.proc.log.String() }

func (s *Server) start(t testing.TB) {
	t.Helper()
	var log *tailBuffer
	if s.proc != nil {
		log = s.proc.log
		fmt.Fprintf(log, "\n==== kubetest: restart ====\n")
	} else {
		log = newTailBuffer(256 << 10)
	}
	p, err := startProcess(s.bin, s.args, log)
	if err != nil {
		t.Fatal(err)
	}
	s.proc = p
	if err := s.waitReady(); err != nil {
		p.kill()
		t.Fatalf("kube-apiserver: %v\n%s", err, log)
	}
}

// waitReady polls /readyz, then waits for the "default" namespace, which a
// post-start hook creates shortly after the server calls itself ready.
func (s *Server) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: s.tlsConfig()}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := hc.Do(req)
		if err == nil {
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			last = fmt.Sprintf("/readyz: %s: %s", resp.Status, b.String())
		} else {
			last = err.Error()
		}
		if err := s.waitTick(ctx); err != nil {
			return fmt.Errorf("not ready (%s): %w", last, err)
		}
	}
	cs, err := s.clientset()
	if err != nil {
		return err
	}
	for {
		_, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			last = err.Error()
		}
		if err := s.waitTick(ctx); err != nil {
			return fmt.Errorf("namespace default not created (%s): %w", last, err)
		}
	}
}

// waitTick sleeps a poll interval; it fails when ctx ends or the process
// has exited.
func (s *Server) waitTick(ctx context.Context) error {
	select {
	case <-s.proc.exited:
		return fmt.Errorf("exited: %v", s.proc.err)
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(50 * time.Millisecond):
		return nil
	}
}

func (s *Server) tlsConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// process is one run of a server program, in a process group of its own.
type process struct {
	cmd    *exec.Cmd
	log    *tailBuffer
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

func startProcess(bin string, args []string, log *tailBuffer) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// A group of its own, so stop and kill reach anything it forks; and
	// killed by the kernel when the test binary dies without cleaning up.
	cmd.SysProcAttr = testproc.SysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, log: log, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// stop sends SIGTERM to the group, SIGKILL after grace, and waits.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		p.kill()
		return fmt.Errorf("%s did not stop within %v of SIGTERM; killed", filepath.Base(p.cmd.Path), grace)
	}
}

func (p *process) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// writeECKey writes a P-256 key: the service-account token signing key
// (ES256), which is quicker to make than RSA and which the API server also
// reads as the verification key.
func writeECKey(t testing.TB, path string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func randomToken(t testing.TB) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// tailBuffer keeps the last max bytes written to it: a server's log stays
// bounded however long the test runs.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
	cut bool
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > 2*w.max { // trim now and then, not on every write
		w.b = append(w.b[:0], w.b[len(w.b)-w.max:]...)
		w.cut = true
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.b
	if len(b) > w.max {
		b, w.cut = b[len(b)-w.max:], true
	}
	if w.cut {
		return "[...]\n" + string(b)
	}
	return string(b)
}
