package admin

import (
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/lib/tlsfiles"
	"github.com/vminit/vminit/internal/testing/testpki"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// TestAdminTLSReload renews the admin certificate and client CA in place:
// the next handshake gets the new ones; a renewal half written (the new
// certificate beside the old key) keeps the previous set and is logged.
func TestAdminTLSReload(t *testing.T) {
	old := tlsfiles.Recheck
	tlsfiles.Recheck = 0
	t.Cleanup(func() { tlsfiles.Recheck = old })
	first, second := testpki.New(t), testpki.New(t)
	dir := t.TempDir()
	cert, key, ca := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	install := func(p *testpki.PKI, files ...string) {
		for _, f := range files {
			src := map[string]string{cert: p.ServerCert, key: p.ServerKey, ca: p.CA}[f]
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f+".tmp", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(f+".tmp", f); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(first, cert, key, ca)
	logs := &testtools.SyncBuffer{}
	cfg, err := TLSConfig(cert, key, ca, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	served := func() *tls.Config {
		t.Helper()
		c, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil || c == nil || len(c.Certificates) != 1 || c.ClientAuth != tls.RequireAndVerifyClientCert {
			t.Fatalf("config %+v, %v", c, err)
		}
		return c
	}
	leaf := func(c *tls.Config) string { return string(c.Certificates[0].Certificate[0]) }
	c1 := served()

	install(second, cert) // the new certificate, the old key: refused
	if leaf(served()) != leaf(c1) {
		t.Error("a certificate without its key was served")
	}
	served()
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Errorf("%d error lines for one bad set:\n%s", n, logs)
	}
	install(second, key, ca)
	c2 := served()
	if leaf(c2) == leaf(c1) || c2.ClientCAs.Equal(c1.ClientCAs) {
		t.Error("the renewed certificate or CA is not served")
	}
	if !strings.Contains(logs.String(), "reloaded") {
		t.Errorf("no reload logged:\n%s", logs)
	}
}

// TestAdminTLSReloadFIFO: a certificate file replaced by a FIFO neither
// hangs the handshake that notices the change nor replaces the set in
// use: the FIFO is refused at once, logged, and the previous set served.
func TestAdminTLSReloadFIFO(t *testing.T) {
	old := tlsfiles.Recheck
	tlsfiles.Recheck = 0
	t.Cleanup(func() { tlsfiles.Recheck = old })
	p := testpki.New(t)
	logs := &testtools.SyncBuffer{}
	cfg, err := TLSConfig(p.ServerCert, p.ServerKey, "", slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo, p.ServerCert); err != nil {
		t.Fatal(err)
	}
	done := make(chan *tls.Config, 1)
	go func() {
		c, _ := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
		done <- c
	}()
	select {
	case c := <-done:
		if c == nil || len(c.Certificates) != 1 {
			t.Errorf("the previous set is not served: %+v", c)
		}
	case <-time.After(20 * time.Second):
		t.Error("the handshake blocked on the FIFO")
		if w, err := os.OpenFile(p.ServerCert, os.O_RDWR, 0); err == nil {
			w.Close()
		}
		<-done
	}
	if !strings.Contains(logs.String(), "FIFO") {
		t.Errorf("the FIFO is not logged:\n%s", logs)
	}
}
