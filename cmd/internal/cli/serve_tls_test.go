package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testpki"
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
