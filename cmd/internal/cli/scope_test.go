package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagsConcernTheirObjects: a flag whose option concerns none of the
// objects read (platform.Scopes) is a usage error naming the flag, what
// it concerns and each object (KIND/NAME at FILE:LINE), and nothing is
// written; a flag for one object of a file validated whole concerns that
// one, the others not reading it. On the published corpus objects.
func TestFlagsConcernTheirObjects(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	kubevirtVM := corpusFile("kubevirt/kubevirt-vm-cirros.yaml")
	startAction := corpusFile("ovirt/go-start-vm-with-cloudinit.xml")
	namedTemplate := corpusFile("ovirt/ansible-ovirt-template-cloud-init.xml")
	statefulSet := corpusFile("virtlet/virtlet-k8s.yaml")
	capdCluster := corpusFile("capi/capd-example-simple-cluster.yaml")
	spec := filepath.Join("..", "..", "..", "examples", "dev-vm.yaml")
	join := []string{"--bootstrap-token", "abcdef.0123456789abcdef", "--control-plane-endpoint", "192.0.2.10:6443"}

	refused := []struct {
		name string
		args []string
		want []string
	}{
		{"machine on a KubeVirt VM", []string{"build", kubevirtVM, "--machine", "m-1"},
			[]string{"--machine concerns a Cluster API KubeadmConfig", "VirtualMachine/vm-cirros at " + kubevirtVM + ":"}},
		{"explicit pool-index 0 on a KubeVirt VM", []string{"build", kubevirtVM, "--pool-index", "0"},
			[]string{"--pool-index concerns a KubeVirt VirtualMachinePool", "VirtualMachine/vm-cirros"}},
		{"discovery on a vminit spec", []string{"build", spec, "--bootstrap-token", "abcdef.0123456789abcdef", "--ca-cert-hash", "sha256:00"},
			[]string{"--bootstrap-token concerns a Cluster API", "--ca-cert-hash concerns a Cluster API", spec + " (a vminit spec)"}},
		{"name on an oVirt body naming its template", []string{"build", namedTemplate, "--name", "x", "--password-salt", "corpussalt"},
			[]string{"--name concerns an oVirt body that names no VM", "template/mytemplate at " + namedTemplate + ":1"}},
		{"password-salt on a Virtlet StatefulSet", []string{"build", statefulSet, "--password-salt", "x9Fq"},
			[]string{"--password-salt concerns an oVirt VM body", "StatefulSet/"}},
		{"pool-index on the workers picked from a cluster", append([]string{"build", capdCluster, "--object", "KubeadmConfigTemplate/worker", "--pool-index", "1", "--machine", "w-1"}, join...),
			[]string{"--pool-index concerns", "KubeadmConfigTemplate/worker at " + capdCluster + ":113"}},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "seed.iso")
			code, _, stderr := run(t, append(c.args, "-o", out)...)
			if code != ExitUsage {
				t.Errorf("exit %d, want %d: %s", code, ExitUsage, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written despite the error", out)
			}
		})
	}

	// Cloud-init user data converted: --name names the instance, the
	// platforms' flags concern nothing.
	userData := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(userData, []byte("#cloud-config\nruncmd: [ls]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "convert", userData, "--to", "spec", "--name", "vm-1", "--pool-index", "2")
	if code != ExitUsage || !strings.Contains(stderr, "--pool-index concerns") || !strings.Contains(stderr, userData+" (cloud-init user data)") || strings.Contains(stderr, "--name concerns") {
		t.Errorf("convert of user data with --pool-index: exit %d, want %d naming --pool-index alone: %s", code, ExitUsage, stderr)
	}

	accepted := [][]string{
		{"convert", userData, "--to", "spec", "--name", "vm-1"},
		{"build", startAction, "--name", "myvm", "--password-salt", "corpussalt"},
		{"build", statefulSet, "--pool-index", "1"},
		{"build", kubevirtVM},
		// The KubeadmControlPlane reads --pool-index and the template does
		// not: validating the file whole checks each with the flags.
		append([]string{"validate", capdCluster, "--pool-index", "0", "--machine", "cp-1"}, join...),
	}
	for _, args := range accepted {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if args[0] == "build" {
				args = append(args, "-o", filepath.Join(t.TempDir(), "seed.iso"))
			}
			if code, _, stderr := run(t, args...); code != 0 {
				t.Errorf("exit %d: %s", code, stderr)
			}
		})
	}
}
