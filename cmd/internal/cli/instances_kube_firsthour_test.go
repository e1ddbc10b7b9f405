package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstancesKubeconfigQuiet: put sends only the spec's own fields (no
// "unknown field" warning from the API server) and list ends without a
// client-go watch error, against a real kube-apiserver.
func TestInstancesKubeconfigQuiet(t *testing.T) {
	s, _ := startCluster(t)
	work := t.TempDir()
	os.WriteFile(filepath.Join(work, "motd"), []byte("welcome\n"), 0o644)
	specFile := filepath.Join(work, "web-1.yaml")
	os.WriteFile(specFile, []byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: web-1}
spec:
  files:
    - {path: /etc/motd, source: {file: motd}}
    - {path: /etc/issue, content: "hello\n"}
  metadataServer: {addresses: [10.0.0.1]}
`), 0o644)
	kc := []string{"--kubeconfig", s.Kubeconfig, "-n", "default"}
	for _, args := range [][]string{{"put", specFile}, {"list"}, {"get", "web-1"}} {
		var code int
		var out, stderr string
		klogged := processStderr(t, func() {
			code, out, stderr = run(t, append(append([]string{"instances"}, args...), kc...)...)
		})
		stderr += klogged
		if code != ExitOK {
			t.Fatalf("%v: exit %d %s %s", args, code, out, stderr)
		}
		if strings.Contains(stderr, "unknown field") || strings.Contains(stderr, "Failed to watch") {
			t.Errorf("%v: stderr:\n%s", args, stderr)
		}
	}
}

// processStderr returns what f wrote to the process's standard error
// (where client-go's klog writes) rather than to the command's.
func processStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	defer func() {
		os.Stderr = saved
	}()
	f()
	os.Stderr = saved
	w.Close()
	return <-got
}
