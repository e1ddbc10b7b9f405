package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/vminit/vminit/mdserver/kuberules"
	"github.com/vminit/vminit/platform/cluster"
)

// clusterFlags are the flags of the commands that run against a cluster
// (serve --kubernetes, controller).
type clusterFlags struct {
	kubeconfig, context string
	namespaces          []string
	kubevirt            string
	qps                 float32
	burst               int
	// specAddresses and maxSpecAddresses are the AddressPolicy: the
	// server serves by it and the controller reports it, so both take it.
	specAddresses    []string
	maxSpecAddresses int
}

func (f *clusterFlags) register(fl *pflag.FlagSet, namespaceHelp string) {
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, ~/.kube/config, else the pod's service account)")
	fl.StringVar(&f.context, "context", "", "the kubeconfig context to use")
	fl.StringArrayVar(&f.namespaces, "namespace", nil, namespaceHelp)
	fl.StringVar(&f.kubevirt, "kubevirt", "auto", "read KubeVirt VirtualMachines (and VMIs): auto (when the cluster serves kubevirt.io/v1), true or false")
	fl.Float32Var(&f.qps, "kube-api-qps", 50, "requests per second to the API server, sustained")
	fl.IntVar(&f.burst, "kube-api-burst", 100, "requests to the API server in a burst")
	fl.StringArrayVar(&f.specAddresses, "spec-addresses", nil, "NAMESPACE=CIDR[,CIDR]: networks the Instances of NAMESPACE may list in spec.metadataServer.addresses (repeatable; default none: Instances are known by their VMIs' addresses)")
	fl.IntVar(&f.maxSpecAddresses, "max-spec-addresses", kuberules.DefaultMaxSpecAddresses, "addresses one Instance's spec may list; a spec listing more claims none")
}

// addressPolicy reads --spec-addresses and --max-spec-addresses.
func (f *clusterFlags) addressPolicy() (kuberules.AddressPolicy, error) {
	nets, err := kuberules.ParseSpecAddresses(f.specAddresses)
	if err != nil {
		return kuberules.AddressPolicy{}, usagef("%v", err)
	}
	if f.maxSpecAddresses < 1 {
		return kuberules.AddressPolicy{}, usagef("--max-spec-addresses=%d: want 1 or more", f.maxSpecAddresses)
	}
	return kuberules.AddressPolicy{SpecAddresses: nets, MaxSpecAddresses: f.maxSpecAddresses}, nil
}

// restConfig loads the kubeconfig as kubectl does (--kubeconfig, else
// $KUBECONFIG, else ~/.kube/config, else the pod's service account) with
// the flags' client-side rate limits.
func (f *clusterFlags) restConfig() (*rest.Config, error) {
	cfg, _, err := cluster.Load(f.kubeconfig, f.context)
	if err != nil {
		return nil, usagef("%v (give --kubeconfig, or run in a pod with a service account)", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = f.qps, f.burst
	cfg.UserAgent = "vminit"
	return cfg, nil
}

// kubeVirt resolves --kubevirt: "auto" asks the API server whether it
// serves kubevirt.io/v1 VirtualMachines.
func (f *clusterFlags) kubeVirt(cfg *rest.Config) (bool, error) {
	switch f.kubevirt {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "auto", "":
	default:
		return false, usagef("--kubevirt %q: want auto, true or false", f.kubevirt)
	}
	return servesVirtualMachines(cfg)
}

// servesVirtualMachines reads the API server's resource list of
// kubevirt.io/v1, the one discovery document the answer needs, with a
// plain REST client: client-go's discovery package would link the typed
// clientset's scheme, every built-in API group registered at init.
func servesVirtualMachines(cfg *rest.Config) (bool, error) {
	c, err := rest.UnversionedRESTClientFor(dynamic.ConfigFor(cfg))
	if err != nil {
		return false, err
	}
	// No context, as the discovery call this replaces took none.
	raw, err := c.Get().AbsPath("/apis/kubevirt.io/v1").Do(context.Background()).Raw()
	if err != nil {
		return false, nil // not served: no KubeVirt here
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, nil // not a resource list: no KubeVirt we can read
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "virtualmachines" }), nil
}

// logKlog sends client-go's own log lines (klog) to the command's logger,
// so that a JSON log stays JSON.
func logKlog(logger *slog.Logger) { klog.SetSlogLogger(logger) }

// newLogger is the logger --log-format names.
func newLogger(format string, w interface{ Write([]byte) (int, error) }) (*slog.Logger, error) {
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	}
	return nil, usagef("--log-format %q: want json or text", format)
}

// newControllerCommand is where `vminit controller` was: the controller is
// the binary vminit-controller now, so that vminit links no typed
// clientset. The command stays, hidden, to say so to old scripts and
// manifests; it does not run the controller, which would link it again.
func newControllerCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "controller",
		Short:              "Moved: the controller is the vminit-controller binary",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return usagef("the controller is a binary of its own now: run vminit-controller with the same flags " +
				"(go install ./cmd/vminit-controller; deploy/kubernetes/components/controller runs it)")
		},
	}
}
