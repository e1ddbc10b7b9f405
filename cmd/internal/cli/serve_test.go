package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
)

func TestServe(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "vm.yaml"), []byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: vm-1
spec:
  instanceID: i-cli
  metadataServer:
    addresses: [127.0.0.1]
`), 0o644)
	addr, maddr := freeAddr(t), freeAddr(t)
	cache := filepath.Join(t.TempDir(), "instances.cache")
	stop := startServe(t, "--listen", addr, "--instances", dir, "--instances-cache", cache, "--metrics-listen", maddr, "--log-format", "text")
	getBody := func(url string) string {
		for range 100 {
			res, err := http.Get(url)
			if err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				return string(b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s never answered", url)
		return ""
	}
	if got := getBody("http://" + addr + "/latest/meta-data/instance-id"); got != "i-cli" {
		t.Errorf("instance-id %q", got)
	}
	if m := getBody("http://" + maddr + "/metrics"); !strings.Contains(m, "vminit_mdserver_instances_loaded 1") {
		t.Errorf("metrics:\n%s", m)
	}
	if res, err := http.Get("http://" + addr + "/metrics"); err == nil && res.StatusCode != 404 {
		t.Errorf("/metrics on the guest listener: %d", res.StatusCode)
	}
	stderr := stop()
	// The spec was written just now, so the cache exists but may not
	// hold it yet (see dirstore's racy-file rule).
	if _, err := os.Stat(cache); err != nil {
		t.Errorf("no start-up cache after shutdown: %v", err)
	}
	if !strings.Contains(stderr, "msg=fetch") || !strings.Contains(stderr, "instance=vm-1") {
		t.Errorf("no audit line:\n%s", stderr)
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServe runs `vminit serve --allow-loopback-instances args...` in the
// background (the tests' VMs are on 127.0.0.0/8). stop cancels it, waits
// until it has returned (failing the test on an error) and returns what it
// logged.
func startServe(t *testing.T, args ...string) (stop func() string) {
	ctx, cancel := context.WithCancel(context.Background())
	root := NewRootCommand()
	stderr := &testtools.SyncBuffer{}
	root.SetErr(stderr)
	root.SetArgs(append([]string{"serve", "--allow-loopback-instances"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	stopped := false
	stop = func() string {
		if stopped {
			return stderr.String()
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v\n%s", err, stderr)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("serve did not stop")
		}
		return stderr.String()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestServeEtcdNamesServer: the etcd store is vminit-server's (so that
// vminit links no etcd client); `vminit serve` given an --etcd-* flag is
// a usage error naming that program, and serve has no such flag.
func TestServeEtcdNamesServer(t *testing.T) {
	dir := t.TempDir()
	for _, flag := range []string{"--etcd-endpoints=http://127.0.0.1:1", "--etcd-prefix=/x/", "--etcd-ca=ca.pem",
		"--etcd-cert=c.pem", "--etcd-key=k.pem", "--etcd-username=u", "--etcd-password-file=p"} {
		// Until stopped: a serve that took the flag would keep serving.
		stderr, err := testtools.RunUntilStopped(t, NewRootCommand(), "", "serve", "--instances", dir, "--listen", freeAddr(t), flag)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "vminit-server") || !strings.Contains(err.Error(), strings.Split(flag, "=")[0]) {
			t.Errorf("serve %s: %v, want a usage error naming the flag and vminit-server\n%s", flag, err, stderr)
		}
	}
	if cmd, _, err := NewRootCommand().Find([]string{"serve"}); err != nil || cmd.Flags().Lookup("etcd-endpoints") != nil {
		t.Errorf("serve has an --etcd-endpoints flag (%v)", err)
	}
}

// TestServeNodeFlags: --node is for --kubernetes (servekit's
// TestGuestHops checks --guest-hops).
func TestServeNodeFlags(t *testing.T) {
	if code, _, stderr := run(t, "serve", "--instances", t.TempDir(), "--node", "n1"); code != 2 || !strings.Contains(stderr, "--node is for --kubernetes") {
		t.Errorf("--node without --kubernetes: %d %s", code, stderr)
	}
}
