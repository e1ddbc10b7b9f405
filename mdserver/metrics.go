package mdserver

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Metrics counts what the metadata server does, in the Prometheus text
// exposition format. Pass it in Options.Metrics and serve it on an
// admin listener (never to VMs): it is an http.Handler for /metrics.
//
// Series:
//
//	vminit_mdserver_requests_total{dialect,code}
//	vminit_mdserver_request_duration_seconds{dialect} (histogram)
//	vminit_mdserver_instances_loaded
//	vminit_mdserver_rate_limited_total
//	vminit_mdserver_cache_entries, vminit_mdserver_cache_bytes
//	vminit_mdserver_connections (guest connections open, with a Limiter)
//	vminit_mdserver_connections_refused_total{reason=per_source|unknown_source|total}
//	vminit_mdserver_connections_evicted_total (idle ones closed under pressure)
//	vminit_first_boot_writes_total{kind=event|report,result=accepted|refused}
//	vminit_first_boot_duration_seconds{agent,outcome=done|failed} (histogram:
//	  from the first fetch to the end of first boot; see ObserveBoot)
//	vminit_first_boots{state} (the instances served, by first-boot state,
//	  counted when scraped)
//	vminit_store_healthy, vminit_store_write_errors_total,
//	vminit_store_last_sync_timestamp_seconds (a store that reports its
//	  backend's health, StoreHealth: etcd's)
//	vminit_node_followed{kind}, vminit_node_follow_refused_total (a node
//	  agent's objects followed by name, and those refused for want of
//	  room: NodeFollower, kubestore's node mode)
//
// Make it with NewMetrics.
type Metrics struct {
	// By dialect.index.
	requests    [][len(statusCodes) + 1]atomic.Uint64
	buckets     [][len(latencyBuckets) + 1]atomic.Uint64
	sumNanos    []atomic.Uint64
	rateLimited atomic.Uint64

	cacheEntries atomic.Int64
	cacheBytes   atomic.Int64

	conns        atomic.Int64
	connsRefused [refusedReasons]atomic.Uint64
	connsEvicted atomic.Uint64

	// By writeKinds, then accepted (0) or refused (1).
	writes [len(writeKinds)][2]atomic.Uint64
	// By bootAgents, bootOutcomes and bootBuckets.
	boots    [len(bootAgents)][len(bootOutcomes)][len(bootBuckets) + 1]atomic.Uint64
	bootSums [len(bootAgents)][len(bootOutcomes)]atomic.Uint64 // milliseconds

	h atomic.Pointer[Handler]
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	n := len(dialects)
	return &Metrics{
		requests: make([][len(statusCodes) + 1]atomic.Uint64, n),
		buckets:  make([][len(latencyBuckets) + 1]atomic.Uint64, n),
		sumNanos: make([]atomic.Uint64, n),
	}
}

var statusCodes = [...]int{200, 204, 400, 401, 403, 404, 405, 409, 413, 415, 429, 500}

var latencyBuckets = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

func (m *Metrics) attach(h *Handler) { m.h.Store(h) }

func (m *Metrics) observe(dialect *dialect, status int, d time.Duration) {
	di := dialect.index
	si := len(statusCodes)
	for i, c := range statusCodes {
		if c == status {
			si = i
			break
		}
	}
	m.requests[di][si].Add(1)
	s := d.Seconds()
	bi := len(latencyBuckets)
	for i, b := range latencyBuckets {
		if s <= b {
			bi = i
			break
		}
	}
	m.buckets[di][bi].Add(1)
	m.sumNanos[di].Add(uint64(d))
}

// ServeHTTP writes the metrics.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.WriteTo(w)
}

// WriteTo writes the metrics in the Prometheus text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	p := func(format string, args ...any) { fmt.Fprintf(cw, format, args...) }
	p("# HELP vminit_mdserver_requests_total Metadata requests by dialect and status code.\n# TYPE vminit_mdserver_requests_total counter\n")
	for di, d := range dialects {
		for si := range len(statusCodes) + 1 {
			n := m.requests[di][si].Load()
			if n == 0 {
				continue
			}
			code := "other"
			if si < len(statusCodes) {
				code = strconv.Itoa(statusCodes[si])
			}
			p("vminit_mdserver_requests_total{dialect=%q,code=%q} %d\n", d.name, code, n)
		}
	}
	p("# HELP vminit_mdserver_request_duration_seconds Time to answer a metadata request.\n# TYPE vminit_mdserver_request_duration_seconds histogram\n")
	for di, d := range dialects {
		var cum uint64
		for bi := range len(latencyBuckets) + 1 {
			cum += m.buckets[di][bi].Load()
			le := "+Inf"
			if bi < len(latencyBuckets) {
				le = strconv.FormatFloat(latencyBuckets[bi], 'g', -1, 64)
			}
			p("vminit_mdserver_request_duration_seconds_bucket{dialect=%q,le=%q} %d\n", d.name, le, cum)
		}
		p("vminit_mdserver_request_duration_seconds_sum{dialect=%q} %g\n", d.name, float64(m.sumNanos[di].Load())/1e9)
		p("vminit_mdserver_request_duration_seconds_count{dialect=%q} %d\n", d.name, cum)
	}
	loaded := 0
	if h := m.h.Load(); h != nil {
		loaded = h.src.Snapshot().Len()
	}
	p("# HELP vminit_mdserver_instances_loaded Instances in the current snapshot.\n# TYPE vminit_mdserver_instances_loaded gauge\nvminit_mdserver_instances_loaded %d\n", loaded)
	p("# HELP vminit_mdserver_rate_limited_total Requests refused with 429.\n# TYPE vminit_mdserver_rate_limited_total counter\nvminit_mdserver_rate_limited_total %d\n", m.rateLimited.Load())
	p("# HELP vminit_mdserver_cache_entries Instances with rendered payloads in the cache.\n# TYPE vminit_mdserver_cache_entries gauge\nvminit_mdserver_cache_entries %d\n", m.cacheEntries.Load())
	p("# HELP vminit_mdserver_cache_bytes Bytes of rendered payloads in the cache.\n# TYPE vminit_mdserver_cache_bytes gauge\nvminit_mdserver_cache_bytes %d\n", m.cacheBytes.Load())
	p("# HELP vminit_mdserver_connections Guest connections open.\n# TYPE vminit_mdserver_connections gauge\nvminit_mdserver_connections %d\n", m.conns.Load())
	p("# HELP vminit_mdserver_connections_refused_total Guest connections closed as soon as accepted, by the limit they exceeded.\n# TYPE vminit_mdserver_connections_refused_total counter\n")
	for i, r := range refusedNames {
		p("vminit_mdserver_connections_refused_total{reason=%q} %d\n", r, m.connsRefused[i].Load())
	}
	p("# HELP vminit_mdserver_connections_evicted_total Guest connections closed under pressure: idle ones, and for an instance those of unknown sources.\n# TYPE vminit_mdserver_connections_evicted_total counter\nvminit_mdserver_connections_evicted_total %d\n", m.connsEvicted.Load())
	m.writeFirstBoot(p)
	if h := m.h.Load(); h != nil {
		if sh, ok := h.src.(StoreHealth); ok {
			writeStoreHealth(p, sh)
		}
		if nf, ok := h.src.(NodeFollower); ok {
			i, v, c := nf.Following()
			p("# HELP vminit_node_followed Objects a node agent follows by name, a watch each, by kind.\n# TYPE vminit_node_followed gauge\n")
			p("vminit_node_followed{kind=\"instance\"} %d\nvminit_node_followed{kind=\"virtualmachine\"} %d\nvminit_node_followed{kind=\"configmap\"} %d\n", i, v, c)
			p("# HELP vminit_node_follow_refused_total Objects a node agent refused to follow by name, its bound reached (each once while wanted).\n# TYPE vminit_node_follow_refused_total counter\nvminit_node_follow_refused_total %d\n", nf.FollowRefused())
		}
	}
	return cw.n, cw.err
}

// StoreHealth is a store that reports the health of its backend
// (etcdstore.Store): the server serves from memory whatever the backend
// does, and these say whether what it serves is current and whether
// what it writes is kept.
type StoreHealth interface {
	// Healthy: the backend is reachable, followed, and takes writes.
	Healthy() bool
	// WriteErrors counts the writes the backend refused or never got.
	WriteErrors() uint64
	// LastSync is when the store last heard from the backend (zero:
	// never).
	LastSync() time.Time
}

// NodeFollower is a store that follows objects by name, within a bound
// (kubestore's node mode).
type NodeFollower interface {
	// Following counts the Instances, VirtualMachines and ConfigMaps
	// followed by name.
	Following() (instances, vms, configMaps int)
	// FollowRefused counts the objects refused for want of room.
	FollowRefused() uint64
}

func writeStoreHealth(p func(format string, args ...any), sh StoreHealth) {
	healthy := 0
	if sh.Healthy() {
		healthy = 1
	}
	p("# HELP vminit_store_healthy Whether the store's backend is reachable, followed and takes writes (1) or not (0).\n# TYPE vminit_store_healthy gauge\nvminit_store_healthy %d\n", healthy)
	p("# HELP vminit_store_write_errors_total Writes to the store's backend that failed (first-boot statuses, instance changes).\n# TYPE vminit_store_write_errors_total counter\nvminit_store_write_errors_total %d\n", sh.WriteErrors())
	sync := 0.0
	if t := sh.LastSync(); !t.IsZero() {
		sync = float64(t.UnixMilli()) / 1e3
	}
	p("# HELP vminit_store_last_sync_timestamp_seconds When the store last heard from its backend (a list or a watch response).\n# TYPE vminit_store_last_sync_timestamp_seconds gauge\nvminit_store_last_sync_timestamp_seconds %g\n", sync)
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
	return n, err
}
