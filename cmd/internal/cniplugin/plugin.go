// Package cniplugin is vminit-cni, the chained CNI plugin of the pod
// data path (docs/kubernetes.md, "How a guest reaches vminit"): for
// CNIs whose pod traffic bypasses the node's netfilter (OVN-Kubernetes,
// Cilium with eBPF host routing), the node agent's redirect of
// 169.254.169.254:80 cannot live in the node's namespace, so this plugin,
// listed after the pod network's plugin in the node's conflist (as
// Istio's CNI plugin is), writes it into each KubeVirt virt-launcher
// pod's namespace: mdserver/intercept's Pod table.
//
// It speaks CNI 0.3.0 through 1.1.0 through containernetworking's skel
// and types (no protocol of its own): the CNIs that need this path still
// write lists of older versions (Flannel's and Cilium's 0.3.1,
// OVN-Kubernetes' 0.4.0), a runtime calls every plugin of a list with the
// list's version, and a chained plugin that passes the previous result
// through needs nothing of a version but to read it. CHECK exists from
// 0.4.0, GC and STATUS from 1.1.0, as skel enforces. ADD installs the table (again: an
// install replaces) and passes the previous plugin's result through byte
// for byte; DEL removes it, and succeeds where there is nothing to remove
// (no namespace, a namespace gone, a table never added) and reads none
// of its configuration, so that a mistake in the plugin's entry cannot
// wedge a pod's teardown; CHECK verifies the table is the one ADD writes; GC and
// STATUS have nothing to do (the table dies with the pod's namespace).
//
// A virt-launcher pod is known by its name alone: the K8S_POD_NAME that
// kubelet's runtimes (containerd, CRI-O) pass in CNI_ARGS starts with
// "virt-launcher-", as KubeVirt names every VMI's pod. Every other pod is
// passed through untouched. The limits of that test are documented in
// docs/kubernetes.md.
//
// The package is internal: its one user is cmd/vminit-cni, and the
// contract that matters is the plugin's configuration and the CNI
// protocol, not a Go API. Installing the table needs Linux; elsewhere ADD
// and CHECK fail saying so.
package cniplugin

import (
	"io"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"
)

// Versions are the CNI specification versions the plugin speaks.
var Versions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

const about = "vminit-cni: redirects a KubeVirt guest's 169.254.169.254:80 to vminit's node agent from inside its virt-launcher pod (a chained CNI plugin)"

// Main runs the plugin as a runtime calls it: the command in CNI_COMMAND,
// the configuration on standard input, the result on standard output.
func Main() {
	p := plugin{stdout: os.Stdout}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    p.add,
		Del:    p.del,
		Check:  p.check,
		GC:     func(*skel.CmdArgs) error { return nil },
		Status: func(*skel.CmdArgs) error { return nil },
	}, Versions, about)
}

// plugin writes its ADD results to stdout.
type plugin struct {
	stdout io.Writer
}
