package etcdstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/etcdtest"
	"github.com/vminit/vminit/internal/testing/testpki"
)

// TestTLSAndAuth opens stores against a real etcd that requires TLS and
// client certificates, then etcd users: the store loads when given what
// etcd asks for, and otherwise fails saying what was refused rather than
// only that the request timed out.
func TestTLSAndAuth(t *testing.T) {
	pki := testpki.New(t)
	e := etcdtest.Start(t, pki)
	ctx := context.Background()
	if _, err := e.Client().Put(ctx, DefaultPrefix+"vm", doc("vm", "10.5.0.1", "over-tls")); err != nil {
		t.Fatal(err)
	}
	full := e.TLS // trusts the CA, presents the client certificate
	noCert := full.Clone()
	noCert.Certificates = nil
	noCA := full.Clone()
	noCA.RootCAs = x509.NewCertPool()
	tryOpen := func(tc *tls.Config, user, pass string) (*Store, error) {
		s, err := Open(ctx, Config{Endpoints: []string{e.ClientURL}, TLS: tc, Username: user, Password: pass,
			DialTimeout: 2 * time.Second, RequestTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	}

	s, err := tryOpen(full, "", "")
	if err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	if hostname(s, "vm") != "over-tls" {
		t.Errorf("loaded over TLS: %v", s.Snapshot().Names())
	}
	_, err = tryOpen(noCert, "", "")
	t.Logf("without a client certificate: %v", err)
	if err == nil || !strings.Contains(err.Error(), "certificate required") && !strings.Contains(err.Error(), "bad certificate") {
		t.Errorf("without a client certificate: %v", err)
	}
	_, err = tryOpen(noCA, "", "")
	t.Logf("without the CA: %v", err)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("without the CA: %v, want x509.UnknownAuthorityError", err)
	}

	// etcd's own users, on top of TLS.
	cli := e.Client()
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "root-password-123"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	s, err = tryOpen(full, "root", "root-password-123")
	if err != nil {
		t.Fatalf("with a user and its password: %v", err)
	}
	if hostname(s, "vm") != "over-tls" {
		t.Errorf("loaded as root: %v", s.Snapshot().Names())
	}
	if _, err := tryOpen(full, "root", "wrong-password"); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("with a wrong password: %v", err)
	}
}
