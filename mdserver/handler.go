package mdserver

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/lib/httppath"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/registry"
)

// Options configure NewHandler. The zero value is usable: no trusted
// proxies, no rate limit, slog.Default, the real clock.
type Options struct {
	// TrustedProxies are the source networks allowed to name an instance
	// with the signed X-Vminit-Instance header (or, without HMACKey, with
	// X-Forwarded-For). Requests from anywhere else are identified by
	// their source address only, whatever headers they carry. A trusted
	// proxy's own address never identifies an instance.
	TrustedProxies []netip.Prefix
	// HMACKey verifies X-Vminit-Instance (see SignInstance). Without a
	// key the header is refused even from trusted proxies; with one, it
	// is the only way a trusted proxy names an instance (an unsigned
	// X-Forwarded-For is refused with 403).
	HMACKey []byte
	// ProxiesSetHopLimit declares that the TrustedProxies give an IMDSv2
	// token answer the hop limit its HeaderTokenHopLimit says, on their
	// own connection to the guest. Without it a token PUT through a
	// trusted proxy is refused (403): the hop limit the server can set is
	// on its socket to the proxy, and protects nothing beyond it.
	ProxiesSetHopLimit bool
	// AllowLoopbackInstances lets a loopback source address (127.0.0.0/8,
	// ::1) identify an instance. Off, as it must be in production: every
	// process of the server's host, and a proxy on it that is not a
	// TrustedProxy, would get that instance's data. Tests, benchmarks and
	// QEMU user-mode networking (whose guests reach the host from
	// 127.0.0.1) turn it on.
	AllowLoopbackInstances bool
	// GuestHops are the routers between the server's socket and its
	// guests (0–MaxGuestHops), added to each instance's
	// metadataServer.tokenHopLimit, which counts from the guest as on
	// EC2: the IMDSv2 token answer's IP TTL is their sum. 0 for a server
	// on its guests' own link; 1 for a node agent behind KubeVirt's
	// masquerade, where the virt-launcher pod routes the answer to its
	// guest (docs/kubernetes.md, "IMDSv2 behind KubeVirt's masquerade").
	// A trusted proxy's HeaderTokenHopLimit is the instance's own: the
	// proxy is on the guest's link.
	GuestHops int
	// NoHopLimit issues IMDSv2 tokens without setting the IP TTL of the
	// connection (metadataServer.tokenHopLimit), for a handler that does
	// not answer over a TCP connection to the guest: vminit run's relay,
	// where QEMU's user network makes the guest's packets itself.
	NoHopLimit bool
	// TokenKey signs IMDSv2 session tokens. Servers that share it accept
	// each other's tokens; empty means a random key per process (tokens do
	// not survive a restart; clients get 401 and ask for a new one).
	TokenKey []byte
	// Rate is the sustained number of requests per second each instance
	// may make (a token bucket of Burst requests); 0 disables the limit.
	Rate float64
	// Burst defaults to max(100, 2*Rate): a cloud-init crawl is 20–100
	// requests in a fraction of a second.
	Burst int
	// WriteRate and WriteBurst are the token bucket of each instance's
	// writes to the first-boot paths (events.go), apart from Rate's: a
	// guest flooding events loses neither its metadata nor anyone else's
	// anything. Defaults: 20 per second, a burst of 200 (cloud-init posts
	// about 40 events in a boot).
	WriteRate  float64
	WriteBurst int
	// Logger receives one audit line per request (instance, dialect,
	// path, status, duration; never a payload). Default slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts requests; serve it on an admin listener
	// (it is never routed to VMs by this handler).
	Metrics *Metrics
	// Now is the clock (tests inject one); default time.Now.
	Now func() time.Time
	// IgnitionVariant, when set, renders every Ignition config for that
	// variant; empty means each instance's spec.ignition.variant (which
	// spec.Default sets to fcos).
	IgnitionVariant ignition.Variant
	// MaxBodyBytes bounds PUT and POST bodies; default 4096. The
	// first-boot paths have bounds of their own (events.go).
	MaxBodyBytes int64
	// Boots tracks the fleet's first boots (boots.go): make it with
	// NewTracker; nil: the handler makes one with the default options.
	// Share one tracker between the
	// handler and a store that writes statuses back.
	Boots *firstboot.Tracker
	// ReportURL is the base URL (bootreport.ParseBaseURL) the served
	// user data and Ignition configs tell guests to report their first
	// boot to; empty means the scheme and host each guest reached this
	// server at (report.go). NoBootReports serves the data without the
	// report.
	ReportURL     string
	NoBootReports bool
}

// HeaderInstance is the signed instance header a trusted proxy adds
// (SignInstance): "v2;<name>;<uid>;<unix-expiry>;<hex HMAC>". The EC2
// dialect's token headers are in ec2.go.
const HeaderInstance = "X-Vminit-Instance"

// Handler is the metadata server NewHandler returns.
type Handler struct {
	src     registry.Source
	opts    Options
	log     *slog.Logger
	metrics *Metrics
	mux     *http.ServeMux
	guards  []guard // the dialects' token rules, by dialect index
	boots   *firstboot.Tracker

	// Per-instance state. What belongs to one version of an instance is
	// in its cache entry, under the record's registry.Key, and is dropped
	// by sweep as soon as the snapshot no longer serves that key; what
	// belongs to an incarnation (the password, the first boot in boots)
	// is under its name and registry.Record.UID, answered only to that
	// incarnation and dropped by sweep when the snapshot no longer holds
	// it; the rate limits are by name and dropped when the instance is
	// gone. IMDSv2 tokens are signed for the Key (ec2.go) and keep nothing
	// here.
	lastSnap  atomic.Pointer[registry.Snapshot]
	cache     sync.Map  // name → *entry (rendered payloads, by key)
	limits    rateLimit // the metadata requests (Options.Rate)
	writes    rateLimit // the first-boot writes (Options.WriteRate)
	passwords sync.Map  // name → *password (OpenStack, write-once per incarnation; kept across revisions)
}

type ctxKey int

const connKey ctxKey = 0

// NewHandler returns the metadata server: every dialect on one handler,
// each request answered with the data of the instance it comes from. Each
// dialect's file lists its paths (ec2.go, openstack.go, nocloud.go,
// ignition.go); docs/metadata-server.md has them all.
//
// Requests are identified by source address (see Options.TrustedProxies
// for proxies); a request nobody owns gets a 404 whose one line says why. The IMDSv2 hop
// limit needs the connection: serve the handler with NewServer, or set
// http.Server.ConnContext to ConnContext.
func NewHandler(src registry.Source, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4096
	}
	if opts.Burst <= 0 {
		opts.Burst = max(100, int(2*opts.Rate))
	}
	if opts.WriteRate <= 0 {
		opts.WriteRate = 20
	}
	if opts.WriteBurst <= 0 {
		opts.WriteBurst = 200
	}
	if opts.Boots == nil {
		opts.Boots = NewTracker(firstboot.Options{})
	}
	opts.ReportURL, opts.NoBootReports = reportOptions(opts)
	h := &Handler{src: src, opts: opts, log: opts.Logger, metrics: opts.Metrics, boots: opts.Boots,
		limits: rateLimit{rate: opts.Rate, burst: float64(opts.Burst)},
		writes: rateLimit{rate: opts.WriteRate, burst: float64(opts.WriteBurst)}}
	if h.metrics != nil {
		h.metrics.attach(h)
	}
	mux := http.NewServeMux()
	h.configureDialects(mux)
	mux.HandleFunc("/", methodNotAllowed) // every GET is EC2's (ec2.go)
	h.mux = mux
	return h
}

// statusWriter records the status and size of a response, and carries
// the identified record to the dialect handlers: passing it in the
// request's context instead would copy the request (r.WithContext) on
// every request.
type statusWriter struct {
	http.ResponseWriter
	status int
	n      int64
	rec    *registry.Record
}

func (w *statusWriter) record() *registry.Record { return w.rec }

// recordWriter is a ResponseWriter that knows whose request it answers:
// statusWriter for guests, the preview crawler's recorder for admins.
type recordWriter interface{ record() *registry.Record }

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var swPool = sync.Pool{New: func() any { return new(statusWriter) }}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := h.opts.Now()
	sw := swPool.Get().(*statusWriter)
	*sw = statusWriter{ResponseWriter: w}
	w = sw
	w.Header()["Cache-Control"] = hdrNoStore
	dialect := dialectOf(r.URL.Path)
	name := ""
	defer func() {
		end := h.opts.Now()
		d := end.Sub(start)
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		if h.metrics != nil {
			h.metrics.observe(dialect, status, d)
		}
		h.observeBoot(sw.rec, dialect, r, status)
		if lh := h.log.Handler(); lh.Enabled(r.Context(), slog.LevelInfo) {
			// The record is built here rather than by Logger.LogAttrs,
			// which walks the stack for a source position that the audit
			// line does not carry (docs/design.md).
			line := slog.NewRecord(end, slog.LevelInfo, dialect.auditMsg(), 0)
			line.AddAttrs(slog.String("instance", name), slog.String("dialect", dialect.name),
				slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Int("status", status), slog.Duration("duration", d),
				slog.String("remote", r.RemoteAddr))
			lh.Handle(r.Context(), line)
		}
		*sw = statusWriter{}
		swPool.Put(sw)
	}()

	rec, addr, why := h.identify(r)
	if rec == nil {
		// Nothing to serve this source: its connection is not kept, and
		// the one line says why: an empty 404 leaves an operator's first
		// try with nothing to go on.
		refuseWhy(w, why.status(), why.message(addr))
		return
	}
	name = rec.Name
	lim := &h.limits
	if dialect.guestWrites {
		lim = &h.writes
	}
	if lim.rate > 0 {
		if wait := lim.take(rec.Name, h.opts.Now()); wait > 0 {
			if h.metrics != nil {
				h.metrics.rateLimited.Add(1)
			}
			w.Header().Set("Retry-After", retryAfter(wait))
			refuse(w, http.StatusTooManyRequests)
			return
		}
	}
	if !httppath.IsCanonical(r.URL.Path) {
		// ServeMux would redirect, with an HTML body.
		emptyStatus(w, http.StatusBadRequest)
		return
	}
	if dialect != otherDialect && !dialect.guestWrites && !rec.Instance().Spec.MetadataServer.ServesDialect(dialect.name) {
		dialectRefused(w, rec, dialect.name)
		return
	}
	if g := h.guards[dialect.index]; g != nil {
		if status := g(r, rec); status != 0 {
			emptyStatus(w, status)
			return
		}
	}
	if r.Method == http.MethodPut || r.Method == http.MethodPost {
		limit := h.opts.MaxBodyBytes
		if dialect.maxBody > 0 {
			limit = dialect.maxBody
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	sw.rec = rec
	h.mux.ServeHTTP(w, r)
}

// emptyStatus answers with a status and an empty body (never HTML: clients
// such as Ignition and coreos-cloudinit have parsed 404 pages as data).
func emptyStatus(w http.ResponseWriter, status int) {
	w.Header()["Content-Length"] = hdrZero
	w.WriteHeader(status)
}

// refuse answers status with an empty body and closes the connection,
// without reading the rest of a body (net/http would otherwise read what
// a client announced, and wait for it, before closing).
func refuse(w http.ResponseWriter, status int) {
	w.Header()["Connection"] = hdrClose
	emptyStatus(w, status)
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

// refuseWhy is refuse with a one-line plain-text reason.
func refuseWhy(w http.ResponseWriter, status int, why string) {
	w.Header()["Connection"] = hdrClose
	serveStatus(w, status, why)
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

// methodNotAllowed is every path's answer to a method it does not serve:
// an empty 405 (ServeMux's own has a plain-text body).
func methodNotAllowed(w http.ResponseWriter, _ *http.Request) {
	emptyStatus(w, http.StatusMethodNotAllowed)
}

// dialectRefused answers 403 to a request for an instance through a
// dialect spec.metadataServer does not serve it through, saying why in a
// plain-text body (the one error with a body: the guest's operator reads
// it).
func dialectRefused(w http.ResponseWriter, rec *registry.Record, dialect string) {
	ms := rec.Instance().Spec.MetadataServer
	why := fmt.Sprintf("spec.metadataServer.dialects lists only %s; add %s there to serve it", strings.Join(ms.Dialects, ", "), dialect)
	if len(ms.Dialects) == 0 {
		why = fmt.Sprintf("its spec.metadataServer.imdsv2 is required, and the %s dialect's clients send no IMDSv2 token; fetch through the EC2 paths with a token, or list %s in spec.metadataServer.dialects to serve it without one", dialect, dialect)
	}
	serveStatus(w, http.StatusForbidden, fmt.Sprintf("vminit: instance %s is not served through the %s dialect: %s\n", rec.Name, dialect, why))
}

// recordOf returns the record ServeHTTP identified (nil if w is not one
// of ours).
func recordOf(w http.ResponseWriter) *registry.Record {
	rw, _ := w.(recordWriter)
	if rw == nil {
		return nil
	}
	return rw.record()
}

// Header values every response shares. net/http only reads header values
// (Header.Add appends to a copy: each slice is full), and Header.Set would
// allocate a new slice per response.
var (
	hdrNoStore     = []string{"no-store"}
	hdrZero        = []string{"0"}
	hdrClose       = []string{"close"}
	hdrTextPlain   = []string{textPlain}
	hdrJSON        = []string{"application/json"}
	hdrIgnitionCfg = []string{ignitionType}
)

// serveStatus answers status with a plain-text message.
func serveStatus(w http.ResponseWriter, status int, msg string) {
	hd := w.Header()
	hd["Content-Type"] = hdrTextPlain
	hd["Content-Length"] = []string{itoa(len(msg))}
	w.WriteHeader(status)
	io.WriteString(w, msg)
}

// serveBytes writes a payload with its content type.
func serveBytes(w http.ResponseWriter, ctype string, b []byte) {
	hd := w.Header()
	switch ctype {
	case textPlain:
		hd["Content-Type"] = hdrTextPlain
	case "application/json":
		hd["Content-Type"] = hdrJSON
	case ignitionType:
		hd["Content-Type"] = hdrIgnitionCfg
	default:
		hd.Set("Content-Type", ctype)
	}
	hd["Content-Length"] = []string{itoa(len(b))}
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

const textPlain = "text/plain; charset=utf-8"

// rateLimit is a token bucket per instance: rate tokens a second, up
// to burst; a rate of 0 takes none.
type rateLimit struct {
	rate, burst float64
	buckets     sync.Map // name → *bucket
}

// bucket is one instance's token bucket.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// take takes a token from the instance's bucket and returns 0, or how
// long until one is available.
func (l *rateLimit) take(name string, now time.Time) time.Duration {
	v, ok := l.buckets.Load(name)
	if !ok {
		v, _ = l.buckets.LoadOrStore(name, &bucket{tokens: l.burst, last: now})
	}
	b := v.(*bucket)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// forget drops the buckets of the instances s no longer serves.
func (l *rateLimit) forget(s *registry.Snapshot) {
	l.buckets.Range(func(k, _ any) bool {
		if _, ok := s.ByName(k.(string)); !ok {
			l.buckets.Delete(k)
		}
		return true
	})
}

func retryAfter(d time.Duration) string {
	return itoa(int((d + time.Second - 1) / time.Second))
}

// failed answers 500 for a rendering error (logged, never sent).
func (h *Handler) failed(w http.ResponseWriter, rec *registry.Record, err error) bool {
	if err == nil {
		return false
	}
	if rw, ok := w.(*recorder); ok {
		rw.err = err // a preview reports it
	} else {
		h.log.Error("rendering failed", "instance", rec.Name, "error", err)
	}
	emptyStatus(w, http.StatusInternalServerError)
	return true
}
