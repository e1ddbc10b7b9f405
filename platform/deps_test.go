package platform_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreLinksNoKubernetesAPI: the platform core, and oVirt's reader
// that refers to no Secret, link none of Kubernetes' API or client
// packages (k8s.io/...); the Secret and ConfigMap types stay in
// platform/refs and platform/cluster, behind platform.Resolver.
// (sigs.k8s.io/yaml and /json, the decoders, are wanted.)
func TestCoreLinksNoKubernetesAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "./ovirt").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "k8s.io/") {
			t.Errorf("platform or platform/ovirt links %s", p)
		}
	}
}
