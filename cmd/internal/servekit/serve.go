package servekit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/cmd/internal/cmdkit"
	"github.com/vminit/vminit/cmd/internal/serve"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/lib/secretfile"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/kubestore"
)

type serveFlags struct {
	listen          []string
	instances       string
	instancesCache  string
	trustedProxies  []string
	hmacKeyFile     string
	proxyHopLimit   bool
	tokenKeyFile    string
	metricsListen   string
	adminListen     string
	adminTokenFile  string
	adminTLSCert    string
	adminTLSKey     string
	adminClientCA   string
	rate            float64
	burst           int
	logFormat       string
	ignitionVariant string
	reportURL       string // --report-url
	bootReports     bool   // --boot-reports
	shutdownTimeout time.Duration
	stallAfter      time.Duration
	maxConns        int
	maxConnsPerSrc  int
	allowLoopback   bool
	kubernetes      bool
	node            string // --node: node mode (with --kubernetes)
	nodeMaxFollow   int    // --node-max-follow
	guestHops       int    // --guest-hops; -1: by --node
	cluster         cmdkit.ClusterFlags
	// other is a store the program adds (vminit-server's etcd), or nil.
	other StoreFlags
}

// StoreFlags are the flags of a store a program adds to serve's:
// vminit-server's etcd store (cmd/internal/servercmd). vminit has none,
// so that it does not link etcd's client (docs/benchmarks.md, "Whole
// process").
type StoreFlags interface {
	// Register adds the store's flags to fl.
	Register(fl *pflag.FlagSet)
	// Chooser is the flag that chooses the store (--etcd-endpoints), and
	// whether it was given.
	Chooser() (flag string, given bool)
	// Files are the files the flags name, by flag; secret ones must not
	// be inside --instances.
	Files() (files, secret map[string]string)
	// Store checks the flags together (a usage error names the flag) and
	// returns the store's opener, nil when the store is not chosen.
	Store(logger *slog.Logger) (serve.OpenFunc, error)
	// Hint adds to an error opening the store which flags fix it.
	Hint(err error) error
}

// NewCommand is serve as the command use (vminit's "serve", or
// vminit-server), with the flags of other (nil: none) beside those of the
// directory and Kubernetes stores.
func NewCommand(use string, other StoreFlags) *cobra.Command {
	f := serveFlags{other: other}
	cmd := &cobra.Command{
		Use:   use,
		Short: "Serve instances' first-boot data over HTTP (" + dialectTitles() + ")",
		Example: `  vminit serve --instances /var/lib/vminit/instances --listen 169.254.169.254:80
  vminit serve --instances specs/ --listen 127.0.0.1:8080 --metrics-listen 127.0.0.1:9100 \
    --admin-listen 127.0.0.1:8443 --admin-token-file admin-token
  vminit serve --kubernetes --namespace vms --listen 0.0.0.0:8080
  vminit serve --kubernetes --node "$NODE_NAME" --listen 0.0.0.0:8080
  vminit-server --etcd-endpoints https://etcd-0:2379 --etcd-ca ca.pem --etcd-cert client.crt \
    --etcd-key client.key --listen 169.254.169.254:80`,
		Long: `serve answers each VM's metadata requests with the data of the instance
that owns the request's source address (spec.metadataServer.addresses), in
every dialect guests speak:

` + dialectPaths() + `
Instances come from a directory of spec files (--instances, re-read on
change; SIGHUP re-reads every file, including files[].source.file content)
or from etcd (vminit-server, the daemon that is serve with etcd's client
linked: --etcd-endpoints, followed by watch; over TLS with --etcd-ca and,
for client-certificate auth, --etcd-cert/--etcd-key; etcd users with
--etcd-username/--etcd-password-file), or from a Kubernetes cluster's
Instance objects (--kubernetes: --kubeconfig, else the pod's service
account; --namespace to limit it). There, instances are namespace/name,
and a VMI's addresses identify the Instance it or its VM names
(vminit.dev/instance), ahead of any address a spec lists; a spec's own
addresses count only inside the networks --spec-addresses gives its
namespace (none by default), and an address claimed twice serves nobody
(docs/kubernetes.md, "Who is served where"). --node NAME serves one
node's VMs alone (a DaemonSet's agent): only the VMIs labelled
kubevirt.io/nodeName=NAME are watched, and the Instances vminit-controller
labels node.vminit.dev/NAME; what the labels do not cover yet is followed
by name, at most --node-max-follow objects (docs/kubernetes.md, "Node
mode"). A reload
swaps the instances in at once: no request fails or sees a partial state;
while etcd or the API server is unreachable the server answers from memory.

SIGTERM and SIGINT stop accepting connections at once and close idle
ones; requests already accepted finish, for at most --shutdown-timeout,
after which the rest are cut (and counted in the log).

A VM cannot starve the others: each source address may hold
--max-connections-per-source connections (trusted proxies are bound by the
total only; an address no instance owns, 4), all guests together
--max-connections, and the addresses no instance owns an eighth of it; at
that limit the connections idle the longest are closed for newcomers (and
for an instance's, the oldest of an unknown address), and beyond three
quarters of it idle connections are closed after 1 s. A 404 for an unknown address and a 429 close their
connection. The admin and metrics listeners have limits of their own.

Instances are refused (logged, and 422 from the admin API; the last good
version stays served) when they fail the checks of vminit validate, or
claim a loopback address or one inside a --trusted-proxy network. With
--instances, the server listens as soon as the files are parsed: the
checks of vminit validate on what was read at start run in the
background (and on an instance's first request, if it comes first), and
an instance is served only once it passed them; those refused are logged
before "dirstore: deferred checks done".

Guests report their first boot on the same listeners: cloud-init's
reporting events (POST /vminit/v1/events) and the agent's final report
(POST /vminit/v1/report), each written only to the instance the request
is identified as, at most 20 a second per instance (a burst of 200) apart
from --rate; every answered fetch counts too. An instance's first boot is
pending, fetched, running, done or failed, and stalled after
--stall-after without a word from its guest (docs/metadata-server.md,
"First-boot events"; docs/security.md, "The guests' write path").
Stores that share statuses between replicas (etcd, Kubernetes) get each
replica's written back.

Metrics (Prometheus) are served only on --metrics-listen, the admin API
(vminit instances --server) and the first-boot web page, /ui/ (log in with
the admin token; docs/first-boot-status.md), only on --admin-listen: over HTTPS with --admin-tls-cert/--admin-tls-key,
and with client certificates required with --admin-client-ca (the three
files are re-read when they change: a renewed certificate needs no
restart). Clear-text admin listeners beyond loopback are logged as a
warning.

The garbage collector runs at GOGC=` + strconv.Itoa(mdserver.GCPercent) + ` unless the GOGC environment
variable says otherwise: the loaded instances are a large, long-lived heap,
and collecting it less often shortens the tail of a boot storm, for a peak
heap of ` + strconv.FormatFloat(float64(100+mdserver.GCPercent)/100, 'g', -1, 64) + ` times the live one (GOMEMLIMIT bounds it if needed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.listen, "listen", []string{"169.254.169.254:80"}, "address to serve guests on (repeatable)")
	fl.StringVar(&f.instances, "instances", "", "directory of instance spec files")
	fl.StringVar(&f.instancesCache, "instances-cache", "", "start-up cache for --instances: a restart parses only the spec files changed since (a file in a directory only vminit writes, e.g. systemd's $CACHE_DIRECTORY)")
	if other != nil {
		other.Register(fl)
	}
	fl.StringArrayVar(&f.trustedProxies, "trusted-proxy", nil, "CIDR of a proxy allowed to name instances with the signed X-Vminit-Instance header (repeatable)")
	fl.StringVar(&f.hmacKeyFile, "hmac-key-file", "", "file holding the key that signs X-Vminit-Instance headers")
	fl.BoolVar(&f.proxyHopLimit, "trusted-proxy-sets-hop-limit", false, "the trusted proxies give IMDSv2 token answers the hop limit of their X-Vminit-Token-Hop-Limit header; without it a token PUT through a proxy is refused")
	fl.StringVar(&f.tokenKeyFile, "token-key-file", "", "file holding the IMDSv2 token key (share it between replicas; default: random per process)")
	fl.StringVar(&f.metricsListen, "metrics-listen", "", "address to serve Prometheus /metrics on (never on --listen)")
	fl.StringVar(&f.adminListen, "admin-listen", "", "address to serve the admin API on")
	fl.StringVar(&f.adminTokenFile, "admin-token-file", "", "file holding the admin API bearer token (required with --admin-listen); re-read when it changes, ending the web sessions of the old token")
	fl.StringVar(&f.adminTLSCert, "admin-tls-cert", "", "PEM certificate (chain) for HTTPS on --admin-listen (with --admin-tls-key)")
	fl.StringVar(&f.adminTLSKey, "admin-tls-key", "", "PEM private key of --admin-tls-cert")
	fl.StringVar(&f.adminClientCA, "admin-client-ca", "", "PEM CA bundle: admin clients must also present a certificate it signed (mutual TLS)")
	fl.Float64Var(&f.rate, "rate", 0, "requests per second each instance may make (0: unlimited)")
	fl.IntVar(&f.burst, "burst", 0, "rate-limit burst (default max(100, 2*rate))")
	fl.StringVar(&f.logFormat, "log-format", "", "log format: json or text (default: text on a terminal, else json)")
	fl.StringVar(&f.ignitionVariant, "ignition-variant", "", "render every Ignition config for this variant: fcos, rhcos or flatcar (default: each instance's spec.ignition.variant)")
	fl.BoolVar(&f.bootReports, "boot-reports", true, "have the served user data and Ignition configs report each guest's first boot to this server (cloud-init's reporting webhook and a final report; Ignition's completion unit)")
	fl.StringVar(&f.reportURL, "report-url", "", "base URL the guests report their first boot to (default: the scheme and host each guest reached this server at), e.g. http://192.0.2.1:8080")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long requests in flight may finish on SIGTERM or SIGINT before they are cut")
	fl.DurationVar(&f.stallAfter, "stall-after", firstboot.DefaultStallAfter, "how long a first boot may go without a fetch or an event from its guest before it reads as stalled")
	fl.IntVar(&f.maxConns, "max-connections", mdserver.DefaultTotal(), "connections all guests together may hold open; unset, as many as this host's descriptor limit (ulimit -n) leaves room for, up to 16384")
	fl.IntVar(&f.maxConnsPerSrc, "max-connections-per-source", mdserver.DefaultPerSource, "connections one source address may hold open (trusted proxies: the total only)")
	// For tests, benchmarks and QEMU user-mode networking, whose guests
	// reach the host from 127.0.0.1: in production every process of the
	// host would get a loopback instance's data.
	fl.BoolVar(&f.allowLoopback, "allow-loopback-instances", false, "let loopback addresses identify instances, e.g. to try serve with --listen 127.0.0.1:8080 (tests and QEMU user networking only: every process of this host could read their data)")
	fl.BoolVar(&f.kubernetes, "kubernetes", false, "serve the Instance objects of a Kubernetes cluster (instead of --instances)")
	f.cluster.Register(fl, "with --kubernetes: namespace whose Instances are served (repeatable; default every namespace)")
	fl.StringVar(&f.node, "node", "", "with --kubernetes: serve the VMs of this node alone (node mode: a DaemonSet's agent, its spec.nodeName from the downward API): watch only the VMIs labelled kubevirt.io/nodeName=NODE and the Instances vminit-controller labels node.vminit.dev/NODE, and by name what the labels do not cover yet")
	fl.IntVar(&f.nodeMaxFollow, "node-max-follow", kubestore.DefaultMaxFollow, "with --node: the most objects (Instances, VirtualMachines, ConfigMaps) followed by name, a watch each, where the controller's node labels do not cover them; the others are refused, logged and counted (vminit_node_follow_refused_total)")
	fl.IntVar(&f.guestHops, "guest-hops", -1, "routers between this server and its guests, added to each Instance's tokenHopLimit to make the IP TTL of IMDSv2 token answers (0–8; default 1 with --node, where the virt-launcher pod routes the answer to its guest, else 0)")
	return cmd
}

// guestHops is --guest-hops, or its default: one router (the
// virt-launcher pod's, which routes between its eth0 and its guest's
// bridge) in node mode, none elsewhere (docs/kubernetes.md, "IMDSv2
// behind KubeVirt's masquerade").
func guestHops(f serveFlags) (int, error) {
	switch {
	case f.guestHops < -1 || f.guestHops > mdserver.MaxGuestHops:
		return 0, usagef("--guest-hops=%d: want 0–%d", f.guestHops, mdserver.MaxGuestHops)
	case f.guestHops >= 0:
		return f.guestHops, nil
	case f.node != "":
		return 1, nil
	}
	return 0, nil
}

// secretsOutside refuses key files inside the spec directory: any spec
// file there may read them (files[].source.file) and hand them to a VM.
func secretsOutside(dir string, files map[string]string) error {
	if dir == "" {
		return nil
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	for _, flag := range slices.Sorted(maps.Keys(files)) {
		p := files[flag]
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			abs = r
		}
		if rel, err := filepath.Rel(root, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return usagef("%s %s is inside --instances %s, whose specs may read any file there (files[].source.file) and serve it to a VM: keep it elsewhere", flag, p, dir)
		}
	}
	return nil
}

// listenHint says, when a listen address is not one of this host's (as
// serve's default 169.254.169.254 is not, until it is added), how to add
// it or how to try serve on loopback instead.
func listenHint(err error) error {
	var op *net.OpError
	if !errors.Is(err, syscall.EADDRNOTAVAIL) || !errors.As(err, &op) || op.Addr == nil {
		return err
	}
	ap, parseErr := netip.ParseAddrPort(op.Addr.String())
	if parseErr != nil {
		return err
	}
	host := ap.Addr().Unmap()
	return fmt.Errorf("%w\n(%s is not an address of this host: add it, e.g. `ip addr add %s dev lo` or on a dummy interface "+
		"(`ip link add vminit0 type dummy`), or try serve on loopback with --listen 127.0.0.1:8080 --allow-loopback-instances)",
		err, host, netip.PrefixFrom(host, host.BitLen()))
}

// IsLoopback reports whether a listen address stays on this host.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// readKey reads the key in a --*-key-file, if one was given.
func readKey(path, what string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	k, err := secretfile.Key(path, what, 16)
	return []byte(k), err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// kubeStoreConfig turns the cluster flags into a Kubernetes store's
// configuration.
func kubeStoreConfig(f serveFlags, logger *slog.Logger) (kubestore.Config, error) {
	policy, err := f.cluster.AddressPolicy()
	if err != nil {
		return kubestore.Config{}, err
	}
	rest, err := f.cluster.RESTConfig()
	if err != nil {
		return kubestore.Config{}, err
	}
	cmdkit.LogKlog(logger)
	kv, err := f.cluster.KubeVirt(rest)
	if err != nil {
		return kubestore.Config{}, err
	}
	if f.node != "" && !kv {
		return kubestore.Config{}, usagef("--node serves the KubeVirt VMs of a node, and --kubevirt=%s found no KubeVirt (kubevirt.io/v1) in the cluster", f.cluster.KubeVirtMode())
	}
	if f.nodeMaxFollow < 1 {
		return kubestore.Config{}, usagef("--node-max-follow=%d: want 1 or more", f.nodeMaxFollow)
	}
	return kubestore.Config{REST: rest, Namespaces: f.cluster.Namespaces(), KubeVirt: kv, Logger: logger, Addresses: policy, Node: f.node,
		MaxFollow: f.nodeMaxFollow}, nil
}

// runServe checks the flags, turns them into serve.Options and runs the
// server they describe.
func runServe(ctx context.Context, f serveFlags, stderr io.Writer) error {
	logger, err := cmdkit.NewLogger(f.logFormat, stderr)
	if err != nil {
		return err
	}
	o, err := serveOptions(f, logger)
	if err != nil {
		return err
	}
	// SIGHUP is caught before the store loads, which can take seconds:
	// SIGHUP's default action is to exit, and a reload asked for meanwhile
	// (systemctl reload) must not stop the server. It is applied once
	// serving starts.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	o.GCPercent = mdserver.SetGC()
	if f.allowLoopback {
		logger.Warn("--allow-loopback-instances: loopback addresses identify instances; every process of this host can read their data")
	}
	srv, err := serve.New(ctx, o)
	if err != nil {
		if se := (*serve.StoreError)(nil); errors.As(err, &se) && o.Store.Open != nil {
			err = f.other.Hint(se.Err)
		}
		return listenHint(err)
	}
	defer srv.Close()
	return srv.Run(ctx, hup, f.shutdownTimeout)
}

// serveOptions checks the flags together and reads the files they name.
func serveOptions(f serveFlags, logger *slog.Logger) (serve.Options, error) {
	var o serve.Options
	if err := oneStore(f); err != nil {
		return o, err
	}
	otherFiles, otherSecrets := f.otherFiles()
	if err := cmdkit.RegularFiles(withOther(map[string]string{"--admin-token-file": f.adminTokenFile, "--hmac-key-file": f.hmacKeyFile,
		"--token-key-file": f.tokenKeyFile, "--admin-tls-cert": f.adminTLSCert, "--admin-tls-key": f.adminTLSKey,
		"--admin-client-ca": f.adminClientCA, "--instances-cache": f.instancesCache}, otherFiles)); err != nil {
		return o, err
	}
	store, err := storeConfig(f, logger)
	if err != nil {
		return o, err
	}
	if len(f.listen) == 0 {
		return o, usagef("--listen: give at least one address")
	}
	handler, err := handlerOptions(f, logger)
	if err != nil {
		return o, err
	}
	if f.maxConns < 1 || f.maxConnsPerSrc < 1 {
		return o, usagef("--max-connections and --max-connections-per-source must be at least 1")
	}
	if f.stallAfter <= 0 {
		return o, usagef("--stall-after %v: give a positive duration, e.g. 15m", f.stallAfter)
	}
	if err := secretsOutside(f.instances, withOther(map[string]string{"--admin-token-file": f.adminTokenFile, "--hmac-key-file": f.hmacKeyFile,
		"--token-key-file": f.tokenKeyFile, "--admin-tls-key": f.adminTLSKey, "--instances-cache": f.instancesCache}, otherSecrets)); err != nil {
		return o, err
	}
	if err := cacheDirectory(f.instancesCache); err != nil {
		return o, err
	}
	if handler.TokenKey, err = readKey(f.tokenKeyFile, "token key"); err != nil {
		return o, err
	}
	o = serve.Options{Store: store, Handler: handler, Listen: f.listen, MetricsListen: f.metricsListen,
		Guests: mdserver.Limits{PerSource: f.maxConnsPerSrc, Total: f.maxConns}, StallAfter: f.stallAfter, Logger: logger}
	if err := adminOptions(f, logger, &o); err != nil {
		return o, err
	}
	return o, nil
}

// oneStore checks that the flags choose exactly one store.
func oneStore(f serveFlags) error {
	choices, n := []string{"--instances DIR"}, btoi(f.instances != "")+btoi(f.kubernetes)
	if f.other != nil {
		flag, given := f.other.Chooser()
		choices, n = append(choices, flag), n+btoi(given)
	}
	if n != 1 {
		return usagef("give exactly one of %s and --kubernetes", strings.Join(choices, ", "))
	}
	return nil
}

// otherFiles are the files the other store's flags name (none without
// one).
func (f serveFlags) otherFiles() (files, secret map[string]string) {
	if f.other == nil {
		return nil, nil
	}
	return f.other.Files()
}

// withOther adds the other store's files to files, by flag.
func withOther(files, other map[string]string) map[string]string {
	maps.Copy(files, other)
	return files
}

// cacheDirectory creates the directory of --instances-cache if it is
// missing (0700: the cache holds every spec), so that the first start
// writes the cache instead of logging an error on every start.
func cacheDirectory(cache string) error {
	if cache == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(cache), 0o700); err != nil {
		return usagef("--instances-cache: %v", err)
	}
	return nil
}

// storeConfig is the store the --instances, --kubernetes or the other
// store's flags name.
func storeConfig(f serveFlags, logger *slog.Logger) (serve.StoreConfig, error) {
	var sc serve.StoreConfig
	var open serve.OpenFunc
	if f.other != nil {
		var err error
		if open, err = f.other.Store(logger); err != nil {
			return sc, err
		}
	}
	if f.instancesCache != "" && f.instances == "" {
		return sc, usagef("--instances-cache is for --instances DIR; the etcd and Kubernetes stores keep no cache")
	}
	switch {
	case f.kubernetes:
		kcfg, err := kubeStoreConfig(f, logger)
		if err != nil {
			return sc, err
		}
		sc.Kubernetes = &kcfg
	case f.cluster.Given():
		return sc, usagef("--kubeconfig, --namespace and --spec-addresses are for --kubernetes")
	case f.node != "":
		return sc, usagef("--node is for --kubernetes (node mode serves a node's KubeVirt VMs)")
	case f.instances != "":
		sc.Dir, sc.DirCache = f.instances, f.instancesCache
	default:
		sc.Open = open
	}
	return sc, nil
}

// handlerOptions are the guests' handler's settings: the trusted proxies
// and their key, rates, the Ignition variant (the token key is read after
// the key files are known to be outside --instances).
func handlerOptions(f serveFlags, logger *slog.Logger) (mdserver.Options, error) {
	var proxies []netip.Prefix
	for _, c := range f.trustedProxies {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return mdserver.Options{}, usagef("--trusted-proxy %q: %v", c, err)
		}
		proxies = append(proxies, p.Masked())
	}
	hmacKey, err := readKey(f.hmacKeyFile, "HMAC key")
	if err != nil {
		return mdserver.Options{}, err
	}
	reportURL := f.reportURL
	if reportURL != "" {
		if reportURL, err = bootreport.ParseBaseURL(reportURL); err != nil {
			return mdserver.Options{}, usagef("--report-url=%q: %v", f.reportURL, err)
		}
	}
	hops, err := guestHops(f)
	if err != nil {
		return mdserver.Options{}, err
	}
	if len(proxies) > 0 && hmacKey == nil {
		logger.Warn("--trusted-proxy without --hmac-key-file: proxies name instances by an unsigned X-Forwarded-For; with a key, only the signed X-Vminit-Instance header is accepted")
	}
	return mdserver.Options{
		TrustedProxies: proxies, HMACKey: hmacKey, ProxiesSetHopLimit: f.proxyHopLimit,
		Rate: f.rate, Burst: f.burst, Logger: logger,
		IgnitionVariant: ignition.Variant(f.ignitionVariant), AllowLoopbackInstances: f.allowLoopback,
		ReportURL: reportURL, NoBootReports: !f.bootReports, GuestHops: hops,
	}, nil
}

// adminOptions checks the --admin-* flags and sets o's admin listener.
func adminOptions(f serveFlags, logger *slog.Logger, o *serve.Options) error {
	if (f.adminTLSCert == "") != (f.adminTLSKey == "") {
		return usagef("--admin-tls-cert and --admin-tls-key go together")
	}
	if f.adminClientCA != "" && f.adminTLSCert == "" {
		return usagef("--admin-client-ca needs --admin-tls-cert and --admin-tls-key (client certificates are checked in the TLS handshake)")
	}
	if f.adminTLSCert != "" && f.adminListen == "" {
		return usagef("--admin-tls-cert is for the admin API: give --admin-listen too")
	}
	if f.adminListen == "" {
		return nil
	}
	if f.adminTokenFile == "" {
		return usagef("--admin-listen needs --admin-token-file")
	}
	var err error
	if o.AdminToken, err = admin.WatchToken(f.adminTokenFile, logger); err != nil {
		return err
	}
	o.AdminListen = f.adminListen
	if f.adminTLSCert != "" {
		if o.AdminTLS, err = admin.TLSConfig(f.adminTLSCert, f.adminTLSKey, f.adminClientCA, logger); err != nil {
			return fmt.Errorf("admin TLS: %w", err)
		}
	} else if !IsLoopback(f.adminListen) {
		logger.Warn("the admin API listens beyond loopback without TLS: its bearer token and every spec cross the network in clear; give --admin-tls-cert and --admin-tls-key", "address", f.adminListen)
	}
	return nil
}
