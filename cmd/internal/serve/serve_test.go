package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/dirstore"
	"github.com/vminit/vminit/mdserver/registry"
)

// vmAddr is instance i's source address. Linux answers for all of
// 127.0.0.0/8 on lo, so each client can bind its own.
func vmAddr(i int) net.IP { return net.IPv4(127, 0, 0, byte(10+i)) }

func doc(i, gen int) string {
	return fmt.Sprintf("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm-%d}\nspec:\n  hostname: vm-%d-g%d\n  metadataServer: {addresses: [%s]}\n",
		i, i, gen, vmAddr(i))
}

// writeSpec replaces a spec file the way `vminit instances put` and
// Kubernetes ConfigMaps do, by renaming a complete file into place (a dot
// file meanwhile, which the store ignores). An in-place rewrite can be
// read half-written, and a prefix of a spec can be a valid spec that
// lacks the address: that would be a real 404, which no server can avoid.
func writeSpec(t testing.TB, dir string, i, gen int) {
	tmp := filepath.Join(dir, fmt.Sprintf(".vm-%d.tmp", i))
	if err := os.WriteFile(tmp, []byte(doc(i, gen)), 0o644); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("vm-%d.yaml", i))); err != nil {
		t.Error(err)
	}
}

// client makes requests from instance i's address, on one kept-alive
// connection or on a new connection each time.
func client(i int, keepAlive bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: vmAddr(i)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: d.DialContext, DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 1,
	}}
}

func listen(t *testing.T) net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// genOf fetches instance i's hostname in the EC2 or the OpenStack dialect
// and returns the generation in it.
func genOf(c *http.Client, base string, i int, openstack bool) (int, error) {
	path := "/latest/meta-data/hostname"
	if openstack {
		path = "/openstack/latest/meta_data.json"
	}
	res, err := c.Get(base + path)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return 0, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s %q", path, res.Status, body)
	}
	host := string(body)
	if openstack {
		var md struct{ Hostname string }
		if err := json.Unmarshal(body, &md); err != nil {
			return 0, fmt.Errorf("GET %s: %v: %q", path, err, body)
		}
		host = md.Hostname
	}
	g, ok := strings.CutPrefix(host, fmt.Sprintf("vm-%d-g", i))
	n, err := strconv.Atoi(g)
	if !ok || err != nil {
		return 0, fmt.Errorf("GET %s: hostname %q is not one of vm-%d's versions", path, host, i)
	}
	return n, nil
}

// TestReloadUnderLoad keeps real clients busy (kept-alive and new
// connections, EC2 and OpenStack) while the spec files are rewritten and
// reloads are asked for over and over, through Run's reload channel (the
// SIGHUP path) and the store's own watch. Every request must succeed with
// a version of its instance's data that is no older than the one the same
// client saw before: a reload may never show a gap or step back.
func TestReloadUnderLoad(t *testing.T) {
	const vms = 6
	dir := t.TempDir()
	for i := range vms {
		writeSpec(t, dir, i, 0)
	}
	logs := &testtools.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	store, err := dirstore.Open(dir, dirstore.Options{Logger: logger, Debounce: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l := listen(t)
	base := "http://" + l.Addr().String()
	reload := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Listeners: []Listener{{Name: "metadata", Listener: l,
				Server: mdserver.NewServer(mdserver.NewHandler(store, mdserver.Options{AllowLoopbackInstances: true, Logger: slog.New(slog.DiscardHandler)}))}},
			Store: store, Reload: reload, Logger: logger,
		})
	}()

	var gen atomic.Int64 // the newest generation written
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var requests, failures atomic.Int64
	for i := range vms {
		for _, keepAlive := range []bool{true, false} {
			wg.Go(func() {
				c := client(i, keepAlive)
				defer c.CloseIdleConnections()
				last := 0
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					g, err := genOf(c, base, i, n%2 == 1)
					newest := int(gen.Load())
					requests.Add(1)
					switch {
					case err != nil:
						failures.Add(1)
						t.Errorf("vm-%d (keep-alive %v), request %d: %v", i, keepAlive, n, err)
					case g < last || g > newest:
						failures.Add(1)
						t.Errorf("vm-%d (keep-alive %v), request %d: generation %d after %d (newest written %d)", i, keepAlive, n, g, last, newest)
					default:
						last = g
					}
					if failures.Load() > 10 {
						return
					}
				}
			})
		}
	}
	// The writer announces a generation before writing it, so no response
	// may carry a generation beyond gen read after it.
	wg.Go(func() {
		for g := 1; ; g++ {
			select {
			case <-stop:
				return
			default:
			}
			gen.Store(int64(g))
			for i := range vms {
				writeSpec(t, dir, i, g)
			}
			time.Sleep(3 * time.Millisecond)
		}
	})
	var asked atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case reload <- syscall.SIGHUP:
				asked.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	// Run until enough has happened, not for a fixed time: on a loaded
	// machine 1.5 s once saw only 7 generations. The bound only stops a
	// stuck run; the counts below decide.
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if requests.Load() >= 200 && gen.Load() >= 20 && strings.Count(logs.String(), "msg=reloaded") >= 20 {
			break
		}
	}
	close(stop)
	wg.Wait()

	// After a last reload every instance serves the last generation.
	if err := store.Reload(); err != nil {
		t.Fatal(err)
	}
	for i := range vms {
		if g, err := genOf(client(i, false), base, i, false); err != nil || g != int(gen.Load()) {
			t.Errorf("vm-%d after the last reload: generation %d, %v; want %d", i, g, err, gen.Load())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	reloaded := strings.Count(logs.String(), "msg=reloaded")
	t.Logf("%d requests, %d failed; %d generations written; %d reloads asked, %d done by Run, %d snapshots swapped",
		requests.Load(), failures.Load(), gen.Load(), asked.Load(), reloaded, store.Reloads())
	if requests.Load() < 100 || gen.Load() < 10 || reloaded < 10 {
		t.Errorf("too little happened to show anything: %d requests, %d generations, %d reloads", requests.Load(), gen.Load(), reloaded)
	}
	if strings.Contains(logs.String(), "reload failed") {
		t.Errorf("a reload failed:\n%s", logs)
	}
}

// gate holds requests carrying ?hold in the handler until released, so
// that a test can have requests in flight when shutdown starts.
type gate struct {
	next    http.Handler
	entered chan string
	release chan struct{}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id := r.URL.Query().Get("hold"); id != "" {
		g.entered <- id
		<-g.release
	}
	g.next.ServeHTTP(w, r)
}

type shutdownServer struct {
	addr     string
	gate     *gate
	logs     *testtools.SyncBuffer
	stop     context.CancelFunc
	finished chan struct{} // closed when Run has returned err
	err      error
}

// wait waits up to d for Run to return.
func (s *shutdownServer) wait(d time.Duration) (error, bool) {
	select {
	case <-s.finished:
		return s.err, true
	case <-time.After(d):
		return nil, false
	}
}

// startGated serves one instance (vm-0) behind a gate.
func startGated(t *testing.T, timeout time.Duration) *shutdownServer {
	rec, err := registry.DecodeDocument([]byte(doc(0, 1)), "")
	if err != nil {
		t.Fatal(err)
	}
	store, err := registry.NewStaticStore([]*registry.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{next: mdserver.NewHandler(store, mdserver.Options{AllowLoopbackInstances: true, Logger: slog.New(slog.DiscardHandler)}),
		entered: make(chan string, 16), release: make(chan struct{})}
	l := listen(t)
	srv := mdserver.NewServer(g)
	logs := &testtools.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	s := &shutdownServer{addr: l.Addr().String(), gate: g, logs: logs, stop: cancel, finished: make(chan struct{})}
	go func() {
		s.err = Run(ctx, Config{Listeners: []Listener{{Name: "metadata", Listener: l, Server: srv}},
			Store: store, ShutdownTimeout: timeout, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		close(s.finished)
	}()
	// Cleanups run last first: release the held requests, then stop.
	t.Cleanup(func() {
		cancel()
		if _, ok := s.wait(30 * time.Second); !ok {
			t.Error("Run did not return")
		}
	})
	t.Cleanup(s.release)
	return s
}

func (s *shutdownServer) release() {
	select {
	case <-s.gate.release:
	default:
		close(s.gate.release)
	}
}

type result struct {
	id     string
	status int
	body   string
	err    error
}

// hold sends a request that the gate keeps in the handler, and waits
// until it is there.
func (s *shutdownServer) hold(t *testing.T, c *http.Client, id string, out chan<- result) {
	go func() {
		res, err := c.Get("http://" + s.addr + "/latest/meta-data/hostname?hold=" + id)
		r := result{id: id, err: err}
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			r.status, r.body = res.StatusCode, string(b)
		}
		out <- r
	}()
	select {
	case got := <-s.gate.entered:
		if got != id {
			t.Fatalf("request %s entered the handler, want %s", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("request %s never reached the handler", id)
	}
}

// waitRefused waits until the listener refuses connections, which is
// the first thing shutdown does.
func waitRefused(t *testing.T, addr string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		// A connection the kernel queued before the listener closed is
		// reset; keep dialing until nothing listens any more.
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dialing after shutdown: %v, want connection refused", err)
		}
		if c != nil {
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts connections after shutdown started")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestShutdownFinishesRequestsInFlight starts shutdown with requests in
// the handler (on a kept-alive connection and on a new one): both complete
// with 200, new connections are refused from the start of shutdown, idle
// kept-alive connections are closed, a client still sending its request
// is closed unanswered, and Run returns once the last request is answered.
func TestShutdownFinishesRequestsInFlight(t *testing.T) {
	s := startGated(t, 30*time.Second)
	keep, fresh := client(0, true), client(0, false)
	// The kept-alive connection has served a request before.
	if g, err := genOf(keep, "http://"+s.addr, 0, false); err != nil || g != 1 {
		t.Fatalf("first request: %d %v", g, err)
	}
	results := make(chan result, 2)
	s.hold(t, keep, "keep-alive", results)
	s.hold(t, fresh, "new-conn", results)
	// A slow client: connected from vm-0's address, half a request sent.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: vmAddr(0)}}
	slow, err := d.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET /latest/meta-data/hostname HTTP/1.1\r\nHost: mds\r\n")
	// An idle kept-alive connection is closed by shutdown, not waited for.
	idle := client(0, true)
	if _, err := genOf(idle, "http://"+s.addr, 0, false); err != nil {
		t.Fatal(err)
	}

	s.stop()
	waitRefused(t, s.addr)
	if err, ok := s.wait(0); ok {
		t.Fatalf("Run returned with requests in flight: %v", err)
	}
	if _, err := genOf(client(0, false), "http://"+s.addr, 0, false); err == nil {
		t.Error("a new connection was served after shutdown started")
	}
	if _, err := genOf(idle, "http://"+s.addr, 0, false); err == nil {
		t.Error("an idle kept-alive connection was served after shutdown started")
	}

	io.WriteString(slow, "\r\n") // the rest of the slow request
	s.release()
	for range 2 {
		r := <-results
		if r.err != nil || r.status != 200 || r.body != "vm-0-g1" {
			t.Errorf("%s: %d %q %v", r.id, r.status, r.body, r.err)
		}
	}
	// Its request was not read when shutdown started, so it was never
	// accepted: net/http closes such a connection without an answer
	// (never half a response), which tells the client to retry elsewhere.
	slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(slow); err != nil || len(b) != 0 {
		t.Errorf("the slow client: %q %v, want the connection closed unanswered", b, err)
	}
	if err, ok := s.wait(20 * time.Second); !ok {
		t.Fatal("Run did not return after the last request was answered")
	} else if err != nil {
		t.Fatal(err)
	}
	logs := s.logs.String()
	if !strings.Contains(logs, "in_flight=2") || strings.Contains(logs, "cut") {
		t.Errorf("log:\n%s", logs)
	}
}

// TestShutdownTimeoutCutsRequests holds requests past the shutdown
// timeout: Run returns soon after the timeout, the clients see their
// connections cut, and the log says how many requests were cut.
func TestShutdownTimeoutCutsRequests(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := startGated(t, timeout)
	results := make(chan result, 2)
	s.hold(t, client(0, true), "a", results)
	s.hold(t, client(0, false), "b", results)
	start := time.Now()
	s.stop()
	if err, ok := s.wait(timeout + 10*time.Second); !ok {
		t.Fatal("Run did not return after the shutdown timeout")
	} else if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < timeout {
		t.Errorf("Run returned after %v, before the %v timeout", d, timeout)
	}
	// The handlers are still blocked; the clients saw their connection go.
	for range 2 {
		if r := <-results; r.err == nil {
			t.Errorf("%s: a cut request got %d %q", r.id, r.status, r.body)
		}
	}
	if logs := s.logs.String(); !strings.Contains(logs, "shutdown timeout reached") || !strings.Contains(logs, "cut=2") {
		t.Errorf("the cut is not logged:\n%s", logs)
	}
	waitRefused(t, s.addr)
}

// TestListenerFailure: when one listener fails, Run shuts the others down
// and returns the failure.
func TestListenerFailure(t *testing.T) {
	store, _ := registry.NewStaticStore(nil)
	good, bad := listen(t), listen(t)
	bad.Close()
	h := http.NotFoundHandler()
	err := Run(context.Background(), Config{Store: store, Logger: slog.New(slog.DiscardHandler), Listeners: []Listener{
		{Name: "metadata", Listener: good, Server: &http.Server{Handler: h}},
		{Name: "admin", Listener: bad, Server: &http.Server{Handler: h}},
	}})
	if err == nil || !strings.Contains(err.Error(), "admin listener") {
		t.Fatalf("Run: %v", err)
	}
	waitRefused(t, good.Addr().String())
}

// TestReloadWithoutReloader: a store that follows its backend by itself
// (etcd) logs the request and keeps serving.
func TestReloadWithoutReloader(t *testing.T) {
	store, _ := registry.NewStaticStore(nil)
	l := listen(t)
	logs := &testtools.SyncBuffer{}
	reload := make(chan os.Signal)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Store: store, Reload: reload, Logger: slog.New(slog.NewTextHandler(logs, nil)),
			Listeners: []Listener{{Name: "metadata", Listener: l, Server: &http.Server{Handler: http.NotFoundHandler()}}}})
	}()
	reload <- syscall.SIGHUP
	reload <- syscall.SIGHUP // the first one has been handled once this is received
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "nothing to reload") {
		t.Errorf("log:\n%s", logs)
	}
}
