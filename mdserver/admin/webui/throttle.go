package webui

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// The login form is the one place the admin token can be guessed without
// the bearer header's 401s being the whole story, so wrong tokens are
// throttled per source: a source's first freeMisses wrong tokens are
// answered at once, then each next try waits twice as long as the last
// (from 1 s, at most maxDelay) and is refused with 429 before its token
// is looked at; a quiet forgetAfter forgets the source. Sources are
// addresses, IPv6 ones by their /64 (what one host is usually given).
// The log gets a source's first miss, the moment it is throttled, and a
// count of the rest when it is forgotten: not a line per guess.
const (
	freeMisses   = 5
	firstDelay   = time.Second
	maxDelay     = 5 * time.Minute
	forgetAfter  = 15 * time.Minute
	maxSources   = 16384 // past it, new sources share one record
	overflowNote = "many sources"
)

// loginThrottle counts wrong tokens per source.
type loginThrottle struct {
	now func() time.Time
	log *slog.Logger

	mu      sync.Mutex
	sources map[netip.Prefix]*misses
}

// misses is one source's wrong tokens since it was last forgotten.
type misses struct {
	remote  string    // the first address seen, for the log
	n       int       // wrong tokens
	last    time.Time // of the last wrong token
	refused int       // tries refused while throttled
}

func newLoginThrottle(now func() time.Time, log *slog.Logger) *loginThrottle {
	return &loginThrottle{now: now, log: log, sources: map[netip.Prefix]*misses{}}
}

// sourceOf is the source a request's wrong tokens count against.
func sourceOf(r *http.Request) netip.Prefix {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

// delay is how long after its last miss a source with n misses waits.
func delay(n int) time.Duration {
	if n < freeMisses {
		return 0
	}
	d := firstDelay
	for i := freeMisses; i < n && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}

// wait returns how long src must still wait before its token is looked
// at (0: now), counting a try it refuses.
func (t *loginThrottle) wait(src netip.Prefix) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.lookup(src, t.now())
	if m == nil {
		return 0
	}
	w := m.last.Add(delay(m.n)).Sub(t.now())
	if w <= 0 {
		return 0
	}
	m.refused++
	return w
}

// miss counts a wrong token from src (remote is its address as seen).
func (t *loginThrottle) miss(src netip.Prefix, remote string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	m := t.lookup(src, now)
	if m == nil {
		if len(t.sources) >= maxSources {
			t.sweep(now)
		}
		if len(t.sources) >= maxSources {
			src, remote = netip.Prefix{}, overflowNote
			m = t.sources[src]
		}
		if m == nil {
			m = &misses{remote: remote}
			t.sources[src] = m
		}
	}
	m.n++
	m.last = now
	switch m.n {
	case 1:
		t.log.Warn("webui: login refused: wrong token", "remote", remote)
	case freeMisses:
		t.log.Warn("webui: login throttled: wrong tokens in a row; further tries are refused with 429, each waiting twice as long (the rest are counted, not logged)",
			"remote", m.remote, "misses", m.n, "maxDelay", maxDelay)
	}
}

// lookup returns src's record, forgetting it (and logging its count)
// when it has been quiet for forgetAfter. t.mu is held.
func (t *loginThrottle) lookup(src netip.Prefix, now time.Time) *misses {
	m, ok := t.sources[src]
	if !ok && len(t.sources) >= maxSources {
		src = netip.Prefix{} // the sources that came when the table was full
		m = t.sources[src]
	}
	if m != nil && now.Sub(m.last) >= forgetAfter+delay(m.n) {
		t.forget(src, m)
		return nil
	}
	return m
}

// sweep forgets every quiet source. t.mu is held.
func (t *loginThrottle) sweep(now time.Time) {
	for src, m := range t.sources {
		if now.Sub(m.last) >= forgetAfter+delay(m.n) {
			t.forget(src, m)
		}
	}
}

func (t *loginThrottle) forget(src netip.Prefix, m *misses) {
	delete(t.sources, src)
	if m.n > 1 || m.refused > 0 {
		t.log.Info("webui: wrong tokens from a source that has gone quiet", "remote", m.remote, "misses", m.n, "refusedWhileThrottled", m.refused)
	}
}
