package cmdkit

import (
	"testing"

	"github.com/vminit/vminit/internal/testing/kubetest"
)

// TestKubeVirtAuto: --kubevirt=auto finds KubeVirt's VirtualMachines in
// the API server's discovery, once their CRD is served, and not before.
func TestKubeVirtAuto(t *testing.T) {
	s := kubetest.Start(t)
	f := ClusterFlags{kubeconfig: s.Kubeconfig, kubevirt: "auto"}
	cfg, err := f.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if kv, err := f.KubeVirt(cfg); kv || err != nil {
		t.Errorf("without KubeVirt: %v %v", kv, err)
	}
	s.CreateCRDs(t, kubetest.KubeVirtCRDs)
	if kv, err := f.KubeVirt(cfg); !kv || err != nil {
		t.Errorf("with KubeVirt's CRDs: %v %v", kv, err)
	}
}
