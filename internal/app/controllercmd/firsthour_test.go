package controllercmd

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vminit/vminit/internal/app/cli"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// TestControllerFromAShell: `vminit-controller --kubeconfig FILE`, outside
// a pod and on a cluster without KubeVirt, elects itself on a Lease in the
// kubeconfig context's namespace (here none: default), says that KubeVirt
// is absent and reconciles Instances. (--metrics-listen only keeps the
// test off the shared machine's port 8080.)
func TestControllerFromAShell(t *testing.T) {
	s, res := startCluster(t)
	createInstance(t, res, "one", "hostname: one")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := New()
	stderr := &testtools.SyncBuffer{}
	root.SetErr(stderr)
	root.SetArgs([]string{"--kubeconfig", s.Kubeconfig, "--metrics-listen", freeAddr(t), "--log-format", "text"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	leases := s.Clientset(t).CoordinationV1().Leases("default")
	deadline := time.Now().Add(60 * time.Second)
	for {
		l, err := leases.Get(ctx, "vminit-controller", metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("controller stopped: %v\n%s", err, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Lease default/vminit-controller:\n%s", stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("controller: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr.String(), "KubeVirt is not installed") {
		t.Errorf("no word that KubeVirt is absent:\n%s", stderr)
	}
}

// TestControllerPatchVMsWithoutKubeVirt: --patch-vms on a cluster without
// KubeVirt is a usage error that says what to do.
func TestControllerPatchVMsWithoutKubeVirt(t *testing.T) {
	s, _ := startCluster(t)
	code, stderr := run("--kubeconfig", s.Kubeconfig, "--patch-vms", "--metrics-listen", "")
	if code != cli.ExitUsage || !strings.Contains(stderr, "KubeVirt is not installed") || !strings.Contains(stderr, "without --patch-vms") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

func TestControllerHelpNamesLeaseDefault(t *testing.T) {
	var out strings.Builder
	Main([]string{"--help"}, &out, io.Discard)
	stdout := out.String()
	if !strings.Contains(stdout, "the kubeconfig context's namespace, else default") {
		t.Errorf("--leader-election-namespace's default is not said:\n%s", stdout)
	}
}
