// Package controllercmd is the vminit-controller command
// (cmd/vminit-controller): the flags of cmd/internal/controller, which
// reconciles Instances and KubeVirt VirtualMachines in a cluster. It is a
// binary of its own, not a vminit subcommand, because the controller's
// typed clientset and leader election would cost every vminit run their
// start-up (docs/benchmarks.md, "Whole process").
package controllercmd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/cmd/internal/cmdkit"
	"github.com/vminit/vminit/cmd/internal/controller"
)

// The kit's helpers, shared with vminit's commands, under the names this
// file had when it was one of them.
var (
	usagef    = cmdkit.Usagef
	newLogger = cmdkit.NewLogger
	logKlog   = cmdkit.LogKlog
)

// Main runs vminit-controller with args (without the program name) and
// returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return cmdkit.Run(New(), args, stdout, stderr)
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

type controllerFlags struct {
	cluster       cmdkit.ClusterFlags
	patchVMs      bool
	workers       int
	leaderElect   bool
	leaseNS       string
	leaseName     string
	identity      string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	listen        string
	healthListen  string
	logFormat     string
	bootReports   bool   // --boot-reports, as vminit serve names it
	reportURL     string // --report-url, likewise
}

// New returns the vminit-controller command.
func New() *cobra.Command {
	var f controllerFlags
	cmd := &cobra.Command{
		Use:   "vminit-controller",
		Short: "Reconcile Instance objects and KubeVirt VirtualMachines in a Kubernetes cluster",
		Long: `vminit-controller runs in a cluster (deploy/kubernetes) and keeps vminit's objects
true:

  Instance (vminit.dev/v1alpha1): checked as 'vminit validate' checks a spec
  file and rendered for its agent; its status says Valid, Rendered and
  Served (every problem with its field path), the sha256 of each rendered
  file (none where it carries a Secret's value) and the VMs that use it.

  KubeVirt VirtualMachine naming an Instance (annotation vminit.dev/instance)
  or carrying a cloud-init volume or the kubevirt.io/ignitiondata
  annotation: its user data and network data are written to a Secret
  <vm>-vminit (keys userdata and networkdata, owned by the VM), rewritten
  only when their bytes change, following the Instance and the Secrets the
  VM's data reads. With --patch-vms the VM's cloud-init volume is pointed at
  it; otherwise an Event on the VM says how to reference it.

  The data of a VM naming an Instance reports the guest's first boot
  (cloud-init's reporting webhook and a final report; Ignition's
  completion unit) to --report-url: by default http://169.254.169.254, the
  node agent (vminit serve --kubernetes --node) that knows the guest by
  its VMI's pod address, so the Instance's status.firstBoot becomes done
  or failed. --boot-reports=false leaves the report out. A change of
  either rewrites every Secret when the controller restarts.

Replicas elect a leader on a Lease (--leader-elect); only the leader
reconciles. /metrics, /healthz and /readyz are served on --metrics-listen,
loopback by default: the metrics have no authentication. --health-listen
serves /healthz and /readyz alone, for the kubelet's probes.`,
		Example: `  vminit-controller --kubeconfig ~/.kube/config
  vminit-controller --namespace vms --patch-vms
  vminit-controller --namespace vms --report-url http://10.96.100.10:8080
  vminit-controller --kubeconfig ~/.kube/config --namespace default --leader-elect=false`,
		Version: cmdkit.Version(),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runController(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	cmd.SetVersionTemplate("{{.Version}}\n") // as `vminit --version` prints it
	fl := cmd.Flags()
	f.cluster.Register(fl, "namespace to reconcile (repeatable; default every namespace, which needs a ClusterRoleBinding)")
	fl.BoolVar(&f.patchVMs, "patch-vms", false, "point each VM's cloud-init volume at the Secret made for it")
	fl.IntVar(&f.workers, "workers", 4, "objects reconciled in parallel")
	fl.BoolVar(&f.leaderElect, "leader-elect", true, "elect one leader among replicas on a Lease")
	fl.StringVar(&f.leaseNS, "leader-election-namespace", "", "namespace of the Lease (default: the pod's own; outside a pod, as from a shell, the kubeconfig context's namespace, else default)")
	fl.StringVar(&f.leaseName, "leader-election-id", "vminit-controller", "name of the Lease")
	fl.StringVar(&f.identity, "identity", "", "this replica's name in the Lease (default $POD_NAME, else the host name)")
	fl.DurationVar(&f.leaseDuration, "lease-duration", 15*time.Second, "how long a leader's Lease lasts without renewal")
	fl.DurationVar(&f.renewDeadline, "renew-deadline", 10*time.Second, "how long a leader tries to renew before it steps down")
	fl.DurationVar(&f.retryPeriod, "retry-period", 2*time.Second, "how often replicas try to take or renew the Lease")
	fl.StringVar(&f.listen, "metrics-listen", "127.0.0.1:8080", "address of /metrics, /healthz and /readyz, without authentication (empty: none)")
	fl.StringVar(&f.healthListen, "health-listen", "", "address of /healthz and /readyz alone, for probes from beyond the pod (empty: none)")
	fl.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
	fl.BoolVar(&f.bootReports, "boot-reports", true, "have the Secrets of VMs naming an Instance report the guest's first boot to --report-url (cloud-init's reporting webhook and a final report; Ignition's completion unit)")
	fl.StringVar(&f.reportURL, "report-url", controller.DefaultReportURL, "base URL the guests report their first boot to: the node agent's link-local address, or a vminit server's, e.g. http://192.0.2.1:8080")
	return cmd
}

// kubeVirtAbsent says, when the controller will not read KubeVirt
// VirtualMachines, why and what it does instead; --patch-vms then has
// nothing to patch, an error.
func kubeVirtAbsent(f controllerFlags, kubevirt bool, logger *slog.Logger) error {
	switch {
	case kubevirt:
		return nil
	case f.cluster.KubeVirtMode() == "false" && f.patchVMs:
		return usagef("--patch-vms needs KubeVirt's VirtualMachines, which --kubevirt=false leaves unread")
	case f.cluster.KubeVirtMode() == "false":
		return nil
	case f.patchVMs:
		return usagef("--patch-vms: KubeVirt is not installed in this cluster (it serves no kubevirt.io/v1 VirtualMachines): install it, or run without --patch-vms to reconcile Instances alone")
	}
	logger.Info("KubeVirt is not installed in this cluster (no kubevirt.io/v1 VirtualMachines): reconciling Instances alone")
	return nil
}

// leaseNamespace is --leader-election-namespace, else the pod's own
// namespace, else (outside a pod: run from a shell) the kubeconfig
// context's, else default, as kubectl would choose.
func leaseNamespace(f controllerFlags) (string, error) {
	if f.leaseNS != "" {
		return f.leaseNS, nil
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	ns, err := f.cluster.ContextNamespace()
	if err != nil {
		return "", usagef("--leader-election-namespace: %v", err)
	}
	if ns == "" {
		ns = "default"
	}
	return ns, nil
}

func runController(ctx context.Context, f controllerFlags, stderr io.Writer) error {
	logger, err := newLogger(f.logFormat, stderr)
	if err != nil {
		return err
	}
	if f.workers < 1 {
		return usagef("--workers %d: want at least 1", f.workers)
	}
	reportURL, err := bootreport.ParseBaseURL(f.reportURL)
	if err != nil {
		return usagef("--report-url=%q: %v", f.reportURL, err)
	}
	policy, err := f.cluster.AddressPolicy()
	if err != nil {
		return err
	}
	rest, err := f.cluster.RESTConfig()
	if err != nil {
		return err
	}
	logKlog(logger)
	kubevirt, err := f.cluster.KubeVirt(rest)
	if err != nil {
		return err
	}
	cfg := controller.Config{REST: rest, Namespaces: f.cluster.Namespaces(), KubeVirt: kubevirt, PatchVMs: f.patchVMs,
		Workers: f.workers, Logger: logger, Addresses: policy, ReportURL: reportURL, NoBootReports: !f.bootReports}
	if err := kubeVirtAbsent(f, kubevirt, logger); err != nil {
		return err
	}
	if f.leaderElect {
		ns, err := leaseNamespace(f)
		if err != nil {
			return err
		}
		id := f.identity
		if id == "" {
			id = os.Getenv("POD_NAME")
		}
		cfg.LeaderElection = controller.LeaderElection{Namespace: ns, Name: f.leaseName, Identity: id,
			LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod}
	}
	c, err := controller.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	health := http.NewServeMux()
	health.Handle("GET /healthz", c.Handler())
	health.Handle("GET /readyz", c.Handler())
	for _, l := range []struct {
		addr, what string
		h          http.Handler
	}{{f.listen, "metrics and health", c.Handler()}, {f.healthListen, "health", health}} {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: l.h, ReadHeaderTimeout: 5 * time.Second,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		go srv.Serve(ln)
		defer srv.Close()
		logger.Info("serving "+l.what, "address", ln.Addr().String())
	}
	if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
