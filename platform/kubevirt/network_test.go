package kubevirt

import (
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// TestUnwrapNetworkCloudInit: cloud-init 22.4 itself reads network data
// wrapped in a top-level network: key as the unwrapped data vminit writes
// (its Init._remove_top_level_network_key, added in 22.2), while the
// network-state parser that older releases hand it straight to finds no
// version in the wrapped form.
func TestUnwrapNetworkCloudInit(t *testing.T) {
	const wrapped = "# the pod network\nnetwork:\n  version: 2\n  ethernets:\n    # the first NIC\n    eth0: {dhcp4: true}\n"
	out, ok := unwrapNetwork([]byte(wrapped))
	if !ok || string(out) != "version: 2\nethernets:\n  # the first NIC\n  eth0: {dhcp4: true}\n" {
		t.Fatalf("unwrapNetwork = %q, %v", out, ok)
	}
	if _, ok := unwrapNetwork(out); ok {
		t.Errorf("unwrapped data unwrapped again")
	}
	var got struct {
		Same         bool   `json:"same"`
		WrappedError string `json:"wrapped_error"`
		Interfaces   []string
	}
	cloudinittest.Run(t, `
import json, sys
from cloudinit import stages, util
from cloudinit.net import network_state as ns
inp = json.load(sys.stdin)
wrapped, ours = util.load_yaml(inp["wrapped"]), util.load_yaml(inp["ours"])
err = ""
try:
    ns.parse_net_config_data(wrapped)
except Exception as e:
    err = str(e).split("\n")[0]
state = ns.parse_net_config_data(ours)
json.dump({"same": stages.Init._remove_top_level_network_key(None, wrapped) == ours, "wrapped_error": err,
           "Interfaces": [i["name"] for i in state.iter_interfaces()]}, sys.stdout)
`, map[string]string{"wrapped": wrapped, "ours": string(out)}, &got)
	if !got.Same {
		t.Errorf("cloud-init 22.4 unwraps the data to something else than vminit's")
	}
	if got.WrappedError == "" {
		t.Errorf("cloud-init's network-state parser read the wrapped form: the unwrapping would be needless")
	}
	if len(got.Interfaces) != 1 || got.Interfaces[0] != "eth0" {
		t.Errorf("interfaces %v, want eth0", got.Interfaces)
	}
}
