package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmptyKubeadmConfigRole: the Cluster API book's first control plane
// (an empty KubeadmConfig beside its Machine, labelled
// cluster.x-k8s.io/control-plane) is what CABPK makes of it by its
// Cluster's state: given with the book's Cluster (as written: being
// created, not initialized) or --control-plane-initialized=false it inits
// the cluster, named after the Machine; with --control-plane-initialized
// it joins the control plane; with nothing saying the state it is
// refused, naming the Cluster, --kubeconfig and the flag (a second init
// breaks a cluster). The same KubeadmConfig alone is refused, naming the
// Machine, --kubeconfig and --control-plane; --control-plane=false makes
// it a worker's join; a flag contradicting the Machine is refused.
func TestEmptyKubeadmConfigRole(t *testing.T) {
	dir := t.TempDir()
	withMachine := corpusFile("capi/book-kubeadm-bootstrap-L39.yaml")
	alone := corpusFile("capi/book-kubeadm-bootstrap-L106.yaml")
	bookCluster := filepath.Join("..", "..", "..", "platform", "cluster", "testdata", "book-cluster.yaml")
	discovery := []string{"--bootstrap-token", "abcdef.0123456789abcdef", "--control-plane-endpoint", "10.0.0.1:6443"}
	userData := func(args ...string) (string, int, string) {
		out := filepath.Join(dir, "seed")
		os.RemoveAll(out)
		code, _, stderr := run(t, append([]string{"build", "--fs", "dir", "-o", out}, args...)...)
		ud, err := os.ReadFile(filepath.Join(out, "user-data"))
		if code != ExitOK && err == nil {
			t.Errorf("%q failed (%d) but wrote the seed", args, code)
		}
		return string(ud), code, stderr
	}
	if _, code, stderr := userData(withMachine); code != ExitInvalid || !strings.Contains(stderr, `L39.yaml:6: metadata.name: KubeadmConfig "my-control-plane1-config" is empty, and its Machine my-control-plane1`) ||
		!strings.Contains(stderr, "give its Cluster (Cluster my-cluster) in the same input or read it from the cluster with --kubeconfig, or say it with --control-plane-initialized=false") {
		t.Errorf("the book's first control plane, no Cluster: exit %d, want the state's error naming the Cluster, --kubeconfig and --control-plane-initialized:\n%s", code, stderr)
	}
	for _, args := range [][]string{{bookCluster, withMachine}, {withMachine, "--control-plane-initialized=false"}} {
		if ud, code, stderr := userData(args...); code != ExitOK || !strings.Contains(ud, "kubeadm init") || !strings.Contains(ud, "hostname: my-control-plane1\n") {
			t.Errorf("%q: exit %d, want kubeadm init on my-control-plane1:\n%s%s", args, code, ud, stderr)
		}
	}
	if ud, code, stderr := userData(append([]string{withMachine, "--control-plane-initialized"}, discovery...)...); code != ExitOK || !strings.Contains(ud, "kubeadm join") || !strings.Contains(ud, "controlPlane: {}") {
		t.Errorf("--control-plane-initialized: exit %d, want a control-plane join:\n%s%s", code, ud, stderr)
	}
	if _, code, stderr := userData(bookCluster, withMachine, "--control-plane-initialized"); code != ExitInvalid || !strings.Contains(stderr, "--control-plane-initialized=true, but its Cluster my-cluster (") {
		t.Errorf("--control-plane-initialized against the Cluster: exit %d, want both named:\n%s", code, stderr)
	}
	if _, code, stderr := userData(alone); code == ExitOK || !strings.Contains(stderr, "is empty") || !strings.Contains(stderr, "--kubeconfig") || !strings.Contains(stderr, "--control-plane") || !strings.Contains(stderr, "L106.yaml:6:") {
		t.Errorf("the empty KubeadmConfig alone: exit %d, want an error at its name (line 6) naming its Machine, --kubeconfig and --control-plane:\n%s", code, stderr)
	}
	if _, code, stderr := userData(alone, "--control-plane"); code != ExitInvalid || !strings.Contains(stderr, "--control-plane=true says its machine is a control-plane machine") || !strings.Contains(stderr, "--control-plane-initialized") {
		t.Errorf("--control-plane alone: exit %d, want the state's error:\n%s", code, stderr)
	}
	if ud, code, stderr := userData(alone, "--control-plane", "--control-plane-initialized=false"); code != ExitOK || !strings.Contains(ud, "kubeadm init") {
		t.Errorf("--control-plane --control-plane-initialized=false: exit %d, want kubeadm init:\n%s%s", code, ud, stderr)
	}
	if ud, code, stderr := userData(append([]string{alone, "--control-plane=false"}, discovery...)...); code != ExitOK || !strings.Contains(ud, "kubeadm join") {
		t.Errorf("--control-plane=false: exit %d, want kubeadm join:\n%s%s", code, ud, stderr)
	}
	if _, code, stderr := userData(withMachine, "--control-plane=false"); code == ExitOK || !strings.Contains(stderr, "is a control-plane machine") {
		t.Errorf("--control-plane=false against a control-plane Machine: exit %d, want both named:\n%s", code, stderr)
	}
}
