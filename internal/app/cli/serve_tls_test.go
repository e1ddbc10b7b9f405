package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/etcdtest"
	"github.com/vminit/vminit/internal/testing/testpki"
	"github.com/vminit/vminit/mdserver/etcdstore"
)

// TestServeAdminTLS runs `vminit serve` with the admin API on HTTPS with
// client certificates, and `vminit instances` against it.
func TestServeAdminTLS(t *testing.T) {
	pki := testpki.New(t)
	ca, srvCert, srvKey, cliCert, cliKey := pki.CA, pki.ServerCert, pki.ServerKey, pki.ClientCert, pki.ClientKey
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "vm.yaml"), []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm-tls}\nspec:\n  metadataServer: {addresses: [127.0.0.9]}\n"), 0o600)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("tls-test-token-0123456789\n"), 0o600)
	addr, admin := freeAddr(t), freeAddr(t)

	// Usage errors first: exit 2, nothing started.
	for _, tc := range []struct{ args []string }{
		{[]string{"--admin-tls-cert", srvCert}},
		{[]string{"--admin-client-ca", ca}},
		{[]string{"--admin-tls-cert", srvCert, "--admin-tls-key", srvKey, "--admin-listen", ""}},
	} {
		args := append([]string{"serve", "--listen", addr, "--instances", dir, "--admin-token-file", tokenFile}, tc.args...)
		if code, _, stderr := run(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d %s", tc.args, code, stderr)
		}
	}

	stop := startServe(t, "--listen", addr, "--instances", dir, "--log-format", "text",
		"--admin-listen", admin, "--admin-token-file", tokenFile,
		"--admin-tls-cert", srvCert, "--admin-tls-key", srvKey, "--admin-client-ca", ca)

	base := []string{"instances", "list", "--server", "https://" + admin, "--token-file", tokenFile}
	var code int
	var out, errOut string
	for range 100 { // until the server listens
		code, out, errOut = run(t, append(base, "--ca-file", ca, "--cert", cliCert, "--key", cliKey)...)
		if code == ExitOK || !strings.Contains(errOut, "connection refused") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code != ExitOK || !strings.Contains(out, "vm-tls") {
		t.Errorf("list over mutual TLS: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, e := run(t, append(base, "--ca-file", ca)...); code != ExitInvalid {
		t.Errorf("without a client certificate: exit %d %s", code, e)
	}
	if code, _, e := run(t, append(base, "--cert", cliCert, "--key", cliKey)...); code != ExitInvalid || !strings.Contains(e, "certificate") {
		t.Errorf("without the CA: exit %d %s", code, e)
	}
	if code, _, e := run(t, "instances", "list", "--server", "http://"+admin, "--token-file", tokenFile, "--ca-file", ca); code != ExitUsage {
		t.Errorf("--ca-file with http://: exit %d %s", code, e)
	}
	stop()
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8443": true, "[::1]:1": true, "localhost:1": true,
		"0.0.0.0:8443": false, ":8443": false, "10.0.0.1:1": false, "nonsense": false} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v", addr, got)
		}
	}
}

// TestServeEtcdTLS runs `vminit serve` against a real etcd that requires
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
	base := []string{"serve", "--listen", addr, "--etcd-endpoints", e.ClientURL, "--log-format", "text"}

	// Flag mistakes are usage errors; a missing client certificate is
	// refused by etcd and serve exits 1 saying so.
	for _, args := range [][]string{
		{"--etcd-cert", pki.ClientCert},
		{"--etcd-username", "root"},
		{"--etcd-ca", pki.CA, "--etcd-endpoints", "http://127.0.0.1:1"},
	} {
		if code, _, stderr := run(t, append(append([]string{}, base...), args...)...); code != ExitUsage {
			t.Errorf("%v: exit %d %s", args, code, stderr)
		}
	}
	if code, _, stderr := run(t, append(base, "--etcd-ca", pki.CA)...); code != ExitInvalid || !strings.Contains(stderr, "--etcd-cert and --etcd-key") {
		t.Errorf("without a client certificate: exit %d %s", code, stderr)
	}

	stop := startServe(t, append(base[1:], "--etcd-ca", pki.CA, "--etcd-cert", pki.ClientCert, "--etcd-key", pki.ClientKey)...)
	var got string
	for range 250 {
		res, err := http.Get("http://" + addr + "/latest/meta-data/instance-id")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			got = string(b)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != "i-etcd-tls" {
		t.Errorf("instance-id %q through etcd over mutual TLS\n%s", got, stop())
	}
	stop()
}
