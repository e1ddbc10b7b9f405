// Package serve is `vminit serve` without its flags: New opens the store
// a StoreConfig names (a directory, a cluster's Instance objects, or a
// store the program adds, as vminit-server adds etcd; see OpenStore), builds the guests' handler and listens on the metadata,
// metrics and admin addresses of Options, as hegel's backend.New chooses
// its backend; Run serves a set of listeners, reloads the store when asked
// (SIGHUP) and shuts down gracefully. cmd/internal/cli only checks flags
// and turns them into Options, so that the command, tests and in-process
// callers assemble the same server, and tests drive the loop with real
// listeners and a reload channel instead of signals.
//
// It is internal: the parts an embedder composes are public (the stores,
// mdserver.NewHandler, NewServer and NewLimiter, mdserver/admin); this
// package is the command's policy over them (its listener limits, its log
// lines, the garbage collector's setting).
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vminit/vminit/mdserver/registry"
)

// Listener is one address the server answers on.
type Listener struct {
	// Name says in logs what the listener serves: "metadata", "metrics",
	// "admin".
	Name     string
	Listener net.Listener
	// Server serves Listener (already wrapped by tls.NewListener for
	// HTTPS). Run wraps its Handler to count the requests in flight, so
	// the Handler must be set.
	Server *http.Server
}

// Config is what Run serves.
type Config struct {
	Listeners []Listener
	// Store is reloaded on every value received from Reload, when it
	// implements registry.Reloader; stores that follow their backend by
	// themselves (etcd) only log the request.
	Store registry.Source
	// Reload is vminit serve's SIGHUP channel; nil never reloads.
	Reload <-chan os.Signal
	// ShutdownTimeout bounds how long requests in flight may finish once
	// the context ends; those still running then are cut. Default 10 s.
	ShutdownTimeout time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// defaultShutdownTimeout is Config.ShutdownTimeout's default.
const defaultShutdownTimeout = 10 * time.Second

// Run serves every listener until ctx ends or one of them fails, then
// shuts them all down: the listeners close at once (new connections are
// refused), idle keep-alive connections are closed, and requests already
// accepted run to completion, for at most ShutdownTimeout. Requests still
// running then are cut, and how many is logged.
//
// Reloads run on Run's goroutine, one at a time; the store swaps its
// snapshot atomically, so requests never see a partial state. A failed
// reload keeps the previous snapshot.
//
// The error is the first listener failure, or nil after ctx ended. Run
// closes the listeners but not the store.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = defaultShutdownTimeout
	}
	// Counted in the handler rather than by connection state so that the
	// log after a cut names requests, which is what clients saw fail.
	var inflight atomic.Int64
	for _, l := range cfg.Listeners {
		if l.Server == nil || l.Server.Handler == nil {
			for _, l := range cfg.Listeners {
				l.Listener.Close()
			}
			return fmt.Errorf("serve: listener %s has no handler", l.Name)
		}
		next := l.Server.Handler
		l.Server.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inflight.Add(1)
			defer inflight.Add(-1)
			next.ServeHTTP(w, r)
		})
	}

	errc := make(chan error, len(cfg.Listeners))
	var wg sync.WaitGroup
	for _, l := range cfg.Listeners {
		log.Info("listening", "listener", l.Name, "address", l.Listener.Addr().String())
		wg.Go(func() {
			if err := l.Server.Serve(l.Listener); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s listener %s: %w", l.Name, l.Listener.Addr(), err)
			}
		})
	}

	var serveErr error
loop:
	for {
		select {
		case <-cfg.Reload:
			reload(cfg.Store, log)
		case serveErr = <-errc:
			log.Error("a listener failed; shutting down", "error", serveErr)
			break loop
		case <-ctx.Done():
			break loop
		}
	}

	log.Info("shutting down", "timeout", cfg.ShutdownTimeout, "in_flight", inflight.Load())
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	// Concurrently: one slow listener must not use up the others' time.
	var timedOut atomic.Bool
	var sw sync.WaitGroup
	for _, l := range cfg.Listeners {
		sw.Go(func() {
			if err := l.Server.Shutdown(sctx); err != nil {
				timedOut.Store(true)
			}
		})
	}
	sw.Wait()
	if timedOut.Load() {
		log.Warn("shutdown timeout reached; cutting the requests still running",
			"cut", inflight.Load(), "timeout", cfg.ShutdownTimeout)
		for _, l := range cfg.Listeners {
			l.Server.Close()
		}
	}
	wg.Wait()
	log.Info("stopped", "duration", time.Since(start))
	return serveErr
}

func reload(store registry.Source, log *slog.Logger) {
	r, ok := store.(registry.Reloader)
	if !ok {
		log.Info("reload requested: this store follows its backend by itself; nothing to reload")
		return
	}
	start := time.Now()
	if err := r.Reload(); err != nil {
		log.Error("reload failed; still serving the previous snapshot", "error", err)
		return
	}
	log.Info("reloaded", "instances", store.Snapshot().Len(), "duration", time.Since(start))
}
