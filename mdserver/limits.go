package mdserver

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Limits bound the connections a listener's clients may hold open, so that
// one client cannot starve the others: a VM that opens thousands of
// keep-alive connections (or a process that only connects) would otherwise
// use up the server's descriptors, and every other VM, the admin API and
// the metrics would be refused with them. The metadata listener's guests
// share one Limiter; the admin and metrics listeners have their own, so
// that the guests' pool never takes their descriptors.
//
// A connection beyond a limit is closed as soon as it is accepted (a
// reset, which leaves no TIME_WAIT behind). When Total is reached, the
// connection idle the longest is closed to make room for the newcomer
// before the newcomer is refused, and for an instance's (or a trusted
// proxy's) newcomer, else the oldest connection of an unknown source, idle
// or not; beyond three quarters of Total, idle keep-alive connections are
// closed once idle for PressureIdle instead of the server's IdleTimeout.
//
// A connection whose last response the handler has written (the client
// asked to close, or the handler said so) is closing: the client may
// already have read that response and connected again, so it no longer
// holds a place of its source's, only of Total, until it is closed. What
// a source holds, closing or not, stays under twice its limit.
//
// Sources no instance owns are bounded as a class too (UnknownTotal):
// thousands of such addresses, each within UnknownPerSource, holding
// connections that are never idle, would otherwise fill Total and lock
// every VM out.
type Limits struct {
	// PerSource is how many connections one source address may hold;
	// default DefaultPerSource. Exempt sources are bound by Total only.
	PerSource int
	// UnknownPerSource is PerSource for a source Known says no instance
	// has (it gets 404s, and a connection is closed after each);
	// default 4.
	UnknownPerSource int
	// UnknownTotal is how many connections the sources Known says no
	// instance has may hold together; default Total/8.
	UnknownTotal int
	// Total is how many connections the clients may hold together;
	// default DefaultTotal().
	Total int
	// PressureIdle is how long a keep-alive connection may stay idle
	// under pressure; default 1 s.
	PressureIdle time.Duration
	// Exempt are the sources PerSource does not apply to: trusted proxies,
	// which carry the requests of many VMs.
	Exempt []netip.Prefix
	// Known, when set, reports whether a source address is an instance's
	// (Handler.Knows).
	Known func(netip.Addr) bool
	// Metrics, when set, counts connections.
	Metrics *Metrics
}

// Defaults of Limits.
const (
	DefaultPerSource = 32
	// reservedFDs are the descriptors DefaultTotal leaves to everything
	// but the clients: the admin and metrics listeners, the store, logs.
	reservedFDs = 1024
	maxTotal    = 16384
)

// DefaultTotal is the default of Limits.Total: 16,384 connections, or
// fewer when the process may open fewer than 17,408 descriptors, leaving
// at least 1,024 (and a quarter) to the rest of the server. An idle
// connection holds about 10 KB of memory.
func DefaultTotal() int {
	cur, ok := openFileLimit()
	if !ok || cur > 1<<30 {
		return maxTotal
	}
	n := int(cur)
	return max(64, min(maxTotal, n-max(reservedFDs, n/4)))
}

// Limiter enforces Limits on the listeners it wraps.
type Limiter struct {
	l Limits

	mu      sync.Mutex
	bySrc   map[netip.Addr]int
	closing map[netip.Addr]int // of bySrc, those closing
	total   int
	idle    list.List // of *limitedConn, longest idle first
	unknown list.List // of *limitedConn from unknown sources, oldest first
}

// NewLimiter returns a Limiter; zero fields of l take their defaults.
func NewLimiter(l Limits) *Limiter {
	if l.PerSource <= 0 {
		l.PerSource = DefaultPerSource
	}
	if l.UnknownPerSource <= 0 {
		l.UnknownPerSource = 4
	}
	if l.Total <= 0 {
		l.Total = DefaultTotal()
	}
	if l.UnknownTotal <= 0 {
		l.UnknownTotal = max(1, l.Total/8)
	}
	if l.PressureIdle <= 0 {
		l.PressureIdle = time.Second
	}
	return &Limiter{l: l, bySrc: map[netip.Addr]int{}, closing: map[netip.Addr]int{}}
}

// Limit wraps ln so that the connections it accepts are bounded, sets
// srv.ConnState (calling any ConnState already set) to follow which are
// idle, and wraps srv.ConnContext and srv.Handler to learn which are
// closing. Set srv's Handler first; serve srv on the listener returned.
func (lim *Limiter) Limit(srv *http.Server, ln net.Listener) net.Listener {
	next := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if lc, ok := limitedOf(c); ok {
			lim.state(lc, s)
		}
		if next != nil {
			next(c, s)
		}
	}
	nextCtx := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if nextCtx != nil {
			ctx = nextCtx(ctx, c)
		}
		if lc, ok := limitedOf(c); ok {
			ctx = context.WithValue(ctx, limitedConnKey{}, lc)
		}
		return ctx
	}
	srv.Handler = lim.followClosing(srv.Handler)
	return &limitedListener{Listener: ln, lim: lim}
}

type limitedConnKey struct{}

// limitedOf finds the Limiter's connection in c, which net/http's hooks
// get as the server's listener made it: wrapped by TLS (tls.NewListener
// over Limit's listener, as vminit serve stacks them, so that a handshake
// counts too) or by anything else that gives its connection up the same
// way, with NetConn.
func limitedOf(c net.Conn) (*limitedConn, bool) {
	for {
		switch v := c.(type) {
		case *limitedConn:
			return v, true
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil, false
		}
	}
}

// followClosing wraps h (nil: http.DefaultServeMux, as net/http serves)
// so that a connection is marked closing once the handler has answered
// its last request: before net/http writes the response out, so before
// the client can have read it.
func (lim *Limiter) followClosing(h http.Handler) http.Handler {
	if h == nil {
		h = http.DefaultServeMux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if !r.Close && !closes(w.Header()) {
			return
		}
		if lc, ok := r.Context().Value(limitedConnKey{}).(*limitedConn); ok {
			lim.markClosing(lc)
		}
	})
}

// closes reports whether a response header says "Connection: close".
func closes(h http.Header) bool {
	for _, v := range h["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "close") {
				return true
			}
		}
	}
	return false
}

func (lim *Limiter) markClosing(c *limitedConn) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if !c.released && !c.closing {
		c.closing = true
		lim.closing[c.src]++
	}
}

// fullLocked reports whether src may open no more connections: it holds
// limit that are not closing, or twice limit in all.
func (lim *Limiter) fullLocked(src netip.Addr, limit int) bool {
	n := lim.bySrc[src]
	return n-lim.closing[src] >= limit || n >= 2*limit
}

// Open returns how many connections are open, and how many the source
// holds.
func (lim *Limiter) Open(src netip.Addr) (total, fromSrc int) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	return lim.total, lim.bySrc[src.Unmap()]
}

type limitedListener struct {
	net.Listener
	lim *Limiter
}

func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := ll.lim.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// Refusal reasons, as metrics label them.
const (
	refusedPerSource = iota
	refusedUnknown
	refusedTotal
	refusedReasons
)

var refusedNames = [refusedReasons]string{"per_source", "unknown_source", "total"}

// admit counts c in, or closes it and returns nil.
func (lim *Limiter) admit(c net.Conn) *limitedConn {
	src := sourceOf(c)
	exempt := false
	for _, p := range lim.l.Exempt {
		if p.Contains(src) {
			exempt = true
			break
		}
	}
	unknown := !exempt && lim.l.Known != nil && !lim.l.Known(src)
	perSource := lim.l.PerSource
	if unknown {
		perSource = lim.l.UnknownPerSource
	}
	var evict []*limitedConn
	reason := -1
	lim.mu.Lock()
	switch {
	case unknown && (lim.fullLocked(src, perSource) || lim.unknown.Len() >= lim.l.UnknownTotal):
		reason = refusedUnknown
	case !exempt && lim.fullLocked(src, perSource):
		reason = refusedPerSource
	default:
		evict = lim.pressureLocked(!unknown)
		if lim.total >= lim.l.Total {
			reason = refusedTotal
		}
	}
	var lc *limitedConn
	if reason < 0 {
		lim.bySrc[src]++
		lim.total++
		lc = &limitedConn{Conn: c, lim: lim, src: src}
		if unknown {
			lc.unknownElem = lim.unknown.PushBack(lc)
		}
	}
	lim.mu.Unlock()
	for _, e := range evict {
		e.Conn.Close() // counted out already; the server's Close of e finds it released
	}
	if m := lim.l.Metrics; m != nil {
		m.connsEvicted.Add(uint64(len(evict)))
		if reason >= 0 {
			m.connsRefused[reason].Add(1)
		}
	}
	if reason >= 0 {
		reset(c)
		return nil
	}
	if m := lim.l.Metrics; m != nil {
		m.conns.Add(1)
	}
	return lc
}

// pressureLocked counts out, for closing, the connections pressure
// demands: every one idle longer than PressureIdle beyond three quarters
// of Total, and at Total the longest idle (room for the newcomer) or, for
// a known newcomer, the oldest of an unknown source.
func (lim *Limiter) pressureLocked(known bool) []*limitedConn {
	if lim.total < lim.l.Total*3/4 {
		return nil
	}
	var out []*limitedConn
	cutoff := time.Now().Add(-lim.l.PressureIdle)
	for e := lim.idle.Front(); e != nil; e = lim.idle.Front() {
		c := e.Value.(*limitedConn)
		if lim.total < lim.l.Total && c.idleSince.After(cutoff) {
			break
		}
		lim.releaseLocked(c)
		out = append(out, c)
	}
	if e := lim.unknown.Front(); lim.total >= lim.l.Total && known && e != nil {
		c := e.Value.(*limitedConn)
		lim.releaseLocked(c)
		out = append(out, c)
	}
	return out
}

// state follows a connection between active and idle.
func (lim *Limiter) state(c *limitedConn, s http.ConnState) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if c.released {
		return
	}
	switch s {
	case http.StateIdle:
		if c.elem == nil {
			c.idleSince = time.Now()
			c.elem = lim.idle.PushBack(c)
		}
	default:
		if c.elem != nil {
			lim.idle.Remove(c.elem)
			c.elem = nil
		}
	}
}

// release counts a closed connection out (once).
func (lim *Limiter) release(c *limitedConn) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	lim.releaseLocked(c)
}

func (lim *Limiter) releaseLocked(c *limitedConn) {
	if c.released {
		return
	}
	c.released = true
	if c.elem != nil {
		lim.idle.Remove(c.elem)
		c.elem = nil
	}
	if c.unknownElem != nil {
		lim.unknown.Remove(c.unknownElem)
		c.unknownElem = nil
	}
	lim.total--
	decrement(lim.bySrc, c.src)
	if c.closing {
		decrement(lim.closing, c.src)
	}
	if m := lim.l.Metrics; m != nil {
		m.conns.Add(-1)
	}
}

// decrement counts src out of m, deleting it at zero.
func decrement(m map[netip.Addr]int, src netip.Addr) {
	if n := m[src] - 1; n > 0 {
		m[src] = n
	} else {
		delete(m, src)
	}
}

// limitedConn is a connection a Limiter counts until it is closed.
type limitedConn struct {
	net.Conn
	lim *Limiter
	src netip.Addr
	// Under lim.mu:
	elem        *list.Element // in lim.idle while idle
	unknownElem *list.Element // in lim.unknown for an unknown source
	idleSince   time.Time
	closing     bool // its last response is written (Limiter.followClosing)
	released    bool
}

// NetConn is the connection c counts (for the IMDSv2 hop limit, which is
// set on the socket).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

// Close counts c out before it closes the socket: the peer sees the close
// as soon as the socket is closed and may connect again at once (a crawl
// reading each response to the server's close), and that newcomer must
// not find c still holding the source's place.
func (c *limitedConn) Close() error {
	c.lim.release(c)
	return c.Conn.Close()
}

// sourceOf is the connection's remote address, unmapped.
func sourceOf(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	return ap.Addr().Unmap()
}

// reset closes a refused connection with a TCP reset: no TIME_WAIT is
// left for each of a flood's connections.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
