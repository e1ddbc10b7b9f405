package cmdkit

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/vminit/vminit/mdserver/kuberules"
	"github.com/vminit/vminit/platform/cluster"
)

// ClusterFlags are the flags of the commands that run against a cluster
// (serve --kubernetes, vminit-controller).
type ClusterFlags struct {
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

// Register adds the flags to fl; namespaceHelp describes --namespace.
func (f *ClusterFlags) Register(fl *pflag.FlagSet, namespaceHelp string) {
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, ~/.kube/config, else the pod's service account)")
	fl.StringVar(&f.context, "context", "", "the kubeconfig context to use")
	fl.StringArrayVar(&f.namespaces, "namespace", nil, namespaceHelp)
	fl.StringVar(&f.kubevirt, "kubevirt", "auto", "read KubeVirt VirtualMachines (and VMIs): auto (when the cluster serves kubevirt.io/v1), true or false")
	fl.Float32Var(&f.qps, "kube-api-qps", 50, "requests per second to the API server, sustained")
	fl.IntVar(&f.burst, "kube-api-burst", 100, "requests to the API server in a burst")
	fl.StringArrayVar(&f.specAddresses, "spec-addresses", nil, "NAMESPACE=CIDR[,CIDR]: networks the Instances of NAMESPACE may list in spec.metadataServer.addresses (repeatable; default none: Instances are known by their VMIs' addresses)")
	fl.IntVar(&f.maxSpecAddresses, "max-spec-addresses", kuberules.DefaultMaxSpecAddresses, "addresses one Instance's spec may list; a spec listing more claims none")
}

// AddressPolicy reads --spec-addresses and --max-spec-addresses.
func (f *ClusterFlags) AddressPolicy() (kuberules.AddressPolicy, error) {
	nets, err := kuberules.ParseSpecAddresses(f.specAddresses)
	if err != nil {
		return kuberules.AddressPolicy{}, Usagef("%v", err)
	}
	if f.maxSpecAddresses < 1 {
		return kuberules.AddressPolicy{}, Usagef("--max-spec-addresses=%d: want 1 or more", f.maxSpecAddresses)
	}
	return kuberules.AddressPolicy{SpecAddresses: nets, MaxSpecAddresses: f.maxSpecAddresses}, nil
}

// RESTConfig loads the kubeconfig as kubectl does (--kubeconfig, else
// $KUBECONFIG, else ~/.kube/config, else the pod's service account) with
// the flags' client-side rate limits.
func (f *ClusterFlags) RESTConfig() (*rest.Config, error) {
	cfg, _, err := cluster.Load(f.kubeconfig, f.context)
	if err != nil {
		return nil, Usagef("%v (give --kubeconfig, or run in a pod with a service account)", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = f.qps, f.burst
	cfg.UserAgent = "vminit"
	return cfg, nil
}

// KubeVirt resolves --kubevirt: "auto" asks the API server whether it
// serves kubevirt.io/v1 VirtualMachines.
func (f *ClusterFlags) KubeVirt(cfg *rest.Config) (bool, error) {
	switch f.kubevirt {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "auto", "":
	default:
		return false, Usagef("--kubevirt %q: want auto, true or false", f.kubevirt)
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

// KubeVirtMode is --kubevirt as given: auto, true or false.
func (f *ClusterFlags) KubeVirtMode() string { return f.kubevirt }

// Namespaces are the --namespace flags given.
func (f *ClusterFlags) Namespaces() []string { return f.namespaces }

// Given reports whether --kubeconfig, --namespace or --spec-addresses
// was given (serve refuses them without --kubernetes).
func (f *ClusterFlags) Given() bool {
	return f.kubeconfig != "" || len(f.namespaces) > 0 || len(f.specAddresses) > 0
}

// ContextNamespace is the namespace of the kubeconfig context the flags
// choose ("" when it names none), as kubectl would use it.
func (f *ClusterFlags) ContextNamespace() (string, error) {
	_, ns, err := cluster.Load(f.kubeconfig, f.context)
	return ns, err
}
