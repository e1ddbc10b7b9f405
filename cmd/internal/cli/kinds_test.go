package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corpusFile is a published object of platform/testdata/corpus.
func corpusFile(name string) string {
	return filepath.Join("..", "..", "..", "platform", "testdata", "corpus", name)
}

// TestObjectFlag: several VMs in one published file:
// build asks for --object, which picks one for build, render and convert;
// validate checks every one without it.
func TestObjectFlag(t *testing.T) {
	file := corpusFile("kubevirt/kvio-2023-05-31-ovn-kubernetes-secondary-networks-localnet-L415.yaml")
	out := filepath.Join(t.TempDir(), "seed.iso")
	code, _, stderr := run(t, "build", file, "-o", out)
	if code != ExitUsage || !strings.Contains(stderr, "4 VMs") || !strings.Contains(stderr, "--object NAME or KIND/NAME") {
		t.Errorf("build of 4 VMs: exit %d, want %d asking for --object:\n%s", code, ExitUsage, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused build wrote %s", out)
	}
	if code, _, stderr := run(t, "build", file, "--object", "vm-blue-2", "-o", out); code != 0 {
		t.Errorf("build --object vm-blue-2: exit %d:\n%s", code, stderr)
	}
	dir := filepath.Join(t.TempDir(), "seed")
	if code, stdout, stderr := run(t, "render", file, "--object", "VirtualMachine/vm-red-1", "-o", dir); code != 0 {
		t.Errorf("render --object VirtualMachine/vm-red-1: exit %d:\n%s%s", code, stdout, stderr)
	}
	if md, err := os.ReadFile(filepath.Join(dir, "meta-data")); err != nil || !strings.Contains(string(md), "vm-red-1") {
		t.Errorf("render --object VirtualMachine/vm-red-1: meta-data %q (%v), want vm-red-1's", md, err)
	}
	if code, stdout, stderr := run(t, "convert", file, "--to", "spec", "--object", "vm-red-2"); code != 0 || !strings.Contains(stdout, "hostname: vm-red-2") {
		t.Errorf("convert --object vm-red-2: exit %d:\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = run(t, "build", file, "--object", "vm-green", "-o", out)
	if code == 0 || !strings.Contains(stderr, "--object vm-green: no such object; the files hold VirtualMachine/vm-red-1, VirtualMachine/vm-red-2, VirtualMachine/vm-blue-1, VirtualMachine/vm-blue-2") {
		t.Errorf("build --object vm-green: exit %d:\n%s", code, stderr)
	}
	code, stdout, stderr := run(t, "validate", file)
	if code != 0 || strings.Count(stdout, ": valid (") != 4 {
		t.Errorf("validate of 4 VMs: exit %d, want each valid:\n%s%s", code, stdout, stderr)
	}
}

// TestRecognition: a published file of no kind vminit reads is reported
// as what it is, with its line, never decoded as a vminit spec; convert
// --to spec refuses it rather than wrapping it as user data.
func TestRecognition(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"build", corpusFile("kubevirt/kubevirt-v0.20.0-vm-template-fedora.yaml"), "-o", out}, []string{"kubevirt-v0.20.0-vm-template-fedora.yaml:4: kind: v1 Template is an OpenShift Template", "oc process"}},
		{[]string{"build", corpusFile("kubevirt/ug-host-devices-L143.yaml"), "-o", out}, []string{"ug-host-devices-L143.yaml:2: apiVersion: required"}},
		{[]string{"validate", corpusFile("kubevirt/ug-vm-templates-L173.yaml")}, []string{`kind: template.kubevirt.io/v1beta1 VirtualMachineTemplate "fedora-template" is not an object vminit reads`}},
		{[]string{"convert", "--to", "spec", corpusFile("kubevirt/kvio-2021-04-21-automated-windows-installation-with-tekton-pipelines-L279.yaml")}, []string{"kvio-2021-04-21-automated-windows-installation-with-tekton-pipelines-L279.yaml:3: kind: tekton.dev/v1beta1 Pipeline", "is not an object vminit reads"}},
		{[]string{"convert", "--to", "spec", corpusFile("virtlet/virtlet-docs-design-proposals-fast-persistent-rootfs-L45.yaml")}, []string{"not valid YAML"}},
	} {
		code, stdout, stderr := run(t, tc.args...)
		if code != ExitInvalid {
			t.Errorf("vminit %s: exit %d, want %d\n%s%s", strings.Join(tc.args, " "), code, ExitInvalid, stdout, stderr)
		}
		if strings.Contains(stderr, "vminit.dev/v1alpha1") {
			t.Errorf("vminit %s: decoded as a vminit spec:\n%s", strings.Join(tc.args, " "), stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("vminit %s: stderr does not say %q:\n%s", strings.Join(tc.args, " "), w, stderr)
			}
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("vminit %s wrote %s", strings.Join(tc.args, " "), out)
		}
	}
}

// TestConvertStdinRecognition: convert - reads standard input once and
// decides as for a file: cloud-init user data is converted, a published
// KubeadmControlPlaneTemplate is read, a Tekton Pipeline
// is refused naming its kind, and a v1 List (oc process output) is
// converted as the VM it holds.
func TestConvertStdinRecognition(t *testing.T) {
	for _, tc := range []struct {
		input, want string
		ok          bool
	}{
		{"#cloud-config\nhostname: web-1\n", "hostname: web-1", true},
		{"@" + corpusFile("kubevirt/ug-templates-L136.yaml"), "hostname: rheltinyvm", true},
		{"@" + corpusFile("capi/book-kubelet-config-L25.yaml"), "name: cloudinit-control-plane", true},
		{"@" + corpusFile("kubevirt/kvio-2021-04-21-automated-windows-installation-with-tekton-pipelines-L279.yaml"), `<stdin>:3: kind: tekton.dev/v1beta1 Pipeline "windows-installer" is not an object vminit reads`, false},
	} {
		in := tc.input
		if p, ok := strings.CutPrefix(in, "@"); ok {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			in = string(b)
		}
		var out strings.Builder
		cmd := NewRootCommand()
		cmd.SetArgs([]string{"convert", "-", "--to", "spec"})
		cmd.SetIn(strings.NewReader(in))
		cmd.SetOut(&out)
		cmd.SetErr(new(strings.Builder))
		err := cmd.Execute()
		switch {
		case tc.ok && (err != nil || !strings.Contains(out.String(), tc.want)):
			t.Errorf("convert - of %.40q: %v, want a spec with %q:\n%s", tc.input, err, tc.want, out.String())
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("convert - of %.40q: %v, want an error with %q", tc.input, err, tc.want)
		}
	}
}

// TestSeveralVMsNamed: a file of several VMs, given to a command that
// makes one, is refused naming each as --object takes it and its line;
// the notes of the documents skipped beside them are
// printed once, not once per VM.
func TestSeveralVMsNamed(t *testing.T) {
	out := filepath.Join(t.TempDir(), "seed.iso")
	for _, tc := range []struct {
		file string
		args []string
		want []string
		once string // a warning printed once
	}{
		{file: "kubevirt/kvio-2023-03-06-ovn-kubernetes-secondary-networks-L118.yaml", want: []string{
			"2 VMs (VirtualMachine/vm-server at ", "kvio-2023-03-06-ovn-kubernetes-secondary-networks-L118.yaml:5; VirtualMachine/vm-client at ",
			"kvio-2023-03-06-ovn-kubernetes-secondary-networks-L118.yaml:55); this command makes one: pick it with --object NAME or KIND/NAME"}},
		// The discovery CABPK takes from the Cluster, given as a user gives
		// it, so that each machine converts and only their number is wrong.
		{file: "capi/capd-example-simple-cluster-without-kcp.yaml",
			args: []string{"--control-plane-endpoint", "192.0.2.10:6443", "--bootstrap-token", "abcdef.0123456789abcdef"},
			want: []string{"KubeadmConfig/controlplane-0-config at ", "KubeadmConfigTemplate/worker at "},
			once: `MachineDeployment "worker-md-0" skipped`},
	} {
		code, _, stderr := run(t, append([]string{"build", corpusFile(tc.file), "-o", out}, tc.args...)...)
		if code != ExitUsage {
			t.Errorf("%s: exit %d, want %d\n%s", tc.file, code, ExitUsage, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr does not say %q:\n%s", tc.file, w, stderr)
			}
		}
		if n := strings.Count(stderr, tc.once); tc.once != "" && n != 1 {
			t.Errorf("%s: %q printed %d times, want once:\n%s", tc.file, tc.once, n, stderr)
		}
	}
}
