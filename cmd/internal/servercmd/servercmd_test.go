package servercmd

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vminit/vminit/cmd/internal/cmdkit"
	"github.com/vminit/vminit/internal/testing/etcdtest"
	"github.com/vminit/vminit/internal/testing/testpki"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/etcdstore"
)

func run(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	var errb bytes.Buffer
	code = Main(args, io.Discard, &errb)
	return code, errb.String()
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestEtcdHint(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("listing: deadline; TLS handshake: %w", x509.UnknownAuthorityError{}):         "--etcd-ca",
		errors.New("listing: deadline; https://e:2379: TLS: remote error: tls: bad certificate"): "--etcd-cert and --etcd-key",
		errors.New("listing: etcdserver: authentication failed, invalid user ID or password"):    "--etcd-password-file",
		errors.New("listing: context deadline exceeded; http://e:2379: connection refused"):      "",
	} {
		got := (&etcdFlags{}).Hint(err).Error()
		if !strings.HasPrefix(got, err.Error()) || want != "" && !strings.Contains(got, want) || want == "" && got != err.Error() {
			t.Errorf("Hint(%v) = %q, want a hint naming %q", err, got, want)
		}
	}
}

func TestEtcdEndpointSchemes(t *testing.T) {
	for _, eps := range []string{"https://a:2379,http://b:2379", "http://a:2379,https://b:2379"} {
		if code, stderr := run(t, "--etcd-endpoints", eps, "--listen", freeAddr(t)); code != cmdkit.ExitUsage || !strings.Contains(stderr, "same scheme") {
			t.Errorf("%v: exit %d %s", eps, code, stderr)
		}
	}
	if cfg, err := (&etcdFlags{endpoints: []string{"https://a:2379", "https://b:2379"}}).config(nil); err != nil || cfg.TLS == nil {
		t.Errorf("https only: %v %v", cfg.TLS, err)
	}
}

// TestServerServesDirectory: vminit-server is serve with one more store;
// the directory store (and every serve flag) works as in `vminit serve`.
func TestServerServesDirectory(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "vm.yaml"), []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm-dir}\nspec:\n  instanceID: i-dir\n  metadataServer: {addresses: [127.0.0.1]}\n"), 0o600)
	addr := freeAddr(t)
	stop := start(t, "--instances", dir, "--listen", addr)
	if got := instanceID(addr); got != "i-dir" {
		t.Errorf("instance-id %q from the directory store\n%s", got, stop())
	}
	stop()
	if code, stderr := run(t, "--instances", dir, "--etcd-endpoints", "http://127.0.0.1:1", "--listen", addr); code != cmdkit.ExitUsage ||
		!strings.Contains(stderr, "give exactly one of --instances DIR, --etcd-endpoints and --kubernetes") {
		t.Errorf("two stores: exit %d %s", code, stderr)
	}
}

// TestServeEtcdTLS runs vminit-server against a real etcd that requires
// TLS and client certificates.
func TestServeEtcdTLS(t *testing.T) {
	pki := testpki.New(t)
	e := etcdtest.Start(t, pki)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm-etcd}\nspec:\n  instanceID: i-etcd-tls\n  metadataServer: {addresses: [127.0.0.1]}\n"
	if _, err := e.Client().Put(ctx, etcdstore.DefaultPrefix+"vm-etcd", doc); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	base := []string{"--listen", addr, "--etcd-endpoints", e.ClientURL, "--log-format", "text"}

	// Flag mistakes are usage errors; a missing client certificate is
	// refused by etcd and the server exits 1 saying so.
	for _, args := range [][]string{
		{"--etcd-cert", pki.ClientCert},
		{"--etcd-username", "root"},
		{"--etcd-ca", pki.CA, "--etcd-endpoints", "http://127.0.0.1:1"},
	} {
		if code, stderr := run(t, append(append([]string{}, base...), args...)...); code != cmdkit.ExitUsage {
			t.Errorf("%v: exit %d %s", args, code, stderr)
		}
	}
	if code, stderr := run(t, append(base, "--etcd-ca", pki.CA)...); code != cmdkit.ExitInvalid || !strings.Contains(stderr, "--etcd-cert and --etcd-key") {
		t.Errorf("without a client certificate: exit %d %s", code, stderr)
	}

	stop := start(t, append(base, "--etcd-ca", pki.CA, "--etcd-cert", pki.ClientCert, "--etcd-key", pki.ClientKey)...)
	if got := instanceID(addr); got != "i-etcd-tls" {
		t.Errorf("instance-id %q through etcd over mutual TLS\n%s", got, stop())
	}
	stop()
}

// TestEtcdFIFOFlagsFailAtOnce: each --etcd-* file flag given a FIFO is an
// error at once naming the flag, as serve's own file flags are
// (cmd/internal/cli's TestFIFOFlagsFailAtOnce).
func TestEtcdFIFOFlagsFailAtOnce(t *testing.T) {
	work := t.TempDir()
	fifo, notPEM := filepath.Join(work, "fifo"), filepath.Join(work, "not.pem")
	os.WriteFile(notPEM, []byte("x"), 0o600)
	etcd := func(more ...string) []string {
		return append([]string{"--etcd-endpoints", "https://127.0.0.1:1", "--listen", freeAddr(t)}, more...)
	}
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--etcd-ca", etcd("--etcd-ca", fifo)},
		{"--etcd-cert", etcd("--etcd-cert", fifo, "--etcd-key", notPEM)},
		{"--etcd-key", etcd("--etcd-cert", notPEM, "--etcd-key", fifo)},
		{"--etcd-password-file", etcd("--etcd-username", "u", "--etcd-password-file", fifo)},
	} {
		os.Remove(fifo)
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		stderr, err := testtools.RunUntilStopped(t, New(), fifo, c.args...)
		if msg := stderr + fmt.Sprint(err); err == nil || !strings.Contains(msg, c.flag) || !strings.Contains(msg, "FIFO") {
			t.Errorf("%s FIFO: err = %v, want one naming the flag and the FIFO; log:\n%s", c.flag, err, stderr)
		}
	}
}

// start runs vminit-server --allow-loopback-instances args... in the
// background (the tests' VMs are on 127.0.0.0/8). stop cancels it, waits
// until it has returned (failing the test on an error) and returns what
// it logged.
func start(t *testing.T, args ...string) (stop func() string) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := New()
	stderr := &testtools.SyncBuffer{}
	cmd.SetErr(stderr)
	cmd.SetArgs(append([]string{"--allow-loopback-instances"}, args...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	stopped := false
	stop = func() string {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("vminit-server: %v\n%s", err, stderr)
			}
		}
		return stderr.String()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// instanceID is what the server on addr answers 127.0.0.1 for its EC2
// instance-id, once it listens ("" if it never does).
func instanceID(addr string) string {
	for range 250 {
		res, err := http.Get("http://" + addr + "/latest/meta-data/instance-id")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ""
}
