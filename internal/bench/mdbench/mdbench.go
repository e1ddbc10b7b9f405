// Package mdbench is the fixture the metadata server benchmarks share: the
// command bench/mdserver (run by bench/mdserver/run.sh, with wrk) and the
// testing.B benchmarks in package mdserver. Both load the same in-memory
// instances, compare against the same bare net/http handler and drive the
// same cloud-init crawl, so their numbers can be set side by side in
// docs/benchmarks.md.
//
// Instance i is identified by Addr(i): 127.(1+i/65536).(i/256%256).(i%256),
// except instance 0, which owns 127.0.0.1 so that a client connecting from
// the default loopback address (wrk, Go's dialer) reads its data. Every
// socket is on 127.0.0.0/8.
package mdbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/registry"
)

// Addr is the source address that identifies instance i.
func Addr(i int) netip.Addr {
	if i == 0 {
		return netip.MustParseAddr("127.0.0.1")
	}
	return netip.AddrFrom4([4]byte{127, byte(1 + i/65536), byte(i / 256 % 256), byte(i % 256)})
}

// MaxInstances is how many distinct addresses Addr hands out before the
// second octet would leave 127.0.0.0/8.
const MaxInstances = 254 * 65536

// SpecFile is the spec file of instance i, as an operator would write it
// into a directory store (≈600 bytes: labels, a key, a user with sudo, a
// file, an argv command and its address).
func SpecFile(i int, addr netip.Addr) []byte {
	name := fmt.Sprintf("vm-%06d", i)
	return fmt.Appendf(nil, `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: %s
  labels: {rack: r%d}
spec:
  sshAuthorizedKeys:
    - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@example
  users:
    - name: ops
      sudo: ALL=(ALL) NOPASSWD:ALL
  files:
    - path: /etc/motd
      content: "welcome to %s\n"
  commands:
    - [systemctl, enable, --now, app.service]
  metadataServer:
    addresses: [%s]
`, name, i%40, name, addr)
}

// WriteSpecs writes SpecFile(i, addr(i)) to dir/vm-NNNNNN.yaml for i < n.
func WriteSpecs(dir string, n int, addr func(int) netip.Addr) error {
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("vm-%06d.yaml", i)), SpecFile(i, addr(i)), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// AuditLogger is the audit logger the benchmarks run with. "json" (the
// default of vminit serve) formats every line and writes it to
// io.Discard, so formatting is measured but no disk or pipe is; "none"
// drops lines before they are formatted.
func AuditLogger(kind string) (*slog.Logger, error) {
	switch kind {
	case "json", "discard":
		return slog.New(slog.NewJSONHandler(io.Discard, nil)), nil
	case "none":
		return slog.New(slog.DiscardHandler), nil
	}
	return nil, fmt.Errorf("audit log %q: want json or none", kind)
}

// Loaded is a handler over n in-memory instances and what loading cost.
type Loaded struct {
	Handler http.Handler
	Store   *registry.StaticStore
	N       int
	// Took is the time to build the records, the snapshot index and the
	// handler (the start-up cost with a store that has its specs parsed).
	Took time.Duration
	// HeapPerInstance is the live heap the loaded set adds, divided by N,
	// before anything is rendered.
	HeapPerInstance float64
}

// Load builds n instances in memory (registry.NewStaticStore) and the
// handler over them, with AllowLoopbackInstances set (every instance is
// on 127.0.0.0/8). Each is held as vminit serve's directory store holds a
// spec file it has just read: SpecFile(i, Addr(i)), to be decoded on the
// guest's first request (registry.Index.DecodeDeferred).
func Load(n int, opts mdserver.Options) (*Loaded, error) {
	opts.AllowLoopbackInstances = true
	return load(n, opts, registry.NewIndex(registry.IndexOptions{}).DecodeDeferred, Addr)
}

// LoadDecoded is Load with every instance decoded at once, as servers held
// them before 2026-11-26 (bench/mdserver -decoded), for comparisons.
func LoadDecoded(n int, opts mdserver.Options) (*Loaded, error) {
	opts.AllowLoopbackInstances = true
	return load(n, opts, registry.DecodeDocument, Addr)
}

// LoadAt is Load with instance i at addrs[i], which need not be loopback
// addresses (AllowLoopbackInstances is left as opts has it): a handler for
// clients that come from other network namespaces.
func LoadAt(addrs []netip.Addr, opts mdserver.Options) (*Loaded, error) {
	return load(len(addrs), opts, registry.NewIndex(registry.IndexOptions{}).DecodeDeferred, func(i int) netip.Addr { return addrs[i] })
}

// load builds n instances, instance i at(i), each decoded by decode.
func load(n int, opts mdserver.Options, decode func(doc []byte, dir string) (*registry.Record, error), at func(int) netip.Addr) (*Loaded, error) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	recs := make([]*registry.Record, n)
	for i := range recs {
		r, err := decode(SpecFile(i, at(i)), "")
		if err != nil {
			return nil, err
		}
		recs[i] = r
	}
	store, err := registry.NewStaticStore(recs)
	if err != nil {
		return nil, err
	}
	h := mdserver.NewHandler(store, opts)
	took := time.Since(start)
	recs = nil // the snapshot holds the records; only its index should count
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	return &Loaded{Handler: h, Store: store, N: n, Took: took,
		HeapPerInstance: float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)}, nil
}

// Constant is what the bare handler serves: a user-data of the size a
// minimal cloud-config has.
var Constant = []byte("#cloud-config\nusers: []\n")

// Bare is the yardstick: a net/http handler that writes Constant with a
// content type, and nothing else.
func Bare() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(Constant)
	})
}

// BareServer is the http.Server the bare handler runs in: net/http's
// defaults plus the header timeout any exposed server needs.
func BareServer() *http.Server { return &http.Server{ReadHeaderTimeout: 5 * time.Second} }

// Listen serves srv (with h as its handler) on a fresh 127.0.0.1 port and
// returns the address and a function that closes the server.
func Listen(h http.Handler, srv *http.Server) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv.Handler = h
	go srv.Serve(l)
	return l.Addr().String(), func() { srv.Close() }, nil
}

// CrawlPaths is cloud-init 22.4's request sequence on a non-AWS VM (the
// small tree its Ec2 datasource walks there) plus the 2021-03-23 network
// entries.
var CrawlPaths = []string{
	"/2009-04-04/meta-data/instance-id", "/2021-03-23/meta-data/instance-id", "/2021-03-23/user-data",
	"/2021-03-23/meta-data/", "/2021-03-23/meta-data/block-device-mapping/", "/2021-03-23/meta-data/block-device-mapping/ami",
	"/2021-03-23/meta-data/block-device-mapping/root", "/2021-03-23/meta-data/placement/",
	"/2021-03-23/meta-data/placement/availability-zone", "/2021-03-23/meta-data/placement/region",
	"/2021-03-23/meta-data/public-keys/", "/2021-03-23/meta-data/public-keys/0/openssh-key",
	"/2021-03-23/meta-data/ami-id", "/2021-03-23/meta-data/ami-launch-index", "/2021-03-23/meta-data/ami-manifest-path",
	"/2021-03-23/meta-data/hostname", "/2021-03-23/meta-data/instance-action", "/2021-03-23/meta-data/instance-type",
	"/2021-03-23/meta-data/local-hostname", "/2021-03-23/meta-data/local-ipv4",
}

// Result is what a load generator measured.
type Result struct {
	Requests int
	Errors   int64
	FirstErr error
	Wall     time.Duration
	// Latencies of the requests that got an answer, sorted.
	Latencies []time.Duration
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the latencies.
func (r Result) Quantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	return r.Latencies[int(q*float64(len(r.Latencies)-1))]
}

// PerSecond is the rate of answered requests.
func (r Result) PerSecond() float64 { return float64(len(r.Latencies)) / r.Wall.Seconds() }

func (r Result) String() string {
	us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	return fmt.Sprintf("requests=%d errors=%d wall=%v req/s=%.0f p50=%v p99=%v max=%v",
		r.Requests, r.Errors, r.Wall.Round(time.Millisecond), r.PerSecond(), us(r.Quantile(0.5)), us(r.Quantile(0.99)), us(r.Quantile(1)))
}

// recorder collects latencies and errors from many goroutines.
type recorder struct {
	mu       sync.Mutex
	lat      []time.Duration
	errs     atomic.Int64
	firstErr error
}

func (r *recorder) fail(err error) {
	if r.errs.Add(1) == 1 {
		r.mu.Lock()
		r.firstErr = err
		r.mu.Unlock()
	}
}

func (r *recorder) add(lat []time.Duration) {
	r.mu.Lock()
	r.lat = append(r.lat, lat...)
	r.mu.Unlock()
}

func (r *recorder) result(requests int, wall time.Duration) Result {
	slices.Sort(r.lat)
	return Result{Requests: requests, Errors: r.errs.Load(), FirstErr: r.firstErr, Wall: wall, Latencies: r.lat}
}

// get fetches url with c and discards the body; anything but 200 is an
// error.
func get(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return nil
}

// Client is how a simulated VM speaks HTTP in Storm.
type Client int

const (
	// Raw writes the request line by hand on a new connection and reads
	// the response to the server's close: a load generator that leaves the
	// shared CPUs to the server as far as one can in Go.
	Raw Client = iota
	// NetHTTP is net/http's client without keep-alive: a realistic client
	// that costs more CPU than the server does per request.
	NetHTTP
)

func (c Client) String() string {
	if c == NetHTTP {
		return "nethttp"
	}
	return "raw"
}

// ParseClient parses "raw" or "nethttp".
func ParseClient(s string) (Client, error) {
	switch s {
	case "raw":
		return Raw, nil
	case "nethttp":
		return NetHTTP, nil
	}
	return 0, fmt.Errorf("client %q: want raw or nethttp", s)
}

// Storm runs vms simulated cloud-init crawls of CrawlPaths against addr,
// conc of them at a time. VM v comes from Addr(first+v) and opens a new
// TCP connection for every request, as cloud-init does.
func Storm(ctx context.Context, client Client, addr string, first, vms, conc int) Result {
	gets, _ := StormEvents(ctx, client, addr, first, vms, conc, nil)
	return gets
}

// StormEvents is Storm with each VM also posting events (bodies for
// bootreport.EventsPath, e.g. CloudInitEvents) spread between its GETs, as
// a booting guest's reporting webhook does; it returns the GETs' and the
// posts' measures apart, so that the metadata latency can be set beside a
// storm without events.
func StormEvents(ctx context.Context, client Client, addr string, first, vms, conc int, events [][]byte) (gets, posts Result) {
	if first+vms > MaxInstances {
		panic("mdbench: more VMs than loopback addresses")
	}
	var getRec, postRec recorder
	start := time.Now()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(conc, vms) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vm := stormVM{client: client, addr: addr, buf: make([]byte, 64<<10)}
			for {
				v := int(next.Add(1)) - 1
				if v >= vms {
					return
				}
				vm.boot(ctx, Addr(first+v), events, &getRec, &postRec)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	return getRec.result(vms*len(CrawlPaths), wall), postRec.result(vms*len(events), wall)
}

// stormVM is one goroutine of a storm, booting one VM after another.
type stormVM struct {
	client     Client
	addr       string
	buf        []byte
	gets, post []time.Duration
}

// boot crawls CrawlPaths from a, posting events between the GETs.
func (vm *stormVM) boot(ctx context.Context, a netip.Addr, events [][]byte, getRec, postRec *recorder) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: a.AsSlice()}, Timeout: 5 * time.Second}
	var c *http.Client
	if vm.client == NetHTTP {
		c = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	}
	vm.gets, vm.post = vm.gets[:0], vm.post[:0]
	sent := 0
	for i, p := range CrawlPaths {
		t0 := time.Now()
		var err error
		if c != nil {
			err = get(ctx, c, "http://"+vm.addr+p)
		} else {
			err = rawDo(ctx, d, vm.addr, "GET", p, nil, vm.buf)
		}
		if err != nil {
			getRec.fail(err)
		} else {
			vm.gets = append(vm.gets, time.Since(t0))
		}
		// The events due by this point of the crawl.
		for due := (i + 1) * len(events) / len(CrawlPaths); sent < due; sent++ {
			t0 := time.Now()
			if err := rawDo(ctx, d, vm.addr, "POST", bootreport.EventsPath, events[sent], vm.buf); err != nil {
				postRec.fail(err)
				continue
			}
			vm.post = append(vm.post, time.Since(t0))
		}
	}
	getRec.add(vm.gets)
	postRec.add(vm.post)
}

// rawDo sends "METHOD path" (with body, as JSON, if any) and
// "Connection: close" on a new connection and reads the response until the
// server closes; a status other than 200 (204 for a POST) or a body
// shorter than its Content-Length is an error.
func rawDo(ctx context.Context, d *net.Dialer, addr, method, path string, body, buf []byte) error {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := method + " " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: Cloud-Init/22.4\r\nConnection: close\r\n"
	if body != nil {
		req += "Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return err
	}
	if _, err := c.Write(body); err != nil {
		return err
	}
	n := 0
	for {
		if n == len(buf) {
			return fmt.Errorf("GET %s: response larger than %d bytes", path, len(buf))
		}
		m, err := c.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	res := buf[:n]
	want := "HTTP/1.1 200 "
	if method == "POST" {
		want = "HTTP/1.1 204 "
	}
	if !bytes.HasPrefix(res, []byte(want)) {
		line, _, _ := bytes.Cut(res, []byte("\r\n"))
		return fmt.Errorf("%s %s: %q", method, path, line)
	}
	head, body, ok := bytes.Cut(res, []byte("\r\n\r\n"))
	if !ok {
		return fmt.Errorf("GET %s: no end of header", path)
	}
	for _, l := range bytes.Split(head, []byte("\r\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("Content-Length: ")); ok {
			if want, err := strconv.Atoi(string(v)); err != nil || want != len(body) {
				return fmt.Errorf("GET %s: Content-Length %s, %d bytes of body", path, v, len(body))
			}
		}
	}
	return nil
}

// KeepAlive sends n GETs of url over conns kept-alive connections from
// 127.0.0.1 (the address of instance 0).
func KeepAlive(ctx context.Context, url string, conns, n int) Result {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	return KeepAliveWith(ctx, &http.Client{Timeout: 10 * time.Second, Transport: tr}, url, conns, n)
}

// KeepAliveWith is KeepAlive with the client c, whose transport keeps
// conns connections (MaxIdleConnsPerHost, MaxConnsPerHost): one that
// dials from another network namespace, say.
func KeepAliveWith(ctx context.Context, c *http.Client, url string, conns, n int) Result {
	var rec recorder
	start := time.Now()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(conns, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := get(ctx, c, url); err != nil {
					rec.fail(err)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			rec.add(mine)
		}()
	}
	wg.Wait()
	return rec.result(n, time.Since(start))
}
