package convert_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/spec"
)

// TestCorpusKinds reads real published files (platform/testdata/corpus)
// as `vminit build [--object NAME] FILE` does:
// the kinds beside a VM skipped with a note, a v1 List and a workload of
// Virtlet pods read as what they hold, --object picking one VM of several,
// and a file of nothing vminit reads refused naming what it is, its field
// and its line.
func TestCorpusKinds(t *testing.T) {
	for _, tc := range []struct {
		file, object string
		pool         int    // --pool-index
		machine      string // --machine
		hostname     string // the one VM built
		warning      string // a warning it carries
		err          []string
	}{
		{file: "virtlet/virtlet-v1.0.0-k8s.yaml", hostname: "k8s-0", warning: `v1 Service "k8s" skipped`},
		{file: "virtlet/virtlet-v1.0.0-k8s.yaml", object: "k8s", pool: 2, hostname: "k8s-2", warning: `StatefulSet k8s is read as its pod template, the pod named "k8s-2"`},
		{file: "virtlet/virtlet-cirros-vm-deployment.yaml", hostname: "cirros-deployment", warning: "virtlet-cirros-vm-deployment.yaml:13: spec.template: Deployment cirros-deployment is read as its pod template"},
		{file: "kubevirt/ug-templates-L136.yaml", hostname: "rheltinyvm"},
		{file: "kubevirt/ug-dns-L17.yaml", warning: `v1 Service "mysubdomain" skipped`},
		{file: "kubevirt/ug-instancetypes-L64.yaml", warning: "VirtualMachinePreference"},
		{file: "kubevirt/kvio-2023-03-06-ovn-kubernetes-secondary-networks-L118.yaml", object: "vm-server", hostname: "vm-server"},
		{file: "kubevirt/kvio-2023-03-06-ovn-kubernetes-secondary-networks-L118.yaml", object: "virtualmachine/vm-client", hostname: "vm-client"},
		{file: "kubevirt/kvio-2023-03-06-ovn-kubernetes-secondary-networks-L118.yaml", object: "vm-nope", err: []string{"--object vm-nope: no such object; the files hold VirtualMachine/vm-server, VirtualMachine/vm-client"}},
		{file: "kubevirt/kubevirt-v0.20.0-vm-template-fedora.yaml", err: []string{"kubevirt-v0.20.0-vm-template-fedora.yaml:4: kind: v1 Template is an OpenShift Template", "oc process -f FILE"}},
		{file: "kubevirt/ug-host-devices-L143.yaml", err: []string{"ug-host-devices-L143.yaml:2: apiVersion: required: kind VirtualMachineInstance without an apiVersion"}},
		{file: "kubevirt/kvio-2021-04-21-automated-windows-installation-with-tekton-pipelines-L279.yaml", err: []string{`kind: tekton.dev/v1beta1 Pipeline "windows-installer" is not an object vminit reads: a vminit Instance; KubeVirt`}},
		{file: "capi/book-kubelet-config-L25.yaml", hostname: "cloudinit-control-plane", warning: "every machine built from this template without --machine"},
		{file: "capi/book-kubelet-config-L25.yaml", machine: "cp-7xk2q", hostname: "cp-7xk2q"},
	} {
		t.Run(filepath.Base(tc.file)+"/"+tc.object, func(t *testing.T) {
			path := filepath.Join("..", "testdata", "corpus", tc.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := convert.Read(t.Context(), filepath.Base(path), data, platform.Options{Object: tc.object, PoolIndex: tc.pool, Machine: tc.machine, KubernetesVersion: "v1.31.0"})
			if tc.err != nil {
				if err == nil {
					t.Fatalf("converted; want an error with %q", tc.err)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not say %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 {
				t.Fatalf("%d results, want 1", len(rs))
			}
			if tc.hostname != "" && rs[0].Instance.Spec.Hostname != tc.hostname {
				t.Errorf("hostname %q, want %q", rs[0].Instance.Spec.Hostname, tc.hostname)
			}
			ws := strings.Join(rs[0].Warnings, "\n")
			if tc.warning != "" && !strings.Contains(ws, tc.warning) {
				t.Errorf("no warning says %q:\n%s", tc.warning, ws)
			}
			if tc.machine != "" && strings.Contains(ws, "--machine") {
				t.Errorf("--machine given, and a warning asks for it:\n%s", ws)
			}
		})
	}
}

// TestPartErrorsNameTheirPath: a problem in a List's item names its path
// from the top of the file's object, at the item's line.
func TestPartErrorsNameTheirPath(t *testing.T) {
	data := []byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: kubevirt.io/v1\n  kind: VirtualMachineInstance\n  metadata: {name: a}\n  spec:\n    bogus: 1\n")
	_, err := convert.Read(t.Context(), "list.yaml", data, platform.Options{})
	es := spec.AsErrors(err)
	if len(es) == 0 || es[0].Field != "items[0].spec.bogus" || es[0].Line != 8 {
		t.Fatalf("want list.yaml:8: items[0].spec.bogus: unknown field; got %v", err)
	}
}

// TestMissingAPIVersion: a document without apiVersion is refused naming
// the field and its line; a vminit Instance's message gives its apiVersion.
func TestMissingAPIVersion(t *testing.T) {
	for data, want := range map[string]string{
		"kind: Instance\nmetadata: {name: a}\n": "x.yaml:1: apiVersion: required: a vminit Instance says apiVersion: vminit.dev/v1alpha1",
		"# c\nkind: Pod\nmetadata: {name: a}\n": "x.yaml:2: apiVersion: required: kind Pod without an apiVersion",
		"metadata: {name: a}\n":                 "x.yaml:1: apiVersion: required: a document without apiVersion and kind",
	} {
		_, err := convert.Read(t.Context(), "x.yaml", []byte(data), platform.Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", data, err, want)
		}
	}
}

// TestLongListBounded: a v1 List of thousands of other kinds beside one VM
// is read (each item decoded once, from the List's one decoding), and its
// skipped items are counted in one warning past the first few, not listed.
func TestLongListBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n- apiVersion: kubevirt.io/v1\n  kind: VirtualMachineInstance\n  metadata: {name: vm}\n  spec:\n    domain: {devices: {disks: [{name: ci, disk: {}}]}}\n    volumes: [{name: ci, cloudInitNoCloud: {userData: \"#cloud-config\\nhostname: vm\\n\"}}]\n")
	const services = 5000
	for i := range services {
		fmt.Fprintf(&b, "- {apiVersion: v1, kind: Service, metadata: {name: s%d}}\n", i)
	}
	rs, err := convert.Read(t.Context(), "list.yaml", []byte(b.String()), platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("%d results, want 1", len(rs))
	}
	w := rs[0].Warnings
	if len(w) > 30 || !strings.Contains(strings.Join(w, "\n"), fmt.Sprintf("%d more documents skipped", services-20)) {
		t.Errorf("%d warnings, want 20 skipped and a count of the rest; last: %q", len(w), w[len(w)-1])
	}
}
