// Package httpserver makes the http.Servers of vminit's listeners (the
// guests' metadata, the admin API, metrics) with the limits they share, so
// that a listener never goes out with net/http's defaults (no timeouts at
// all: a client that sends its headers a byte a minute holds a connection
// forever).
package httpserver

import (
	"net/http"
	"time"
)

// Limits every listener shares.
const (
	// ReadHeaderTimeout bounds how long a client may take to send its
	// request's headers.
	ReadHeaderTimeout = 5 * time.Second
	// IdleTimeout is how long a keep-alive connection is kept waiting for
	// its next request.
	IdleTimeout = 60 * time.Second
	// MaxHeaderBytes bounds a request's headers: no client of these
	// servers needs more than a token and a few short headers.
	MaxHeaderBytes = 16 << 10
)

// New returns an http.Server for h with the shared limits, a whole
// request (headers and body) read within read, and its answer written
// within write, which depend on what the listener carries.
func New(h http.Handler, read, write time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       read,
		WriteTimeout:      write,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}
