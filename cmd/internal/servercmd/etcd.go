package servercmd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/vminit/vminit/cmd/internal/cmdkit"
	"github.com/vminit/vminit/cmd/internal/serve"
	"github.com/vminit/vminit/internal/lib/secretfile"
	"github.com/vminit/vminit/internal/lib/tlsfiles"
	"github.com/vminit/vminit/mdserver/etcdstore"
	"github.com/vminit/vminit/mdserver/registry"
)

// usagef is the shared usage error, under the name this file had in
// cmd/internal/cli.
var usagef = cmdkit.Usagef

// etcdFlags are the --etcd-* flags: the servekit.StoreFlags of the etcd store.
type etcdFlags struct {
	endpoints []string
	prefix    string
	ca        string
	cert      string
	key       string
	user      string
	passFile  string
}

func (f *etcdFlags) Register(fl *pflag.FlagSet) {
	fl.StringSliceVar(&f.endpoints, "etcd-endpoints", nil, "etcd client URLs (instead of --instances)")
	fl.StringVar(&f.prefix, "etcd-prefix", etcdstore.DefaultPrefix, "etcd key prefix of the instances")
	fl.StringVar(&f.ca, "etcd-ca", "", "PEM CA bundle that signed etcd's certificate (https:// endpoints; default: the system's)")
	fl.StringVar(&f.cert, "etcd-cert", "", "PEM client certificate for etcd's --client-cert-auth (with --etcd-key)")
	fl.StringVar(&f.key, "etcd-key", "", "PEM private key of --etcd-cert")
	fl.StringVar(&f.user, "etcd-username", "", "etcd user (etcd's own authentication; with --etcd-password-file)")
	fl.StringVar(&f.passFile, "etcd-password-file", "", "file holding the password of --etcd-username")
}

func (f *etcdFlags) Chooser() (string, bool) { return "--etcd-endpoints", len(f.endpoints) > 0 }

func (f *etcdFlags) Files() (files, secret map[string]string) {
	return map[string]string{"--etcd-ca": f.ca, "--etcd-cert": f.cert, "--etcd-key": f.key, "--etcd-password-file": f.passFile},
		map[string]string{"--etcd-key": f.key, "--etcd-password-file": f.passFile}
}

func (f *etcdFlags) Store(logger *slog.Logger) (serve.OpenFunc, error) {
	cfg, err := f.config(logger)
	if err != nil || len(f.endpoints) == 0 {
		return nil, err
	}
	return func(ctx context.Context, checks registry.Checks, logger *slog.Logger) (serve.Store, error) {
		cfg.Logger, cfg.Checks = logger, checks
		return etcdstore.Open(ctx, cfg)
	}, nil
}

// config turns the flags into a store configuration; logger (nil:
// slog.Default()) receives client certificate reloads.
func (f *etcdFlags) config(logger *slog.Logger) (etcdstore.Config, error) {
	cfg := etcdstore.Config{Endpoints: f.endpoints, Prefix: f.prefix, Username: f.user}
	if len(f.endpoints) == 0 {
		if f.ca != "" || f.cert != "" || f.key != "" || f.user != "" || f.passFile != "" {
			return cfg, usagef("the --etcd-* flags need --etcd-endpoints")
		}
		return cfg, nil
	}
	if (f.cert == "") != (f.key == "") {
		return cfg, usagef("--etcd-cert and --etcd-key go together")
	}
	if (f.user == "") != (f.passFile == "") {
		return cfg, usagef("--etcd-username and --etcd-password-file go together (a password is never given on the command line)")
	}
	tlsWanted, err := f.tlsWanted()
	if err != nil {
		return cfg, err
	}
	if tlsWanted {
		if cfg.TLS, err = f.tlsConfig(logger); err != nil {
			return cfg, err
		}
	}
	if f.passFile != "" {
		if cfg.Password, err = secretfile.Password(f.passFile); err != nil {
			return cfg, usagef("--etcd-password-file: %v", err)
		}
	}
	return cfg, nil
}

// tlsWanted checks the endpoints' schemes against the TLS flags and
// reports whether the client speaks TLS.
func (f *etcdFlags) tlsWanted() (bool, error) {
	var secure, plain []string
	for _, ep := range f.endpoints {
		if strings.HasPrefix(ep, "https://") {
			secure = append(secure, ep)
		} else {
			plain = append(plain, ep)
		}
	}
	// The client uses one TLS setting for every endpoint.
	if len(secure) > 0 && len(plain) > 0 {
		return false, usagef("--etcd-endpoints: %s is https:// but %s is not; give every endpoint the same scheme", secure[0], plain[0])
	}
	tlsFlags := f.ca != "" || f.cert != ""
	if tlsFlags && len(plain) > 0 {
		return false, usagef("--etcd-endpoints %s: --etcd-ca and --etcd-cert need https:// endpoints", plain[0])
	}
	return tlsFlags || len(secure) > 0, nil
}

// tlsConfig is the client's TLS: --etcd-ca's roots and --etcd-cert's pair.
func (f *etcdFlags) tlsConfig(logger *slog.Logger) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.ca != "" {
		var err error
		if c.RootCAs, err = tlsfiles.LoadCertPool(f.ca); err != nil {
			return nil, usagef("--etcd-ca: %v", err)
		}
	}
	if f.cert != "" {
		// Re-read when renewed: the client presents the new pair from
		// its next connection on.
		w, err := tlsfiles.Watch("etcd client certificate", logger, func() (*tls.Certificate, error) {
			cert, err := tlsfiles.LoadKeyPair(f.cert, f.key)
			return &cert, err
		}, f.cert, f.key)
		if err != nil {
			return nil, usagef("--etcd-cert/--etcd-key: %v", err)
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return w.Get(), nil }
	}
	return c, nil
}

// Hint names the flags that fix the usual reasons etcd refuses a replica.
func (f *etcdFlags) Hint(err error) error {
	msg := err.Error()
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%w\n(etcd's certificate is not signed by a CA vminit trusts: give that CA with --etcd-ca)", err)
	case strings.Contains(msg, "bad certificate") || strings.Contains(msg, "certificate required") ||
		strings.Contains(msg, "unknown certificate authority") || strings.Contains(msg, "require a client certificate"):
		return fmt.Errorf("%w\n(etcd wants a client certificate signed by its --trusted-ca-file: give --etcd-cert and --etcd-key)", err)
	case strings.Contains(msg, "authentication failed") || strings.Contains(msg, "user name is empty") || strings.Contains(msg, "permission denied"):
		return fmt.Errorf("%w\n(check --etcd-username and --etcd-password-file, and the user's read access to --etcd-prefix)", err)
	}
	return err
}
