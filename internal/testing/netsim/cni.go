package netsim

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
)

// PodNetworkType is the type of the stand-in for the node's pod network
// plugin, first in a conflist before vminit-cni.
const PodNetworkType = "sim-pod-network"

// podNetwork is the stand-in: netsim made the pod's veth, so its ADD only
// reports it, from results/CONTAINER_ID.json beside it (Pod.Result).
const podNetwork = `#!/bin/sh
cat >/dev/null
case "$CNI_COMMAND" in
ADD) cat "$(dirname "$0")/results/$CNI_CONTAINERID.json" ;;
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["1.0.0","1.1.0"]}' ;;
esac
`

// InstallPodNetwork writes the stand-in into the CNI bin directory binDir.
func InstallPodNetwork(t testing.TB, binDir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(binDir, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(binDir, PodNetworkType), []byte(podNetwork), 0o755); err != nil {
		t.Fatal(err)
	}
}

// Result writes the result the stand-in in binDir reports for the ADD of
// p's sandbox id (its eth0 and pod IP), and returns it.
func (p *Pod) Result(t testing.TB, binDir, id string) []byte {
	t.Helper()
	r := current.Result{CNIVersion: "1.0.0",
		Interfaces: []*current.Interface{{Name: "eth0", Sandbox: p.NS.Path()}},
		IPs:        []*current.IPConfig{{Address: net.IPNet{IP: p.IP.AsSlice(), Mask: net.CIDRMask(24, 32)}, Interface: current.Int(0)}}}
	data, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(binDir, "results", id+".json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}
