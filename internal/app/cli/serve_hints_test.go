package cli

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestEtcdHint(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("listing: deadline; TLS handshake: %w", x509.UnknownAuthorityError{}):         "--etcd-ca",
		errors.New("listing: deadline; https://e:2379: TLS: remote error: tls: bad certificate"): "--etcd-cert and --etcd-key",
		errors.New("listing: etcdserver: authentication failed, invalid user ID or password"):    "--etcd-password-file",
		errors.New("listing: context deadline exceeded; http://e:2379: connection refused"):      "",
	} {
		got := etcdHint(err).Error()
		if !strings.HasPrefix(got, err.Error()) || want != "" && !strings.Contains(got, want) || want == "" && got != err.Error() {
			t.Errorf("etcdHint(%v) = %q, want a hint naming %q", err, got, want)
		}
	}
}

func TestEtcdEndpointSchemes(t *testing.T) {
	for _, eps := range [][]string{{"https://a:2379", "http://b:2379"}, {"http://a:2379", "https://b:2379"}} {
		_, err := etcdConfig(serveFlags{etcdEndpoints: eps}, nil)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "same scheme") {
			t.Errorf("%v: %v", eps, err)
		}
	}
	if cfg, err := etcdConfig(serveFlags{etcdEndpoints: []string{"https://a:2379", "https://b:2379"}}, nil); err != nil || cfg.TLS == nil {
		t.Errorf("https only: %v %v", cfg.TLS, err)
	}
}
