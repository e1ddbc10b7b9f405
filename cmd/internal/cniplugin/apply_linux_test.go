package cniplugin

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
)

const launcher = "K8S_POD_NAMESPACE=vms;K8S_POD_NAME=virt-launcher-vm-a-x8k2p"

// TestAddPassesOthersThrough: ADD for a pod that is not a virt-launcher's
// opens no namespace (this one does not exist) and prints the previous
// result as it came.
func TestAddPassesOthersThrough(t *testing.T) {
	// Each version's result as its pod network plugin prints it: 1.0.0,
	// OVN-Kubernetes' 0.4.0 and Flannel's and Cilium's 0.3.1.
	for v, prev := range map[string]string{
		"1.0.0": `{"cniVersion":"1.0.0",  "ips":[{"address":"10.244.1.9/24"}]}`,
		"0.4.0": `{"cniVersion":"0.4.0","interfaces":[{"name":"eth0"}],"ips":[{"version":"4","address":"10.244.1.9/24","interface":0}]}`,
		"0.3.1": `{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.244.1.9/24"}],"dns":{}}`,
	} {
		var out bytes.Buffer
		err := plugin{stdout: &out}.add(&skel.CmdArgs{
			Netns: "/run/netns/vminit-no-such-namespace", Args: "K8S_POD_NAME=coredns-5d78c9869d-abcde",
			StdinData: []byte(`{"cniVersion":"` + v + `","type":"vminit-cni","agent":"10.0.0.5:8775","prevResult":` + prev + `}`),
		})
		if err != nil || out.String() != prev {
			t.Errorf("add %s: %v, printed %s; want %s", v, err, out.String(), prev)
		}
	}
}

// TestVersions: the plugin answers VERSION with the versions the CNIs
// that need it write their lists in.
func TestVersions(t *testing.T) {
	for _, v := range []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		if !slices.Contains(Versions.SupportedVersions(), v) {
			t.Errorf("CNI %s not spoken", v)
		}
	}
}

// TestAddRefuses: a bad configuration or CNI_ARGS fails ADD and CHECK
// with the problem named.
func TestAddRefuses(t *testing.T) {
	for _, args := range []*skel.CmdArgs{
		{Args: launcher, StdinData: []byte(`{"cniVersion":"1.0.0","agent":"10.0.0.5"}`)},
		{Args: "K8S_POD_NAME", StdinData: []byte(`{"cniVersion":"1.0.0","agent":"10.0.0.5:8775"}`)},
	} {
		p := plugin{stdout: &bytes.Buffer{}}
		for name, f := range map[string]func(*skel.CmdArgs) error{"add": p.add, "check": p.check} {
			if err := f(args); err == nil || !strings.Contains(err.Error(), "agent") && !strings.Contains(err.Error(), "CNI_ARGS") {
				t.Errorf("%s %s %s: %v", name, args.Args, args.StdinData, err)
			}
		}
	}
}

// TestDelNeverWedges: DEL succeeds with no namespace, with a namespace
// that is gone, and with a configuration ADD would refuse.
func TestDelNeverWedges(t *testing.T) {
	for _, args := range []*skel.CmdArgs{
		{Args: launcher, StdinData: []byte(`{"cniVersion":"1.0.0","agent":"10.0.0.5:8775"}`)},
		{Args: launcher, Netns: "/run/netns/vminit-no-such-namespace", StdinData: []byte(`{"agnet":1}`)},
		{Args: "K8S_POD_NAME", Netns: "/run/netns/vminit-no-such-namespace"},
	} {
		if err := (plugin{}).del(args); err != nil {
			t.Errorf("del %q in %q: %v", args.StdinData, args.Netns, err)
		}
	}
}
