package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, and returns their file names.
func testPKI(t *testing.T) (ca, srvCert, srvKey, cliCert, cliKey string) {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vminit test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	writePEM := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalECPrivateKey(k)
		return writePEM(name+".pem", "CERTIFICATE", der), writePEM(name+"-key.pem", "EC PRIVATE KEY", kd)
	}
	ca = writePEM("ca.pem", "CERTIFICATE", caDER)
	srvCert, srvKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	cliCert, cliKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return
}

// TestServeAdminTLS runs `vminit serve` with the admin API on HTTPS with
// client certificates, and `vminit instances` against it.
func TestServeAdminTLS(t *testing.T) {
	ca, srvCert, srvKey, cliCert, cliKey := testPKI(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "vm.yaml"), []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm-tls}\nspec:\n  metadataServer: {addresses: [127.0.0.9]}\n"), 0o600)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("tls-test-token-0123456789\n"), 0o600)
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	addr, admin := free(), free()

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

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := NewRootCommand()
	var stderr bytes.Buffer
	root.SetErr(&stderr)
	root.SetArgs([]string{"serve", "--listen", addr, "--instances", dir, "--log-format", "text",
		"--admin-listen", admin, "--admin-token-file", tokenFile,
		"--admin-tls-cert", srvCert, "--admin-tls-key", srvKey, "--admin-client-ca", ca})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

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
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8443": true, "[::1]:1": true, "localhost:1": true,
		"0.0.0.0:8443": false, ":8443": false, "10.0.0.1:1": false, "nonsense": false} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v", addr, got)
		}
	}
}
