// Package nodecmd is the vminit-node command (cmd/vminit-node), the node
// agent a DaemonSet runs on every node of a KubeVirt cluster: `vminit
// serve` (servekit.NewCommand, every flag of it; `--kubernetes --node
// NAME` on a node) that also installs the data path bringing the node's
// guests' requests for 169.254.169.254:80 to it, and removes exactly what
// it added when it stops (docs/kubernetes.md, "How a guest reaches
// vminit"):
//
//   - --intercept host: mdserver/intercept's table in the node's network
//     namespace, put back if something deletes it;
//   - --intercept cni: the chained CNI plugin vminit-cni copied into the
//     node's CNI bin directory and its entry added to the pod network's
//     configuration list, put back as soon as the CNI rewrites its file
//     (followed by inotify, with a slow poll behind it; as Istio's CNI
//     agent does);
//   - --intercept none: serve alone, for a node where something else
//     brings the requests.
//
// The data path is installed before serving and removed after serve
// returns, on SIGTERM too (which is how a DaemonSet's pod is stopped):
// the wrapper catches SIGTERM and SIGINT itself from the start, so a
// signal during the installation still removes it. A node it cannot work
// on (no nftables, no conflist, a conflist of a CNI version vminit-cni
// does not speak, a directory it may not write) is refused with the
// reason before anything is served or changed. --uninstall removes what
// an agent killed before its clean-up (SIGKILL, a node crash) left.
//
// It is a binary of its own, as vminit-server and vminit-controller are,
// because it links nftables' netlink and the CNI types (through
// mdserver/intercept and cmd/internal/cniplugin), which every vminit run
// would otherwise carry (cmd/vminit's TestLeanGraph holds vminit to none
// of them, and vminit-node to none of the controller's and etcd's).
package nodecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vminit/vminit/cmd/internal/cmdkit"
	"github.com/vminit/vminit/cmd/internal/servekit"
	"github.com/vminit/vminit/mdserver/intercept"
)

// Main runs vminit-node with args (without the program name) and returns
// the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return cmdkit.Run(New(), args, stdout, stderr)
}

// New returns the vminit-node command.
func New() *cobra.Command {
	return newCommand(pollInterval, backstopInterval)
}

// newCommand is New with the intervals at which the host path's table and
// the cni path's conf dir are checked (tests change them).
func newCommand(interval, backstop time.Duration) *cobra.Command {
	cmd := servekit.NewCommand("vminit-node", nil)
	f := &flags{interval: interval, backstop: backstop}
	f.register(cmd.Flags())
	serve := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return f.run(cmd, args, serve) }
	cmd.Short = "vminit's node agent: `vminit serve` and the interception of 169.254.169.254 on its node"
	cmd.Long = `vminit-node is the node agent of a KubeVirt cluster: 'vminit serve'
(--kubernetes --node NAME on a node) that also brings the node's guests'
requests for 169.254.169.254:80 to itself, and removes what it added when
it stops (SIGTERM, SIGINT) or fails:

  --intercept host  vminit's nftables table (ip vminit) in the node's
                    network namespace, redirecting TCP to 169.254.169.254:80
                    arriving on --pod-interfaces to --agent-address, source
                    kept, and dropping the rest to 169.254.169.254; with an
                    IPv6 agent address, ip6 vminit the same for
                    [fd00:ec2::254]:80; put back if deleted. For CNIs whose pod traffic crosses the
                    node's netfilter (bridge, kindnet, Flannel, Calico, ...).
  --intercept cni   vminit-cni (--cni-plugin) copied into --cni-bin-dir and
                    {"type": "vminit-cni", "agent": AGENT} (and "agent6")
                    added at the end
                    of the plugins of the first configuration list of
                    --cni-conf-dir (lexical order, as runtimes pick it),
                    put back when the CNI rewrites its file. For CNIs that
                    bypass the node's netfilter (OVN-Kubernetes, Cilium
                    with eBPF host routing). The list must be a .conflist
                    of a CNI version vminit-cni speaks (1.0.0, 1.1.0).
  --intercept none  serve alone.

--agent-address is where the redirect sends requests: an address of this
node the agent listens on (default: the first --listen), e.g. --listen
$(NODE_IP):8775 with NODE_IP from the pod's status.hostIP. On a
dual-stack node, a second --listen (or --agent-address) on the node's IPv6
address, [IPv6]:8775, intercepts EC2's IPv6 metadata address
fd00:ec2::254 too; without one the agent says so and intercepts IPv4
alone. --node-ips $(NODE_IPS), with NODE_IPS from status.hostIPs (the
node's addresses), adds that --listen itself when the node has an IPv6
address, at the first --listen's port. A node the data
path cannot work on is refused with the reason, before anything is
changed or served. --uninstall removes what an agent killed without its
clean-up left (the table, or every vminit-cni entry and the binary) and
exits. docs/kubernetes.md, "How a guest reaches vminit".

Every other flag is serve's, and works as there:

` + cmd.Long
	cmd.Example = `  vminit-node --kubernetes --node "$NODE_NAME" --listen "$NODE_IP:8775" --intercept host
  vminit-node --kubernetes --node "$NODE_NAME" --listen "$NODE_IP:8775" --intercept cni \
    --cni-conf-dir /host/etc/cni/net.d --cni-bin-dir /host/opt/cni/bin
  vminit-node --intercept cni --uninstall`
	cmd.Version = cmdkit.Version()
	cmd.SetVersionTemplate("{{.Version}}\n") // as `vminit --version` prints it
	return cmd
}

// flags are the interception's flags.
type flags struct {
	intercept     string
	agents        []string
	nodeIPs       string
	podInterfaces []string
	confDir       string
	binDir        string
	plugin        string
	uninstall     bool
	interval      time.Duration // the host path's check
	backstop      time.Duration // the cni path's poll, beside inotify
}

// hostFlags and cniFlags belong to one data path each.
var (
	hostFlags = []string{"pod-interfaces"}
	cniFlags  = []string{"cni-conf-dir", "cni-bin-dir", "cni-plugin"}
)

func (f *flags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.intercept, "intercept", "host", "how guests' requests for 169.254.169.254:80 reach this agent: host (an nftables table in the node's namespace), cni (the chained CNI plugin vminit-cni) or none")
	fl.StringArrayVar(&f.agents, "agent-address", nil, "IP:PORT the interception redirects to: this node's address the agent listens on; repeat with [IPv6]:PORT on a dual-stack node (default: the first IPv4 and the first IPv6 --listen)")
	fl.StringSliceVar(&f.podInterfaces, "pod-interfaces", intercept.DefaultPodInterfaces, "--intercept host: the node-side interfaces pod traffic arrives on (names; a trailing * makes a prefix)")
	fl.StringVar(&f.nodeIPs, "node-ips", "", "the node's addresses, comma-separated (the downward API's status.hostIPs): an IPv6 one is listened on too, at the first --listen's port, and fd00:ec2::254 redirected there; none, and the agent says the node has no IPv6")
	fl.StringVar(&f.confDir, "cni-conf-dir", "/etc/cni/net.d", "--intercept cni: the node's CNI configuration directory")
	fl.StringVar(&f.binDir, "cni-bin-dir", "/opt/cni/bin", "--intercept cni: the node's CNI plugin directory")
	fl.StringVar(&f.plugin, "cni-plugin", "", "--intercept cni: the vminit-cni binary to install (default: vminit-cni beside this program)")
	fl.BoolVar(&f.uninstall, "uninstall", false, "remove what --intercept installs (after an agent was killed before its clean-up) and exit without serving")
}

// dataPath is one interception's installation on the node.
type dataPath interface {
	describe() string
	// install puts it in place, or fails having changed nothing.
	install(ctx context.Context) error
	// watch puts it back when something else undoes it, until ctx ends.
	watch(ctx context.Context)
	// remove takes out what install added, and succeeds where there is
	// nothing to remove.
	remove() error
}

// dataPath checks the flags together and returns the data path they
// describe (nil for --intercept none).
func (f *flags) dataPath(fl *pflag.FlagSet, logger *slog.Logger) (dataPath, error) {
	changed := func(names []string) string {
		for _, n := range names {
			if fl.Changed(n) {
				return "--" + n
			}
		}
		return ""
	}
	switch f.intercept {
	case "none":
		if n := changed(append(append([]string{"agent-address", "uninstall"}, hostFlags...), cniFlags...)); n != "" {
			return nil, cmdkit.Usagef("%s: with --intercept none there is nothing to install", n)
		}
		return nil, nil
	case "host":
		if n := changed(cniFlags); n != "" {
			return nil, cmdkit.Usagef("%s is for --intercept cni", n)
		}
	case "cni":
		if n := changed(hostFlags); n != "" {
			return nil, cmdkit.Usagef("%s is for --intercept host", n)
		}
	default:
		return nil, cmdkit.Usagef("--intercept %q: want host, cni or none", f.intercept)
	}
	agent, agent6, err := f.agentAddresses(fl)
	if err != nil {
		return nil, err
	}
	if !agent6.IsValid() && !f.uninstall && f.nodeIPs == "" { // with --node-ips, listenNodeIPv6 said so
		logger.Info("vminit-node: no IPv6 agent address (no --agent-address or --listen on one of the node's IPv6 addresses): " +
			"guests' requests for [fd00:ec2::254]:80 are not intercepted, IPv4 only")
	}
	agents := []netip.AddrPort{agent}
	if agent6.IsValid() {
		agents = append(agents, agent6)
	}
	if f.intercept == "host" {
		h := &hostPath{interval: f.interval, log: logger}
		for _, a := range agents {
			table, err := intercept.Host(a, f.podInterfaces)
			if err != nil {
				return nil, cmdkit.Usagef("--intercept host (--agent-address, default the first --listen of each family; --pod-interfaces): %v", err)
			}
			h.tables = append(h.tables, table)
		}
		return h, nil
	}
	for _, a := range agents {
		if _, err := intercept.Pod(a); err != nil { // what vminit-cni will build from the entry
			return nil, cmdkit.Usagef("--intercept cni (--agent-address, default the first --listen of each family): %v", err)
		}
	}
	plugin := f.plugin
	if plugin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, cmdkit.Usagef("--cni-plugin: not given, and this program's own path is unknown: %v", err)
		}
		plugin = filepath.Join(filepath.Dir(self), pluginType)
	}
	c := &cniPath{confDir: f.confDir, binDir: f.binDir, plugin: plugin, agent: agent.String(), interval: f.backstop, log: logger}
	if agent6.IsValid() {
		c.agent6 = agent6.String()
	}
	return c, nil
}

// agentAddresses are the IPv4 and IPv6 (invalid if none) addresses the
// interception redirects to: --agent-address, else the first --listen of
// each family. An IPv4 one is required: 169.254.169.254 is what every
// guest asks; fd00:ec2::254 is asked beside it.
func (f *flags) agentAddresses(fl *pflag.FlagSet) (v4, v6 netip.AddrPort, err error) {
	given, flag := f.agents, "--agent-address"
	if len(given) == 0 {
		given, _ = fl.GetStringArray("listen")
		flag = "--agent-address (default: the first --listen of each family)"
		if len(given) == 0 {
			return v4, v6, cmdkit.Usagef("--agent-address: not given, and no --listen to default to")
		}
	}
	for _, s := range given {
		ap, err := netip.ParseAddrPort(s)
		switch {
		case err != nil && flag == "--agent-address":
			return v4, v6, cmdkit.Usagef("%s %q: want this node's IP:PORT the agent listens on, e.g. --listen $(NODE_IP):8775", flag, s)
		case err != nil:
			continue // a --listen of a name: not an address to redirect to
		case ap.Addr().Is4() && !v4.IsValid():
			v4 = ap
		case !ap.Addr().Is4() && !v6.IsValid():
			v6 = ap
		case flag == "--agent-address":
			return v4, v6, cmdkit.Usagef("--agent-address %s: one address of each family at most", s)
		}
	}
	if !v4.IsValid() {
		return v4, v6, cmdkit.Usagef("%s: no IPv4 address: give this node's IPv4 IP:PORT the agent listens on (guests ask 169.254.169.254), e.g. --listen $(NODE_IP):8775", flag)
	}
	return v4, v6, nil
}

// listenNodeIPv6 adds a --listen on the node's IPv6 address from
// --node-ips, at the first --listen's port: the DaemonSet's way to a
// second family, since the downward API gives the node's IPv6 address
// only inside status.hostIPs, a list no flag value can pick from.
func (f *flags) listenNodeIPv6(fl *pflag.FlagSet, logger *slog.Logger) error {
	if f.nodeIPs == "" {
		return nil
	}
	var v6 netip.Addr
	for _, s := range strings.Split(f.nodeIPs, ",") {
		ip, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil || ip.Zone() != "" {
			return cmdkit.Usagef("--node-ips %q: %q is not an IP address (want the node's addresses, comma-separated: status.hostIPs)", f.nodeIPs, s)
		}
		if !ip.Is4() && !v6.IsValid() {
			v6 = ip
		}
	}
	listen, _ := fl.GetStringArray("listen")
	if !v6.IsValid() {
		logger.Info("vminit-node: the node has no IPv6 address (--node-ips): guests' requests for [fd00:ec2::254]:80 are not intercepted, IPv4 only", "node-ips", f.nodeIPs)
		return nil
	}
	first, err := netip.ParseAddrPort(listen[0])
	if !fl.Changed("listen") || err != nil {
		return cmdkit.Usagef("--node-ips: the port comes from the first --listen, IP:PORT (e.g. --listen $(NODE_IP):8775), which is not given as one")
	}
	for _, l := range listen {
		if ap, err := netip.ParseAddrPort(l); err == nil && ap.Addr() == v6 {
			return nil // listened on already
		}
	}
	return fl.Set("listen", netip.AddrPortFrom(v6, first.Port()).String())
}

// run is the command: install, serve, remove.
func (f *flags) run(cmd *cobra.Command, args []string, serve func(*cobra.Command, []string) error) error {
	format, _ := cmd.Flags().GetString("log-format")
	logger, err := cmdkit.NewLogger(format, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if err := f.listenNodeIPv6(cmd.Flags(), logger); err != nil {
		return err
	}
	dp, err := f.dataPath(cmd.Flags(), logger)
	if err != nil {
		return err
	}
	if dp == nil {
		return serve(cmd, args)
	}
	if f.uninstall {
		return dp.remove()
	}
	// Caught before the installation: a SIGTERM from here on ends in
	// the removal, not in the default action, which would leave it.
	// serve catches the signals too (each caller is notified).
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := dp.install(ctx); err != nil {
		return err
	}
	logger.Info("vminit-node: interception installed", "intercept", f.intercept, "what", dp.describe())
	var serveErr error
	if ctx.Err() == nil {
		watchCtx, cancel := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() { defer close(watched); dp.watch(watchCtx) }()
		cmd.SetContext(ctx)
		serveErr = serve(cmd, args)
		cancel()
		<-watched
	}
	if err := dp.remove(); err != nil {
		return errors.Join(serveErr, fmt.Errorf("removing the interception: %w", err))
	}
	logger.Info("vminit-node: interception removed", "intercept", f.intercept)
	return serveErr
}
