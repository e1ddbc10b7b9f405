package mdserver

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// AdminTLSConfig is the listener configuration for serving the admin API
// over TLS: a certificate and key (PEM files), TLS 1.2 or newer, and, when
// clientCAFile is set, client certificates required and verified against
// that CA bundle (mutual TLS on top of the bearer token). Use it with
// tls.NewListener, or as http.Server.TLSConfig with ServeTLS(l, "", "").
//
// The files are read again when they change, so that a renewed
// certificate (cert-manager rewriting a Secret volume, certbot's deploy
// hook) is served without a restart: at a handshake, at most once per
// second, the files are stat'ed, and a change is loaded for that
// handshake and the next ones. A set that does not load (a key not yet
// written beside its new certificate) keeps the previous one in use; log
// (nil: slog.Default()) gets one line per failing set, and one when a new
// set is in use.
func AdminTLSConfig(certFile, keyFile, clientCAFile string, log *slog.Logger) (*tls.Config, error) {
	if log == nil {
		log = slog.Default()
	}
	f := &tlsFiles{paths: []string{certFile, keyFile, clientCAFile}, log: log}
	cfg, err := f.load()
	if err != nil {
		return nil, err
	}
	f.cur, f.stamps, f.checked = cfg, f.stat(), time.Now()
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: f.get}, nil
}

// tlsRecheck is how often at most a handshake stats the files (a variable
// for the tests).
var tlsRecheck = time.Second

// tlsFiles is the certificate, key and client CA files, and what was last
// loaded from them.
type tlsFiles struct {
	paths []string // certificate, key, client CA ("" if none)
	log   *slog.Logger

	mu      sync.Mutex
	cur     *tls.Config
	stamps  []os.FileInfo // of cur's files; nil entries for missing files
	checked time.Time
	failed  string // the last load error logged
}

func (f *tlsFiles) get(*tls.ClientHelloInfo) (*tls.Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) < tlsRecheck {
		return f.cur, nil
	}
	f.checked = time.Now()
	stamps := f.stat()
	if sameFiles(stamps, f.stamps) {
		return f.cur, nil
	}
	cfg, err := f.load()
	if err != nil {
		if msg := err.Error(); msg != f.failed {
			f.failed = msg
			f.log.Error("admin TLS: the changed certificate files do not load; still serving the previous ones", "err", err)
		}
		return f.cur, nil
	}
	f.cur, f.stamps, f.failed = cfg, stamps, ""
	f.log.Info("admin TLS: certificate files reloaded", "cert", f.paths[0], "client_ca", f.paths[2])
	return cfg, nil
}

func (f *tlsFiles) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.paths[0], f.paths[1])
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if ca := f.paths[2]; ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificates", ca)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// stat follows symbolic links, as Kubernetes Secret volumes are links
// swapped to a new directory on every update.
func (f *tlsFiles) stat() []os.FileInfo {
	out := make([]os.FileInfo, len(f.paths))
	for i, p := range f.paths {
		if p != "" {
			out[i], _ = os.Stat(p)
		}
	}
	return out
}

func sameFiles(a, b []os.FileInfo) bool {
	for i := range a {
		switch {
		case a[i] == nil || b[i] == nil:
			if a[i] != b[i] {
				return false
			}
		case !os.SameFile(a[i], b[i]) || a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()):
			return false
		}
	}
	return true
}
