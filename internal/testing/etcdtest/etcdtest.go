// Package etcdtest runs a real etcd server (Debian's etcd-server, or the
// program $VMINIT_TEST_ETCD names) for tests: on free 127.0.0.1 ports, its
// data under t.TempDir(), killed at cleanup, optionally with TLS and
// client-certificate authentication.
package etcdtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vminit/vminit/internal/testing/testpki"
	"github.com/vminit/vminit/internal/testing/testproc"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// Server is one etcd process.
type Server struct {
	// ClientURL is the URL clients connect to (https:// with TLS).
	ClientURL string
	// TLS, when the server was started with a PKI, is a client
	// configuration that trusts it and presents the client certificate.
	TLS *tls.Config

	t        testing.TB
	bin, dir string
	peerURL  string
	pki      *testpki.PKI
	args     []string // more flags (StartArgs)
	cmd      *exec.Cmd
	exited   chan struct{}
	log      *bytes.Buffer
}

// Start starts etcd (skipping the test when it is not installed, unless
// VMINIT_REQUIRE_TOOLS=1). With a PKI, clients must connect over TLS and
// present a certificate the PKI's CA signed.
func Start(t testing.TB, pki *testpki.PKI) *Server { return StartArgs(t, pki) }

// StartArgs is Start with more flags of etcd's (e.g.
// --quota-backend-bytes), kept across Restart.
func StartArgs(t testing.TB, pki *testpki.PKI, args ...string) *Server {
	return StartProgram(t, Program(t), pki, args...)
}

// Program is the etcd the tests run: $VMINIT_TEST_ETCD when set (say the
// etcd 3.6 scripts/install-etcd.sh builds, which kube-apiserver's watch
// cache needs), else etcd on PATH (Debian's etcd-server, 3.4.23 on the
// test machines).
func Program(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("VMINIT_TEST_ETCD"); p != "" {
		return testtools.RequireFile(t, p)
	}
	return testtools.Require(t, "etcd")
}

// StartProgram is StartArgs with the etcd program bin.
func StartProgram(t testing.TB, bin string, pki *testpki.PKI, args ...string) *Server {
	scheme := "http"
	if pki != nil {
		scheme = "https"
	}
	e := &Server{t: t, bin: bin, dir: filepath.Join(t.TempDir(), "etcd"), pki: pki,
		ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, testtools.FreePort(t)),
		peerURL:   fmt.Sprintf("http://127.0.0.1:%d", testtools.FreePort(t)), args: args}
	if pki != nil {
		cfg, err := pki.ClientTLS()
		if err != nil {
			t.Fatal(err)
		}
		e.TLS = cfg
	}
	e.Restart()
	t.Cleanup(e.Kill)
	return e
}

// Restart starts the process again (same data directory and ports) after
// Kill, and waits until it answers.
func (e *Server) Restart() {
	e.t.Helper()
	e.log = &bytes.Buffer{}
	args := []string{"--name", "test", "--data-dir", e.dir,
		"--listen-client-urls", e.ClientURL, "--advertise-client-urls", e.ClientURL,
		"--listen-peer-urls", e.peerURL, "--initial-advertise-peer-urls", e.peerURL,
		"--initial-cluster", "test=" + e.peerURL, "--log-outputs", "stderr", "--logger", "zap"}
	if e.pki != nil {
		args = append(args, "--cert-file", e.pki.ServerCert, "--key-file", e.pki.ServerKey,
			"--trusted-ca-file", e.pki.CA, "--client-cert-auth")
	}
	args = append(args, e.args...)
	e.cmd = exec.Command(e.bin, args...)
	// Its own process group, killed with the test binary: a test that
	// dies never leaves an etcd behind.
	e.cmd.SysProcAttr = testproc.SysProcAttr()
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.exited = make(chan struct{})
	go func() { e.cmd.Wait(); close(e.exited) }()
	cli := e.Client()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "ready")
		cancel()
		if err == nil {
			return
		}
		select {
		case <-e.exited:
			e.t.Fatalf("etcd exited: %s", e.log)
		default:
		}
		if time.Now().After(deadline) {
			e.Kill()
			e.t.Fatalf("etcd did not become ready: %v\n%s", err, e.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Version is the etcd release the program reports (its --version),
// such as [3 6 16].
func (e *Server) Version() ([3]int, error) { return ProgramVersion(e.bin) }

var versionLine = regexp.MustCompile(`(?m)^etcd Version: (\d+)\.(\d+)\.(\d+)`)

// ProgramVersion is the etcd release bin reports (its --version).
func ProgramVersion(bin string) ([3]int, error) {
	var v [3]int
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return v, fmt.Errorf("%s --version: %w", bin, err)
	}
	m := versionLine.FindSubmatch(out)
	if m == nil {
		return v, fmt.Errorf("%s --version: no \"etcd Version: X.Y.Z\" in %q", bin, out)
	}
	for i := range v {
		v[i], _ = strconv.Atoi(string(m[i+1]))
	}
	return v, nil
}

// PID is the process id of the running etcd (for measurements).
func (e *Server) PID() int { return e.cmd.Process.Pid }

// Kill stops the process (SIGKILL) and waits for it.
func (e *Server) Kill() {
	if e.cmd != nil && e.cmd.Process != nil {
		e.cmd.Process.Kill()
		<-e.exited
	}
}

// Client returns a client of the server, closed at cleanup.
func (e *Server) Client() *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.ClientURL}, DialTimeout: 2 * time.Second,
		TLS: e.TLS, Logger: zap.NewNop()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cli.Close() })
	return cli
}
