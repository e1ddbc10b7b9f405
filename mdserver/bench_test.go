package mdserver_test

// Benchmarks of the performance targets, each beside a bare
// net/http handler that writes a constant, in the same run. The numbers
// and the commands are in docs/benchmarks.md ("## Metadata server").
// Everything listens and dials on 127.0.0.0/8 only.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/mdserver"
)

const fleetSize = 100000

// fleet is the 100,000-instance handler every benchmark shares: building
// it takes about half a second, too long to repeat per benchmark, and
// sharing it is also what lets BenchmarkFleet measure start-up and memory
// from a single clean load.
var fleet struct {
	once sync.Once
	ld   *mdbench.Loaded
	err  error
}

func loadFleet(b *testing.B) *mdbench.Loaded {
	b.Helper()
	fleet.once.Do(func() {
		mdserver.SetGC() // vminit serve's collector setting
		// The audit log and metrics are on, as in vminit serve; the JSON
		// lines are formatted and then discarded.
		logger, _ := mdbench.AuditLogger("json")
		fleet.ld, fleet.err = mdbench.Load(fleetSize, mdserver.Options{Logger: logger, Metrics: mdserver.NewMetrics()})
	})
	if fleet.err != nil {
		b.Fatal(fleet.err)
	}
	return fleet.ld
}

// target is one of the two servers a benchmark compares.
type target struct {
	name string
	h    func(*testing.B) http.Handler
	srv  func(http.Handler) *http.Server
}

var targets = []target{
	{"bare", func(*testing.B) http.Handler { return mdbench.Bare() }, func(http.Handler) *http.Server { return mdbench.BareServer() }},
	{"mdserver", func(b *testing.B) http.Handler { return loadFleet(b).Handler }, mdserver.NewServer},
}

func (t target) listen(b *testing.B) string {
	b.Helper()
	h := t.h(b)
	addr, stop, err := mdbench.Listen(h, t.srv(h))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	return addr
}

func reportLatency(b *testing.B, r mdbench.Result) {
	b.Helper()
	if r.Errors > 0 {
		b.Errorf("%d of %d requests failed; first: %v", r.Errors, r.Requests, r.FirstErr)
	}
	b.ReportMetric(r.PerSecond(), "req/s")
	b.ReportMetric(float64(r.Quantile(0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(r.Quantile(0.99).Microseconds()), "p99-µs")
}

// BenchmarkKeepAliveUserData: GET /latest/user-data over 16 kept-alive
// loopback connections from 127.0.0.1 (instance 0 of 100,000), one op per
// request. Target: mdserver ≥ 70 % of bare's req/s. The client is Go's,
// in this process, so both targets pay for it; wrk (bench/mdserver/run.sh)
// shows the servers' own difference more sharply.
func BenchmarkKeepAliveUserData(b *testing.B) {
	for _, t := range targets {
		b.Run(t.name, func(b *testing.B) {
			url := "http://" + t.listen(b) + "/latest/user-data"
			mdbench.KeepAlive(context.Background(), url, 16, 100) // connections up, instance 0 rendered
			b.ResetTimer()
			r := mdbench.KeepAlive(context.Background(), url, 16, b.N)
			b.StopTimer()
			reportLatency(b, r)
		})
	}
	// Alternating the two in short rounds keeps a noisy neighbour from
	// favouring one of them, so the ratio is the number to read.
	b.Run("ratio", func(b *testing.B) {
		var urls [2]string
		for i, t := range targets {
			urls[i] = "http://" + t.listen(b) + "/latest/user-data"
			mdbench.KeepAlive(context.Background(), urls[i], 16, 100)
		}
		var wall [2]time.Duration
		const round = 2000
		b.ResetTimer()
		for done := 0; done < b.N; done += round {
			for i, u := range urls {
				r := mdbench.KeepAlive(context.Background(), u, 16, min(round, b.N-done))
				if r.Errors > 0 {
					b.Fatalf("%s: %d requests failed; first: %v", targets[i].name, r.Errors, r.FirstErr)
				}
				wall[i] += r.Wall
			}
		}
		b.StopTimer()
		bare, md := float64(b.N)/wall[0].Seconds(), float64(b.N)/wall[1].Seconds()
		b.ReportMetric(bare, "bare-req/s")
		b.ReportMetric(md, "mdserver-req/s")
		b.ReportMetric(100*md/bare, "%-of-bare")
	})
}

// stormNext hands each simulated VM an instance that has not fetched yet
// (until all 100,000 have; then they start over with cached payloads).
var stormNext = struct {
	sync.Mutex
	v int
}{v: 1}

func stormVMs(n int) int {
	stormNext.Lock()
	defer stormNext.Unlock()
	if stormNext.v+n > fleetSize {
		stormNext.v = 1
	}
	first := stormNext.v
	stormNext.v += n
	return first
}

// BenchmarkStorm: the boot storm. One op is one VM's cloud-init crawl
// (mdbench.CrawlPaths, 20 GETs), from its own 127.x.y.z address, with a
// new TCP connection per request; C VMs crawl at once. Run it with
// -benchtime 1000x for the 1,000 VMs. Target: no error, p99 <
// 5 ms. The load generator shares the CPUs with the server: the raw
// client is the lightest we have, net/http's costs more CPU than the
// server it measures.
func BenchmarkStorm(b *testing.B) {
	for _, client := range []mdbench.Client{mdbench.Raw, mdbench.NetHTTP} {
		for _, conc := range []int{1, 8, 32} {
			for _, t := range targets {
				b.Run(fmt.Sprintf("%v/c=%d/%s", client, conc, t.name), func(b *testing.B) {
					if b.N >= fleetSize {
						b.Fatalf("%d VMs: the fleet has addresses for %d", b.N, fleetSize-1)
					}
					addr := t.listen(b)
					first := stormVMs(b.N)
					b.ResetTimer()
					r := mdbench.Storm(context.Background(), client, addr, first, b.N, conc)
					b.StopTimer()
					reportLatency(b, r)
				})
			}
		}
	}
}

// BenchmarkServeHTTP: the handler alone, in process (no sockets, no HTTP
// parsing), on a kept instance: what a request costs beyond net/http.
func BenchmarkServeHTTP(b *testing.B) {
	for _, path := range []string{"/latest/user-data", "/latest/meta-data/instance-id", "/nocloud/meta-data"} {
		for _, t := range targets {
			b.Run(t.name+path, func(b *testing.B) {
				h := t.h(b)
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.RemoteAddr = "127.0.0.1:40000"
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req) // renders instance 0 before timing
				if w.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", path, w.Code)
				}
				b.ReportAllocs()
				for b.Loop() {
					h.ServeHTTP(httptest.NewRecorder(), req)
				}
			})
		}
	}
}

// BenchmarkFleet reports the start-up time and the heap per instance of
// the 100,000-instance load (targets: < 2 s, < 8 KiB plus payloads). They
// come from the one shared load (when another benchmark ran first, from
// that load). The op is what every request does first: finding the
// instance by source address in the 100,000-entry index.
func BenchmarkFleet(b *testing.B) {
	ld := loadFleet(b)
	snap := ld.Store.Snapshot()
	i := 0
	for b.Loop() {
		if _, ok := snap.ByAddr(mdbench.Addr(i)); !ok {
			b.Fatalf("instance %d not found", i)
		}
		i = (i + 7919) % fleetSize
	}
	// After the loop: b.Loop's timer reset drops metrics reported before.
	b.ReportMetric(ld.Took.Seconds(), "startup-s")
	b.ReportMetric(ld.HeapPerInstance, "B/instance")
}

// BenchmarkFirstFetch: an EC2 guest's first meta-data request and first
// user-data request, which render its instance's EC2 trees and user data
// (each dialect is rendered when first asked for), one op per instance.
// It reports the rendered payload bytes and the heap each rendered
// instance adds to the fleet's per-instance cost.
func BenchmarkFirstFetch(b *testing.B) {
	logger, _ := mdbench.AuditLogger("json")
	m := mdserver.NewMetrics()
	ld, err := mdbench.Load(b.N, mdserver.Options{Logger: logger, Metrics: m})
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([][2]*http.Request, b.N)
	for i := range reqs {
		for j, p := range []string{mdbench.CrawlPaths[0], "/2021-03-23/user-data"} {
			reqs[i][j] = httptest.NewRequest(http.MethodGet, p, nil)
			reqs[i][j].RemoteAddr = mdbench.Addr(i).String() + ":40000"
		}
	}
	before := heapAlloc()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for _, r := range reqs[i] {
			w := httptest.NewRecorder()
			ld.Handler.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatalf("instance %d, %s: %d", i, r.URL.Path, w.Code)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(heapAlloc()-before)/float64(b.N), "heap-B/instance")
	var sb strings.Builder
	m.WriteTo(&sb)
	b.ReportMetric(float64(metricValue(b, sb.String(), "vminit_mdserver_cache_bytes"))/float64(b.N), "payload-B/instance")
}

func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// metricValue reads an unlabelled series from the Prometheus text.
func metricValue(b *testing.B, text, name string) int64 {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no %s in the metrics", name)
	return 0
}
