// Package cluster reads a live Kubernetes cluster for the platform
// readers, through client-go: Load reads a kubeconfig as kubectl does, and
// Resolver finds the Secrets and ConfigMaps platform objects refer to
// (platform/refs finds those given as documents).
package cluster

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/refs"
)

// Resolver reads Secrets and ConfigMaps from a cluster.
type Resolver struct {
	client corev1client.CoreV1Interface
}

// New returns a Resolver for the cluster cfg points at.
func New(cfg *rest.Config) (*Resolver, error) {
	c, err := corev1client.NewForConfig(cfg)
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
		s, err := r.client.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, wrap(err)
		}
		return refs.SecretData(s), nil
	case platform.KindConfigMap:
		cm, err := r.client.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, wrap(err)
		}
		return refs.ConfigMapData(cm), nil
	}
	return nil, fmt.Errorf("cluster: unknown kind %q", kind)
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	if apierrors.IsNotFound(err) {
		return errors.Join(platform.ErrNotFound, err)
	}
	return err
}
