// Package tlsfiles keeps TLS material read from files current, so that a
// renewed certificate (cert-manager rewriting a Secret volume, certbot's
// deploy hook) is used without restarting vminit serve; the admin token
// file is kept current the same way (Watched is generic), so that a
// rotated token is taken too. The material is asked for at each
// handshake (each request, for the token); the files are stat'ed then, at most once
// per Recheck, and read again when they changed. A set that does not load
// (a key not yet written beside its new certificate) keeps the previous
// material in use until it does, and is logged once.
package tlsfiles

import (
	"log/slog"
	"os"
	"sync"
	"time"
)

// Recheck is how often at most the files are stat'ed (a variable for the
// tests).
var Recheck = time.Second

// Watched is material of type T (a *tls.Config, a *tls.Certificate) loaded
// from files.
type Watched[T any] struct {
	what  string
	paths []string
	load  func() (T, error)
	log   *slog.Logger

	mu      sync.Mutex
	cur     T
	stamps  []os.FileInfo // of cur's files; nil for a missing or "" path
	checked time.Time
	failed  string // the last load error logged
}

// Watch loads the material once (its error is returned as is) and keeps
// it current. what names it in log lines ("admin TLS"); paths are the
// files load reads ("" entries are ignored).
func Watch[T any](what string, log *slog.Logger, load func() (T, error), paths ...string) (*Watched[T], error) {
	w := &Watched[T]{what: what, paths: paths, load: load, log: log}
	if w.log == nil {
		w.log = slog.Default()
	}
	stamps := w.stat()
	cur, err := load()
	if err != nil {
		return nil, err
	}
	w.cur, w.stamps, w.checked = cur, stamps, time.Now()
	return w, nil
}

// Get returns the current material, reloading it first when the files
// changed.
func (w *Watched[T]) Get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.checked) < Recheck {
		return w.cur
	}
	w.checked = time.Now()
	stamps := w.stat()
	if same(stamps, w.stamps) {
		return w.cur
	}
	cur, err := w.load()
	if err != nil {
		if msg := err.Error(); msg != w.failed {
			w.failed = msg
			w.log.Error(w.what+": the changed files do not load; still using the previous ones", "err", err)
		}
		return w.cur
	}
	w.cur, w.stamps, w.failed = cur, stamps, ""
	w.log.Info(w.what+": files reloaded", "files", w.paths)
	return cur
}

// stat follows symbolic links: Kubernetes Secret volumes are links swapped
// to a new directory on every update.
func (w *Watched[T]) stat() []os.FileInfo {
	out := make([]os.FileInfo, len(w.paths))
	for i, p := range w.paths {
		if p != "" {
			out[i], _ = os.Stat(p)
		}
	}
	return out
}

func same(a, b []os.FileInfo) bool {
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
