package mdserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testpki"
)

// limitedServer serves h with NewServer's settings on a listener bounded
// by lim, and counts the open connections of each source as the server
// sees them (independently of the limiter).
func limitedServer(t *testing.T, h *Handler, lim *Limiter) (addr string, open func(src string) int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h)
	var mu sync.Mutex
	conns := map[string]int{}
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		src := sourceOf(c).String()
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			conns[src]++
		case http.StateClosed, http.StateHijacked:
			conns[src]--
		}
	}
	if lim != nil {
		ln = lim.Limit(srv, ln)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), func(src string) int {
		mu.Lock()
		defer mu.Unlock()
		return conns[src]
	}
}

// flood keeps n keep-alive connections from src busy until stop closes:
// each sends requests as fast as they are answered and, with reconnect,
// connects again when the server closes or refuses it. It returns how many
// requests were answered and how many connections were made.
func flood(addr, src string, n int, reconnect bool, stop <-chan struct{}) (answered, dials *atomic.Int64) {
	answered, dials = new(atomic.Int64), new(atomic.Int64)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	one := func() {
		dials.Add(1)
		c, err := d.Dial("tcp", addr)
		if err != nil {
			time.Sleep(10 * time.Millisecond) // out of ports for a moment
			return
		}
		defer c.Close()
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-stop:
				c.Close()
			case <-done:
			}
		}()
		br := bufio.NewReader(c)
		for {
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, "GET /latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				return
			}
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			answered.Add(1)
			if res.Close {
				return
			}
		}
	}
	for range n {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				one()
				if !reconnect {
					return
				}
			}
		}()
	}
	return answered, dials
}

// latencies fetches the victim's instance-id n times, a new connection
// each time as cloud-init's first requests make, and returns each
// request's latency; every request must succeed.
func latencies(t *testing.T, addr, src string, n int) []time.Duration {
	t.Helper()
	c := clientFrom(src)
	var out []time.Duration
	for range n {
		start := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+addr+"/latest/meta-data/instance-id", nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("the victim's request failed: %v", err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || len(b) == 0 {
			t.Fatalf("the victim got %d %q", res.StatusCode, b)
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	return out
}

func summary(d []time.Duration) string {
	return fmt.Sprintf("p50 %v, p99 %v, max %v", d[len(d)/2].Round(time.Microsecond), d[len(d)*99/100].Round(time.Microsecond), d[len(d)-1].Round(time.Microsecond))
}

// TestOneVMCannotStarveOthers: one source floods the server with 300
// keep-alive connections sending requests as fast as they are answered,
// then with 100 that reconnect as soon as they are closed (a connect
// storm); it holds at most PerSource connections (twice that with those
// closing, as Limits allows), and another VM's
// requests all succeed, their latency measured beside an idle server's
// (logged: go test -run TestOneVMCannotStarveOthers -v ./mdserver/). A
// source no instance owns holds at most UnknownPerSource (likewise).
func TestOneVMCannotStarveOthers(t *testing.T) {
	store := twoInstances(t, "")
	m := NewMetrics()
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), Metrics: m})
	const perSource, unknownPerSource = 16, 4
	lim := NewLimiter(Limits{PerSource: perSource, UnknownPerSource: unknownPerSource, Total: 256, Known: h.Knows, Metrics: m})
	addr, open := limitedServer(t, h, lim)

	idle := latencies(t, addr, "127.0.0.3", 100)
	t.Logf("another VM's requests (100, a connection each), idle server: %s", summary(idle))
	for _, phase := range []struct {
		name      string
		conns     int
		reconnect bool
	}{{"300 keep-alive connections", 300, false}, {"a connect storm of 100 reconnecting clients", 100, true}} {
		stop := make(chan struct{})
		answered, dials := flood(addr, "127.0.0.2", phase.conns, phase.reconnect, stop)
		flood(addr, "127.0.0.99", 50, phase.reconnect, stop) // nobody's address
		deadline := time.Now().Add(20 * time.Second)
		for answered.Load() < 1000 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		busy := latencies(t, addr, "127.0.0.3", 100)
		// What each source holds, as the Limiter counts it: a connection
		// still counts until its socket is closing, and a closing one
		// (its last response written) counts toward twice the limit
		// (Limits). The server's own view (ConnState) is logged only: it
		// sees a connection closed after the Limiter has counted it out,
		// so in a connect storm it runs a few ahead of what is held.
		_, flooder := lim.Open(netip.MustParseAddr("127.0.0.2"))
		_, unknown := lim.Open(netip.MustParseAddr("127.0.0.99"))
		seenFlooder, seenUnknown := open("127.0.0.2"), open("127.0.0.99")
		close(stop)
		t.Logf("while one VM floods with %s: %s (%d flood requests answered, %d connections made; the server saw %d and %d connections open)", phase.name, summary(busy), answered.Load(), dials.Load(), seenFlooder, seenUnknown)
		if answered.Load() == 0 {
			t.Errorf("%s: the flood never got an answer", phase.name)
		}
		if busy[len(busy)-1] > 10*time.Second {
			t.Errorf("%s: the victim waited %v", phase.name, busy[len(busy)-1])
		}
		if flooder > 2*perSource {
			t.Errorf("%s: the flooding VM holds %d connections; the limit is %d (twice that with those closing)", phase.name, flooder, perSource)
		}
		if unknown > 2*unknownPerSource {
			t.Errorf("%s: an unknown source holds %d connections; the limit is %d (twice that with those closing)", phase.name, unknown, unknownPerSource)
		}
	}
	var sb strings.Builder
	m.WriteTo(&sb)
	if !strings.Contains(sb.String(), `vminit_mdserver_connections_refused_total{reason="per_source"}`) ||
		strings.Contains(sb.String(), `vminit_mdserver_connections_refused_total{reason="per_source"} 0`) {
		t.Errorf("refusals not counted:\n%s", grepLines(sb.String(), "connections"))
	}
}

// TestIdleConnectionsMakeRoom: at the total limit, the connections idle
// the longest are closed for newcomers, so VMs that leave keep-alive
// connections open cannot lock out one that arrives later.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	var recs []string
	for i := range 40 {
		recs = append(recs, fmt.Sprintf("127.0.1.%d", i+1))
	}
	store := testStore(t, testRecord(t, instanceDoc("many", recs, ""), "1"), testRecord(t, instanceDoc("late", []string{"127.0.0.3"}, ""), "1"))
	m := NewMetrics()
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), Metrics: m})
	lim := NewLimiter(Limits{Total: 32, PressureIdle: time.Hour, Known: h.Knows, Metrics: m})
	addr, _ := limitedServer(t, h, lim)
	var clients []*http.Client
	for _, src := range recs {
		c := clientFrom(src)
		c.Transport.(*http.Transport).DisableKeepAlives = false
		clients = append(clients, c)
		r := get(t, c, "http://"+addr+"/latest/meta-data/instance-id")
		if r.status != 200 {
			t.Fatalf("%s: %d", src, r.status)
		}
	}
	defer func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}()
	if total, _ := lim.Open(netip.Addr{}); total > 32 {
		t.Errorf("%d connections open; the limit is 32", total)
	}
	if r := get(t, clientFrom("127.0.0.3"), "http://"+addr+"/latest/meta-data/instance-id"); r.status != 200 {
		t.Errorf("the late VM: %d", r.status)
	}
	if m.connsEvicted.Load() == 0 {
		t.Error("no idle connection was evicted")
	}
}

// TestLimitedConnectionsKeepTheHopLimit: an IMDSv2 token is issued, with
// its hop limit set on the socket, through a Limiter's connection.
func TestLimitedConnectionsKeepTheHopLimit(t *testing.T) {
	store := twoInstances(t, "    tokenHopLimit: 3\n")
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h)
	var mu sync.Mutex
	var conns []net.Conn
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateActive {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}
	lim := NewLimiter(Limits{Known: h.Knows})
	go srv.Serve(lim.Limit(srv, ln))
	defer srv.Close()
	c := clientFrom("127.0.0.2")
	c.Transport.(*http.Transport).DisableKeepAlives = false // the connection stays open to be read
	defer c.CloseIdleConnections()
	r := do(t, c, "PUT", "http://"+ln.Addr().String()+"/latest/api/token", map[string]string{HeaderTokenTTL: "60"}, "")
	if r.status != 200 || r.body == "" {
		t.Fatalf("token through a limited connection: %d %q", r.status, r.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if ttl, err := ConnHopLimit(conns[len(conns)-1]); err != nil || ttl != 3 {
		t.Errorf("hop limit %d, %v; want 3", ttl, err)
	}
}

// TestUnknownSourcesCannotFillTheLimit: addresses no instance owns, each
// within its own limit, hold connections that are never idle (they send
// nothing). Together they hold at most UnknownTotal, well under Total,
// and when VMs have filled the rest, an instance's newcomer closes the
// oldest of them: ~3,750 such sources filled the 16,384 of the default
// limit and locked every VM out. Scaled down: 40 unknown sources, 4
// connections each, against a Total of 64.
func TestUnknownSourcesCannotFillTheLimit(t *testing.T) {
	var many []string
	for i := range 56 {
		many = append(many, fmt.Sprintf("127.0.1.%d", i+1))
	}
	store := testStore(t, testRecord(t, instanceDoc("many", many, ""), "1"), testRecord(t, instanceDoc("late", []string{"127.0.0.3"}, ""), "1"))
	m := NewMetrics()
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), Metrics: m})
	const total = 64
	lim := NewLimiter(Limits{Total: total, UnknownPerSource: 4, PressureIdle: time.Hour, Known: h.Knows, Metrics: m})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h)
	srv.ReadHeaderTimeout = time.Hour // the silent connections stay for the test, whatever its pace
	go srv.Serve(lim.Limit(srv, ln))
	defer srv.Close()
	addr := ln.Addr().String()

	// silent opens n connections from each source that send nothing, and
	// waits until the server has accepted (or refused) every one.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	processed := func() uint64 {
		n := uint64(m.conns.Load()) + m.connsEvicted.Load()
		for i := range m.connsRefused {
			n += m.connsRefused[i].Load()
		}
		return n
	}
	silent := func(srcs []string, n int) {
		t.Helper()
		want := processed() + uint64(len(srcs)*n)
		for _, src := range srcs {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
			for range n {
				if c, err := d.Dial("tcp", addr); err == nil { // else reset at once: refused
					held = append(held, c)
				}
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for processed() < want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	var unknown []string
	for i := range 40 {
		unknown = append(unknown, fmt.Sprintf("127.0.2.%d", i+1))
	}
	silent(unknown, 4)
	if open, _ := lim.Open(netip.Addr{}); open > total/8 {
		t.Errorf("unknown sources hold %d connections; Total is %d, their share %d", open, total, total/8)
	}
	silent(many, 1) // the VMs fill the rest
	if open, _ := lim.Open(netip.Addr{}); open != total {
		t.Errorf("%d connections open, want the limit, %d", open, total)
	}
	if r := get(t, clientFrom("127.0.0.3"), "http://"+addr+"/latest/meta-data/instance-id"); r.status != 200 {
		t.Errorf("a VM arriving at the limit: %d", r.status)
	}
	if m.connsEvicted.Load() == 0 {
		t.Error("no unknown source's connection was closed for the VM")
	}
	if open, _ := lim.Open(netip.Addr{}); open > total {
		t.Errorf("%d connections open; the limit is %d", open, total)
	}
}

// TestConnectionCountedOutBeforeTheClientSeesItClose: a client that reads
// each response to the server's close and connects again at once (a
// crawl with a connection per request, 32 at a time against a limit of
// 32) sees the close as soon as the socket is closed, so its next
// connection can be accepted before the server's Close returns. Counted
// out after the socket was closed, the old connection still held the
// source's last place and the newcomer was reset: 2–18 of ~100,000
// connections in such a storm. Here the client's reconnect runs inside
// the socket's Close, the moment it can see it.
func TestConnectionCountedOutBeforeTheClientSeesItClose(t *testing.T) {
	const perSource = 2
	m := NewMetrics()
	lim := NewLimiter(Limits{PerSource: perSource, Total: 64, Metrics: m})
	src := netip.MustParseAddr("192.0.2.7")
	var held []*limitedConn
	for range perSource {
		lc := lim.admit(&closeHookConn{src: src})
		if lc == nil {
			t.Fatal("a connection under the limit was refused")
		}
		held = append(held, lc)
	}
	var again *limitedConn
	held[0].Conn.(*closeHookConn).onClose = func() {
		again = lim.admit(&closeHookConn{src: src})
	}
	held[0].Close()
	if again == nil {
		t.Fatalf("the client's next connection, made when it saw its previous one close, was reset (refused per source: %d)", m.connsRefused[refusedPerSource].Load())
	}
	if _, n := lim.Open(src); n != perSource {
		t.Errorf("the source holds %d connections, want %d", n, perSource)
	}
}

// closeHookConn is an accepted connection from src whose Close runs
// onClose: what the peer does once it sees the socket close.
type closeHookConn struct {
	net.Conn // nil: only the methods below are used
	src      netip.Addr
	onClose  func()
}

func (c *closeHookConn) RemoteAddr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(c.src, 40000))
}

func (c *closeHookConn) Close() error {
	if c.onClose != nil {
		c.onClose()
	}
	return nil
}

// TestClosingConnectionMakesRoomForTheNext: a client that asked for
// "Connection: close" reads the response by its length and closes, then
// connects again, while the server may not have closed its side yet: a
// connection whose last response the handler has written no longer holds
// a place of its source's (it still counts in Total until it closes). A
// source's connections still closing are bounded too: they and the open
// ones together stay under twice PerSource.
func TestClosingConnectionMakesRoomForTheNext(t *testing.T) {
	const perSource = 2
	lim := NewLimiter(Limits{PerSource: perSource, Total: 64})
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	lim.Limit(srv, nil)
	src := netip.MustParseAddr("192.0.2.7")
	admit := func() *limitedConn { return lim.admit(&closeHookConn{src: src}) }
	// serveLast has the server answer c's last request, as net/http calls
	// the handler for it: the client asked to close.
	serveLast := func(c *limitedConn) {
		ctx := context.Background()
		if srv.ConnContext != nil {
			ctx = srv.ConnContext(ctx, c)
		}
		r := httptest.NewRequestWithContext(ctx, "GET", "/latest/meta-data/instance-id", nil)
		r.Close = true
		srv.Handler.ServeHTTP(httptest.NewRecorder(), r)
	}
	first, second := admit(), admit()
	serveLast(first)
	third := admit()
	if third == nil {
		t.Fatal("the client's next connection, made when it had read its previous one's last response, was reset")
	}
	serveLast(second)
	fourth := admit()
	if fourth == nil {
		t.Fatal("a second connection after a closing one was reset")
	}
	if admit() != nil {
		t.Errorf("a connection was admitted beside %d open ones (not closing)", perSource)
	}
	serveLast(third)
	serveLast(fourth)
	if admit() != nil {
		t.Errorf("a connection was admitted beyond twice PerSource (%d), all of them closing", 2*perSource)
	}
	first.Close()
	if admit() == nil {
		t.Error("a connection closed did not make room")
	}
}

// TestIdleConnectionsMakeRoomBehindTLS is TestIdleConnectionsMakeRoom on a
// real TLS listener over the limited one, as vminit serve --tls-cert
// stacks them: net/http hands its hooks the *tls.Conn, and the Limiter
// must find its own connection beneath it to see which are idle.
func TestIdleConnectionsMakeRoomBehindTLS(t *testing.T) {
	pki := testpki.New(t)
	cert, err := tls.LoadX509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS, err := pki.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	var srcs []string
	for i := range 4 {
		srcs = append(srcs, fmt.Sprintf("127.0.1.%d", i+1))
	}
	store := testStore(t, testRecord(t, instanceDoc("many", srcs, ""), "1"), testRecord(t, instanceDoc("late", []string{"127.0.0.3"}, ""), "1"))
	m := NewMetrics()
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), Metrics: m})
	lim := NewLimiter(Limits{Total: 4, PressureIdle: time.Hour, Known: h.Knows, Metrics: m})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h)
	srv.ErrorLog = log.New(io.Discard, "", 0)
	go srv.Serve(tls.NewListener(lim.Limit(srv, ln), &tls.Config{Certificates: []tls.Certificate{cert}}))
	t.Cleanup(func() { srv.Close() })
	url := "https://" + ln.Addr().String() + "/latest/meta-data/instance-id"
	tlsClient := func(src string) *http.Client {
		c := clientFrom(src)
		c.Transport.(*http.Transport).TLSClientConfig = clientTLS
		return c
	}
	for _, src := range srcs {
		c := tlsClient(src)
		c.Transport.(*http.Transport).DisableKeepAlives = false
		defer c.CloseIdleConnections()
		if r := get(t, c, url); r.status != 200 {
			t.Fatalf("%s: %d", src, r.status)
		}
	}
	// The four keep-alive connections fill Total; the late VM's takes the
	// place of the one idle the longest.
	c := tlsClient("127.0.0.3")
	req, _ := http.NewRequest("GET", url, nil)
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("the late VM, with %d connections idle at the total limit: %v", len(srcs), err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("the late VM: %d", res.StatusCode)
	}
	if m.connsEvicted.Load() == 0 {
		t.Error("no idle connection was evicted")
	}
}
