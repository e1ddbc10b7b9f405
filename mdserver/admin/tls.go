package admin

import (
	"crypto/tls"
	"log/slog"

	"github.com/vminit/vminit/internal/lib/secretfile"
	"github.com/vminit/vminit/internal/lib/tlsfiles"
)

// TLSConfig is the listener configuration for serving the admin API
// over TLS: a certificate and key (PEM files), TLS 1.2 or newer, and, when
// clientCAFile is set, client certificates required and verified against
// that CA bundle (mutual TLS on top of the bearer token). Use it with
// tls.NewListener, or as http.Server.TLSConfig with ServeTLS(l, "", "").
//
// The files are read again when they change, so that a renewed
// certificate is served without a restart: at a handshake, at most once
// per second, they are stat'ed, and a change is loaded for that handshake
// and the next ones. A set that does not load (a key not yet written
// beside its new certificate) keeps the previous one in use; log (nil:
// slog.Default()) gets one line per failing set, and one when a new set is
// in use.
func TLSConfig(certFile, keyFile, clientCAFile string, log *slog.Logger) (*tls.Config, error) {
	w, err := tlsfiles.Watch("admin TLS", log, func() (*tls.Config, error) {
		return loadTLS(certFile, keyFile, clientCAFile)
	}, certFile, keyFile, clientCAFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return w.Get(), nil
	}}, nil
}

func loadTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tlsfiles.LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if clientCAFile != "" {
		pool, err := tlsfiles.LoadCertPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// MinTokenBytes is the shortest admin token WatchToken takes.
const MinTokenBytes = 16

// WatchToken reads the admin token from path (at least MinTokenBytes,
// without the white space around it) and returns Options.TokenFunc: the
// token in force, read again when the file changes, as TLSConfig's files
// are (stat'ed at most once a second; a file that no longer loads keeps
// the previous token, logged once). A rotated token then refuses the old
// one at the next request and ends every web session of it, without a
// restart.
func WatchToken(path string, log *slog.Logger) (func() string, error) {
	w, err := tlsfiles.Watch("admin token", log, func() (string, error) {
		return secretfile.Key(path, "admin token", MinTokenBytes)
	}, path)
	if err != nil {
		return nil, err
	}
	return w.Get, nil
}
