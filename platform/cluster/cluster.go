// Package cluster reads a live Kubernetes cluster for the platform
// readers, through client-go: Load reads a kubeconfig as kubectl does, and
// Resolver finds the Secrets and ConfigMaps platform objects refer to
// (platform/refs finds those given as documents).
//
// It reads through client-go's dynamic client, never the typed clientset:
// the clientset registers every built-in API group at init, which every
// run of the vminit command would pay for (docs/benchmarks.md, "Whole
// process").
package cluster

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/refs"
)

// Resolver reads Secrets and ConfigMaps from a cluster, and the Cluster
// API Machine of a KubeadmConfig (FindMachine).
type Resolver struct {
	client dynamic.Interface
}

// New returns a Resolver for the cluster cfg points at.
func New(cfg *rest.Config) (*Resolver, error) {
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Resolver{client: c}, nil
}

// Load reads a kubeconfig as kubectl does (kubeconfig, else $KUBECONFIG,
// else ~/.kube/config) and returns its REST config and the context's
// namespace ("default" when it names none).
func Load(kubeconfig, context string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	// client-go opens its files with a plain open, which blocks forever
	// on a FIFO (and no signal ends a command stuck there).
	for _, p := range rules.GetLoadingPrecedence() {
		if err := inputfile.CheckExisting(p); err != nil {
			return nil, "", fmt.Errorf("kubeconfig: %w", err)
		}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	// Namespace's second result says whether an override (flags, the
	// environment) set it, not the context: the context's namespace, or
	// "default" when it names none, is the answer either way.
	ns, _, err := cc.Namespace()
	if err != nil {
		ns = ""
	}
	return cfg, ns, nil
}

// Data implements platform.Resolver.
func (r *Resolver) Data(ctx context.Context, kind, ns, name string) (map[string][]byte, error) {
	switch kind {
	case platform.KindSecret:
		var s corev1.Secret
		if err := r.get(ctx, "secrets", ns, name, &s); err != nil {
			return nil, err
		}
		return refs.SecretData(&s), nil
	case platform.KindConfigMap:
		var cm corev1.ConfigMap
		if err := r.get(ctx, "configmaps", ns, name, &cm); err != nil {
			return nil, err
		}
		return refs.ConfigMapData(&cm), nil
	}
	return nil, fmt.Errorf("cluster: unknown kind %q", kind)
}

// get reads the core/v1 object ns/name of resource into obj (the
// converter decodes a Secret's base64 data as the typed client would).
func (r *Resolver) get(ctx context.Context, resource, ns, name string, obj any) error {
	u, err := r.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: resource}).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return wrap(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("%s %s/%s: %w", resource, ns, name, err)
	}
	return nil
}

func wrap(err error) error {
	if apierrors.IsNotFound(err) {
		return errors.Join(platform.ErrNotFound, err)
	}
	return err
}

// maxMachines bounds the Machines (or MachinePools) FindMachine reads
// from a namespace.
const maxMachines = 5000

// FindMachine returns the Cluster API Machine of namespace ns whose
// bootstrap configRef names the KubeadmConfig config (what CABPK reads its
// role from), else the MachinePool whose machines' template names it (its
// machines are workers), nil when there is none; for
// platform.Options.FindMachine. It lists the namespace's Machines, and
// its MachinePools when no Machine names the config (a configRef is no
// field the server selects on), so the kubeconfig's user needs list on
// machines.cluster.x-k8s.io, and on machinepools.cluster.x-k8s.io for a
// MachinePool's config, in that namespace (docs/platforms/capi.md). A
// user who may not, and a cluster that serves no Machines (no Cluster
// API), are errors saying so: either leaves the machine's role unknown,
// and a wrong guess would make a control plane a worker.
func (r *Resolver) FindMachine(ctx context.Context, ns, config string) (*platform.Machine, error) {
	m, served, err := r.findOwner(ctx, ns, config, "machines", "Machine")
	switch {
	case err != nil || m != nil:
		return m, err
	case !served:
		return nil, errors.New("the cluster serves no Cluster API Machines (no CustomResourceDefinition machines.cluster.x-k8s.io serving v1beta2 or v1beta1): is it the management cluster of the Machine?")
	}
	// A cluster without MachinePools (served false) has none to name it.
	m, _, err = r.findOwner(ctx, ns, config, "machinepools", "MachinePool")
	return m, err
}

// findOwner lists the cluster.x-k8s.io resource (machines, machinepools)
// of namespace ns for the one whose bootstrap configRef names the
// KubeadmConfig config; served is false when the cluster serves neither
// version.
func (r *Resolver) findOwner(ctx context.Context, ns, config, resource, kind string) (m *platform.Machine, served bool, err error) {
	list, err := r.listCAPI(ctx, ns, resource, kind, metav1.ListOptions{Limit: maxMachines})
	if list == nil || err != nil {
		return nil, err != nil, err
	}
	for _, u := range list.Items {
		j, err := u.MarshalJSON()
		if err != nil {
			return nil, true, err
		}
		if m, ok := platform.ReadMachine(j); ok && m.Config == config {
			m.Where = kind + " " + ns + "/" + m.Name + " in the cluster"
			return &m, true, nil
		}
	}
	if list.GetContinue() != "" {
		return nil, true, fmt.Errorf("namespace %q holds more than %d %ss, more than vminit reads, and none of the first names it", ns, maxMachines, kind)
	}
	return nil, true, nil
}

// listCAPI lists the cluster.x-k8s.io resource (of kind, for messages) of
// namespace ns at the first version the cluster serves, v1beta2 else
// v1beta1; nil and no error when it serves neither. A user who may not
// list it is an error naming the permission needed.
func (r *Resolver) listCAPI(ctx context.Context, ns, resource, kind string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	for _, version := range []string{"v1beta2", "v1beta1"} {
		gvr := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: version, Resource: resource}
		list, err := r.client.Resource(gvr).Namespace(ns).List(ctx, opts)
		switch {
		case apierrors.IsNotFound(err):
			continue // this version not served
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("the kubeconfig's user may not list the %ss of namespace %q (it needs list on %s.cluster.x-k8s.io there): %w", kind, ns, resource, err)
		}
		return list, err
	}
	return nil, nil
}

// FindCluster returns the Cluster API Cluster ns/name, whose
// ControlPlaneInitialized condition decides, for CABPK, whether a
// control-plane machine inits the cluster or joins its control plane; for
// platform.Options.FindCluster. It lists the namespace's Clusters by name
// (as FindMachine lists, so the kubeconfig's user needs list on
// clusters.cluster.x-k8s.io there, docs/platforms/capi.md). No such
// Cluster, a user who may not list them and a cluster that serves none
// are errors saying so: the state unknown, a guess could init a second
// control plane.
func (r *Resolver) FindCluster(ctx context.Context, ns, name string) (*platform.Cluster, error) {
	list, err := r.listCAPI(ctx, ns, "clusters", "Cluster", metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	switch {
	case err != nil:
		return nil, err
	case list == nil:
		return nil, errors.New("the cluster serves no Cluster API Clusters (no CustomResourceDefinition clusters.cluster.x-k8s.io serving v1beta2 or v1beta1): is it the management cluster of the Machine?")
	}
	for _, u := range list.Items {
		j, err := u.MarshalJSON()
		if err != nil {
			return nil, err
		}
		if c, ok := platform.ReadCluster(j); ok && c.Name == name {
			c.Where = "Cluster " + ns + "/" + name + " in the cluster"
			return &c, nil
		}
	}
	return nil, fmt.Errorf("the cluster has no Cluster %q in namespace %q", name, ns)
}
