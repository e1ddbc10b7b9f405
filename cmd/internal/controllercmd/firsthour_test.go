package controllercmd

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/cmd/internal/cmdkit"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/kube/api/v1alpha1"
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
	if code != cmdkit.ExitUsage || !strings.Contains(stderr, "KubeVirt is not installed") || !strings.Contains(stderr, "without --patch-vms") {
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

// TestReportFlagsReachSecrets: vminit-controller's --report-url is where
// a VM's Secret reports to, and --boot-reports=false leaves the report
// out, the Secret rewritten as the controller starts again with it.
func TestReportFlagsReachSecrets(t *testing.T) {
	s, res := startCluster(t)
	s.CreateCRDs(t, kubetest.KubeVirtCRDs)
	createInstance(t, res, "web", "hostname: web")
	vm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm", "namespace": "default", "annotations": map[string]any{v1alpha1.AnnotationInstance: "web"}},
		"spec":     map[string]any{"runStrategy": "Always", "template": map[string]any{"spec": map[string]any{"domain": map[string]any{"devices": map[string]any{}}}}}}}
	if _, err := s.Dynamic(t).Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default").Create(context.Background(), vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secrets := s.Clientset(t).CoreV1().Secrets("default")
	for _, c := range []struct {
		flags []string
		want  string // in the user data; "" for no report
	}{
		{[]string{"--report-url", "http://192.0.2.9:8080/"}, "http://192.0.2.9:8080" + bootreport.ReportPath},
		{[]string{"--boot-reports=false", "--report-url", "http://192.0.2.9:8080"}, ""},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		root := New()
		stderr := &testtools.SyncBuffer{}
		root.SetErr(stderr)
		root.SetArgs(append([]string{"--kubeconfig", s.Kubeconfig, "--kubevirt=true", "--leader-elect=false", "--metrics-listen", "", "--log-format", "text"}, c.flags...))
		done := make(chan error, 1)
		go func() { done <- root.ExecuteContext(ctx) }()
		deadline := time.Now().Add(60 * time.Second)
		for {
			sec, err := secrets.Get(ctx, "vm-vminit", metav1.GetOptions{})
			if err == nil {
				ud := string(sec.Data["userdata"])
				reports := strings.Contains(ud, bootreport.ReportUnit)
				if c.want == "" && !reports || c.want != "" && strings.Contains(ud, c.want) {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v: the Secret never as wanted (%q):\n%s", c.flags, c.want, stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%v: %v\n%s", c.flags, err, stderr)
		}
	}
}
