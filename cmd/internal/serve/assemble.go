package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/vminit/vminit/internal/lib/httpserver"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/kubestore"
	"github.com/vminit/vminit/mdserver/registry"
)

// StoreConfig names where the instances come from: exactly one of Dir,
// Kubernetes and Open.
type StoreConfig struct {
	// Dir is a directory of spec files (dirstore), DirCache its start-up
	// cache file (optional).
	Dir, DirCache string
	// Kubernetes is a cluster's Instance objects (kubestore).
	Kubernetes *kubestore.Config
	// Open opens a store a program adds: vminit-server's etcd store
	// (cmd/internal/servercmd), kept out of this package so that vminit,
	// which imports it, does not link etcd's client.
	Open OpenFunc
}

// OpenFunc opens a store with the checks every record passes and the
// logger that receives what the store logs.
type OpenFunc func(ctx context.Context, checks registry.Checks, logger *slog.Logger) (Store, error)

// Store is an open instance store.
type Store interface {
	registry.Store
	Close() error
}

// kubeListTimeout bounds how long a Kubernetes store may take to list
// what it serves before the server gives up starting, at least
// (kubestore.ListTimeout may give it more).
const kubeListTimeout = time.Minute

// OpenStore opens the store cfg names. Every record read or put passes
// checks (mdserver.StoreChecks of the handler that serves it); logger
// receives what the store logs. A directory's checks of what it read at
// start run in the background (dirstore.Options.DeferChecks), so that the
// server listens as soon as the files are parsed.
func OpenStore(ctx context.Context, cfg StoreConfig, checks registry.Checks, logger *slog.Logger) (Store, error) {
	n := 0
	for _, set := range []bool{cfg.Dir != "", cfg.Open != nil, cfg.Kubernetes != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("serve: give exactly one store: a directory, Kubernetes or another (etcd)")
	}
	switch {
	case cfg.Dir != "":
		return openDir(cfg, checks, logger)
	case cfg.Kubernetes != nil:
		kcfg := *cfg.Kubernetes
		kcfg.Checks = checks
		octx, cancel := context.WithTimeout(ctx, kubestore.ListTimeout(kcfg, kubeListTimeout))
		defer cancel()
		return kubestore.Open(octx, kcfg)
	default:
		return cfg.Open(ctx, checks, logger)
	}
}

// Options describe a metadata server: its store, how it answers guests,
// and where it listens.
type Options struct {
	Store StoreConfig
	// Handler configures the guests' handler; New sets its Logger and
	// Metrics, and its Boots: the server's first-boot tracker.
	Handler mdserver.Options
	// StallAfter is how long a first boot may stay silent before it
	// reads as stalled (firstboot.Options.StallAfter; 0: its default).
	StallAfter time.Duration
	// Listen are the guests' addresses; Guests bounds their connections
	// together (New adds the handler's Known and the metrics, and exempts
	// Handler.TrustedProxies from the per-source bound).
	Listen []string
	Guests mdserver.Limits
	// MetricsListen, if set, serves Prometheus /metrics there.
	MetricsListen string
	// AdminListen, if set, serves the admin API there with the token
	// AdminToken returns at each request (admin.WatchToken's re-reads
	// the token file), over TLS when AdminTLS is set.
	AdminListen string
	AdminToken  func() string
	AdminTLS    *tls.Config
	// GCPercent is logged with "instances loaded" (what mdserver.SetGC returned).
	GCPercent int
	Logger    *slog.Logger
}

// StoreError is New's error when the store did not open (rather than a
// listener), so that a caller can tell what to look at. It reads as Err.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }

// Limits of the admin and metrics listeners, apart from the guests'.
var (
	adminLimits   = mdserver.Limits{PerSource: 16, Total: 256}
	metricsLimits = mdserver.Limits{PerSource: 8, Total: 64}
)

// Server is a metadata server assembled from Options, listening and
// ready for Run.
type Server struct {
	Store     Store
	Handler   *mdserver.Handler
	Listeners []Listener
	log       *slog.Logger
}

// New opens the store, builds the guests' handler and listens on every
// address of o. On an error (a *StoreError when the store did not open)
// nothing stays open.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	start := time.Now()
	metrics := mdserver.NewMetrics()
	o.Handler.Logger, o.Handler.Metrics = o.Logger, metrics
	o.Handler.Boots = mdserver.NewTracker(firstboot.Options{StallAfter: o.StallAfter, OnFinish: metrics.ObserveBoot})
	store, err := OpenStore(ctx, o.Store, mdserver.StoreChecks(o.Handler), o.Logger)
	if err != nil {
		return nil, &StoreError{Err: err}
	}
	loaded := []any{"count", store.Snapshot().Len(), "duration", time.Since(start), "gc_percent", o.GCPercent}
	if o.Store.Dir != "" {
		// The checks of what was read run in the background (DeferChecks);
		// "dirstore: deferred checks done" follows.
		loaded = append(loaded, "checks", "deferred")
	}
	o.Logger.Info("instances loaded", loaded...)
	warnUnaddressed(store.Snapshot().Unaddressed(), o.Store.Kubernetes != nil, o.Logger)
	s := &Server{Store: store, Handler: mdserver.NewHandler(store, o.Handler), log: o.Logger}
	if err := s.listen(o, metrics); err != nil {
		for _, l := range s.Listeners {
			l.Listener.Close()
		}
		store.Close()
		return nil, err
	}
	return s, nil
}

// listen opens the guests', metrics and admin listeners.
func (s *Server) listen(o Options, metrics *mdserver.Metrics) error {
	guests := o.Guests
	guests.Exempt, guests.Known, guests.Metrics = o.Handler.TrustedProxies, s.Handler.Knows, metrics
	lim := mdserver.NewLimiter(guests)
	for _, a := range o.Listen {
		if err := s.add("metadata", a, mdserver.NewServer(s.Handler), nil, lim); err != nil {
			return err
		}
	}
	if o.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics)
		if err := s.add("metrics", o.MetricsListen, httpserver.New(mux, 10*time.Second, 30*time.Second), nil, mdserver.NewLimiter(metricsLimits)); err != nil {
			return err
		}
	}
	if o.AdminListen != "" {
		ah := admin.NewHandler(s.Store, admin.Options{TokenFunc: o.AdminToken, Logger: o.Logger, Metadata: s.Handler})
		if err := s.add("admin", o.AdminListen, admin.NewServer(ah), o.AdminTLS, mdserver.NewLimiter(adminLimits)); err != nil {
			return err
		}
		scheme := "http"
		if o.AdminTLS != nil {
			scheme = "https"
		}
		// Where the operator opens the first-boot page: nothing else
		// says so.
		s.log.Info("web page", "url", scheme+"://"+s.Listeners[len(s.Listeners)-1].Listener.Addr().String()+"/ui/")
	}
	return nil
}

// add listens on addr for srv. The connections are bounded by lim (the
// guests' listeners share one) before TLS: a handshake holds a descriptor
// too.
func (s *Server) add(name, addr string, srv *http.Server, tlsConfig *tls.Config, lim *mdserver.Limiter) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	l = lim.Limit(srv, l)
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	if srv.ErrorLog == nil { // TLS handshake and accept errors, as structured lines
		srv.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	}
	s.Listeners = append(s.Listeners, Listener{Name: name, Listener: l, Server: srv})
	return nil
}

// Run serves until ctx ends (see the package's Run), reloading the store
// on every value from reload (nil: never). When the store shares
// first-boot statuses between replicas (firstboot.Shared), the server
// writes its own to it and follows the others' while it runs (boots.go).
func (s *Server) Run(ctx context.Context, reload <-chan os.Signal, shutdownTimeout time.Duration) error {
	shared, _ := s.Store.(firstboot.Shared)
	// Until the listeners are shut down: requests in flight still post.
	stop := s.shareBoots(context.WithoutCancel(ctx), shared)
	err := Run(ctx, Config{Listeners: s.Listeners, Store: s.Store, Reload: reload, ShutdownTimeout: shutdownTimeout, Logger: s.log})
	// The last first-boot statuses: as long again, while the store
	// refuses them (an outage as the server stops).
	if shutdownTimeout <= 0 {
		shutdownTimeout = defaultShutdownTimeout
	}
	stop(shutdownTimeout)
	return err
}

// Close closes the store (Run closes the listeners).
func (s *Server) Close() error { return s.Store.Close() }

// maxUnaddressedNames bounds the names the warning of warnUnaddressed
// lists: a fleet's worth would be one unreadable line.
const maxUnaddressedNames = 10

// warnUnaddressed logs the instances no guest can fetch, names: no
// address identifies them (registry.Snapshot.Unaddressed; without it, a
// first try that served four such instances said nothing while every
// guest got a 404). New warns of those it loads, a directory store of
// those a change serves (openDir). In a directory or etcd, an
// instance's addresses are its spec.metadataServer.addresses; in
// Kubernetes, those its VMI or its spec claims (kubestore's Claims).
func warnUnaddressed(names []string, kubernetes bool, log *slog.Logger) {
	if len(names) == 0 {
		return
	}
	n := len(names)
	if n > maxUnaddressedNames {
		names = append(names[:maxUnaddressedNames], fmt.Sprintf("and %d more", n-maxUnaddressedNames))
	}
	log.Warn("instances no guest can fetch: no address identifies them", "count", n, "instances", strings.Join(names, ", "), "fix", UnaddressedHint(kubernetes))
}

// UnaddressedHint says how an instance gets an address its guest's
// requests are identified by: the warning of serve's start and of
// `vminit instances put`.
func UnaddressedHint(kubernetes bool) string {
	if kubernetes {
		return "a KubeVirt VM or VMI that names it (vminit.dev/instance: NAME) claims it by its pod-network address, or its spec.metadataServer.addresses inside the namespace's --spec-addresses (docs/kubernetes.md, \"Who is served where\")"
	}
	return "list the address its VM's requests come from in spec.metadataServer.addresses (to try serve on loopback: 127.0.0.1 with --allow-loopback-instances)"
}
