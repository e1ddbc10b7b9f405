package cli

import (
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/vminit/vminit/mdserver/kuberules"
	"github.com/vminit/vminit/platform/cluster"
)

// This file is what cmd/vminit-controller's command (internal/app/
// controllercmd) shares with vminit's: the cluster flags, the logger,
// usage errors and exit codes. The controller is a binary of its own so
// that vminit does not link client-go's typed clientset and leader
// election (docs/benchmarks.md, "Whole process"). cmd/vminit-server
// (internal/app/servercmd) shares these and serve itself
// (NewServeCommand, StoreFlags in serve.go), so that vminit does not link
// etcd's client.

// RunCommand runs root with args as Main runs vminit's command tree.
func RunCommand(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	return executeCommand(root, args, os.Stdin, stdout, stderr)
}

// Version is what `vminit version` prints.
func Version() string { return versionString() }

// Usagef is an error in how the command was called (exit code ExitUsage).
func Usagef(format string, args ...any) error { return usagef(format, args...) }

// NewLogger is the logger --log-format names (json or text; unset, as
// serve decides it: text on a terminal, else json).
func NewLogger(format string, w io.Writer) (*slog.Logger, error) {
	return newLogger(logFormatFor(format, w), w)
}

// LogKlog sends client-go's own log lines to logger.
func LogKlog(logger *slog.Logger) { logKlog(logger) }

// ClusterFlags are the flags of a command that runs against a cluster, as
// `vminit serve --kubernetes` takes them.
type ClusterFlags struct{ f clusterFlags }

// Register adds the flags to fl; namespaceHelp describes --namespace.
func (c *ClusterFlags) Register(fl *pflag.FlagSet, namespaceHelp string) {
	c.f.register(fl, namespaceHelp)
}

// Namespaces are the --namespace flags given.
func (c *ClusterFlags) Namespaces() []string { return c.f.namespaces }

// AddressPolicy reads --spec-addresses and --max-spec-addresses.
func (c *ClusterFlags) AddressPolicy() (kuberules.AddressPolicy, error) { return c.f.addressPolicy() }

// RESTConfig loads the kubeconfig with the flags' rate limits.
func (c *ClusterFlags) RESTConfig() (*rest.Config, error) { return c.f.restConfig() }

// KubeVirt resolves --kubevirt against the cluster cfg points at.
func (c *ClusterFlags) KubeVirt(cfg *rest.Config) (bool, error) { return c.f.kubeVirt(cfg) }

// KubeVirtMode is --kubevirt as given: auto, true or false.
func (c *ClusterFlags) KubeVirtMode() string { return c.f.kubevirt }

// ContextNamespace is the namespace of the kubeconfig context the flags
// choose ("" when it names none), as kubectl would use it.
func (c *ClusterFlags) ContextNamespace() (string, error) {
	_, ns, err := cluster.Load(c.f.kubeconfig, c.f.context)
	return ns, err
}
