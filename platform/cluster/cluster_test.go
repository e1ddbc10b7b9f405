package cluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform/cluster"
)

// The Resolver itself is tested against a real API server by the CLI's
// TestKubeconfig; Load reads kubeconfig files as kubectl does.
func TestLoad(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "config")
	os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: u
  user: {token: secret}
contexts:
- name: prod
  context: {cluster: c, user: u, namespace: prod}
- name: plain
  context: {cluster: c, user: u}
current-context: prod
`), 0o600)
	for _, c := range []struct{ context, ns string }{{"", "prod"}, {"prod", "prod"}, {"plain", "default"}} {
		cfg, ns, err := cluster.Load(kc, c.context)
		if err != nil {
			t.Fatal(err)
		}
		if ns != c.ns || cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "secret" {
			t.Errorf("context %q: namespace %q, host %q", c.context, ns, cfg.Host)
		}
	}
	if _, _, err := cluster.Load(kc, "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown context: %v", err)
	}
	if _, _, err := cluster.Load(filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Error("a missing kubeconfig is accepted")
	}
}
