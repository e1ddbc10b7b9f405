package network

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudinit/cloudinittest"
	"github.com/vminit/vminit/spec"
)

// parseNetwork decodes and validates a spec.network document.
func parseNetwork(t *testing.T, doc string) *spec.Network {
	t.Helper()
	full := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: net\nspec:\n  network:\n" + indent(doc, "    ")
	inst, _, err := spec.Decode([]byte(full))
	if err != nil {
		t.Fatalf("decoding: %v\n%s", err, full)
	}
	inst.Default()
	if err := inst.Validate(); err != nil {
		t.Fatalf("validating: %v", err)
	}
	return inst.Spec.Network
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// serverNet is a realistic server: a bond of two NICs with IPv4 and IPv6,
// a VLAN on it, a DHCP management NIC and a NIC left with its kernel name.
const serverNet = `
ethernets:
  nic0:
    match: {macAddress: "52:54:00:12:34:01"}
    setName: nic0
    mtu: 9000
  nic1:
    match: {macAddress: "52:54:00:12:34:02"}
    setName: nic1
    mtu: 9000
  mgmt0:
    match: {macAddress: "52:54:00:AB:CD:EF"}
    setName: mgmt0
    dhcp4: true
    dhcp6: true
  eth3:
    match: {macAddress: "52:54:00:00:00:03"}
    addresses: [10.3.0.5/16]
    routes:
      - {to: 10.99.0.0/16, via: 10.3.0.1}
bonds:
  bond0:
    interfaces: [nic0, nic1]
    parameters:
      mode: active-backup
      miiMonitorInterval: 100
      primary: nic0
    macAddress: "52:54:00:12:34:01"
    addresses: [192.0.2.10/24, "2001:db8::10/64", 192.0.2.11/24]
    gateway4: 192.0.2.1
    gateway6: "2001:db8::1"
    nameservers:
      addresses: [192.0.2.53, "2001:db8::53"]
      search: [prod.example.com, example.com]
    mtu: 9000
vlans:
  bond0.20:
    id: 20
    link: bond0
    addresses: [198.51.100.10/24]
    routes:
      - {to: 203.0.113.7/24, via: 198.51.100.1, metric: 100}
      - {to: default, via: 198.51.100.254, metric: 500}
    nameservers:
      addresses: [198.51.100.53, 192.0.2.53]
`

// pyNetState parses our three renderings with cloud-init and summarizes the
// network states it builds: per interface the type, MAC, MTU, bond and VLAN
// settings, subnets, routes and DNS.
const pyNetState = `
import json, sys
from unittest import mock
from cloudinit import safeyaml
import cloudinit.net
from cloudinit.net import network_state as ns
from cloudinit.sources.helpers import openstack

inp = json.load(sys.stdin)

def summarize(state):
    ifaces = {}
    dns, search = set(state.dns_nameservers), set(state.dns_searchdomains)
    for i in state.iter_interfaces():
        subnets, routes = [], []
        for s in i.get("subnets") or []:
            t = {"static6": "static", "dhcp": "dhcp4"}.get(s["type"], s["type"])
            subnets.append([t, s.get("address"), s.get("prefix")] if t == "static" else [t])
            if s.get("gateway"):
                # A subnet's gateway is its default route.
                routes.append(["::" if ":" in s["gateway"] else "0.0.0.0", 0, s["gateway"], None])
            for r in s.get("routes", []):
                routes.append([r["network"], r["prefix"], r.get("gateway"), r.get("metric")])
            dns |= set(s.get("dns_nameservers", []))
            search |= set(s.get("dns_search", []))
        bond = {k.replace("_", "-"): v for k, v in i.items() if k.startswith("bond") and k not in ("bond-slaves",)}
        ifaces[i["name"]] = {
            "type": i["type"], "mac": i.get("mac_address"), "mtu": i.get("mtu"),
            "subnets": sorted(subnets, key=repr), "routes": sorted(routes, key=repr),
            "bond": bond, "vlan_id": i.get("vlan_id"), "vlan_link": i.get("vlan-raw-device"),
        }
    return {"interfaces": ifaces, "dns": sorted(dns), "search": sorted(search)}

with mock.patch.object(ns, "get_interfaces_by_mac", return_value={}), \
     mock.patch.object(ns, "find_interface_name_from_mac", return_value=None), \
     mock.patch.object(cloudinit.net, "get_ib_hwaddrs_by_interface", return_value={}):
    out = {}
    out["v2"] = summarize(ns.parse_net_config_data(safeyaml.load(inp["v2"])))
    out["v1"] = summarize(ns.parse_net_config_data(safeyaml.load(inp["v1"])))
    if inp.get("nd"):
        conv = openstack.convert_net_json(json.loads(inp["nd"]), known_macs=inp["known_macs"])
        out["nd"] = summarize(ns.parse_net_config_data(conv))
json.dump(out, sys.stdout)
`

type netIface struct {
	Type     string         `json:"type"`
	MAC      *string        `json:"mac"`
	MTU      *int           `json:"mtu"`
	Subnets  [][]any        `json:"subnets"`
	Routes   [][]any        `json:"routes"`
	Bond     map[string]any `json:"bond"`
	VLANID   *int           `json:"vlan_id"`
	VLANLink *string        `json:"vlan_link"`
}

type netState struct {
	Interfaces map[string]netIface `json:"interfaces"`
	DNS        []string            `json:"dns"`
	Search     []string            `json:"search"`
}

func parseAll(t *testing.T, n *spec.Network, withND bool, knownMACs map[string]string) map[string]netState {
	t.Helper()
	v2, err := V2(n)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := V1(n)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"v2": string(v2), "v1": string(v1), "known_macs": knownMACs}
	if withND {
		nd, err := NetworkDataJSON(n)
		if err != nil {
			t.Fatal(err)
		}
		in["nd"] = string(nd)
	}
	out := map[string]netState{}
	cloudinittest.Run(t, pyNetState, in, &out)
	return out
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// stripMetrics drops route metrics: cloud-init's v2 parser does not keep
// them (netplan, which reads v2 itself on Ubuntu, does).
func stripMetrics(rs [][]any) [][]any {
	var out [][]any
	for _, r := range rs {
		out = append(out, r[:3])
	}
	return out
}

func TestRenderingsAgreeInCloudInit(t *testing.T) {
	n := parseNetwork(t, serverNet)
	// cloud-init finds NICs without a setName by MAC: here the guest
	// calls 52:54:00:00:00:03 eth3, as the v2 and v1 configs say.
	st := parseAll(t, n, true, map[string]string{"52:54:00:00:00:03": "eth3", "52:54:00:12:34:01": "ens3", "52:54:00:12:34:02": "ens4", "52:54:00:ab:cd:ef": "ens5"})
	v2, v1, nd := st["v2"], st["v1"], st["nd"]

	wantNames := "[bond0 bond0.20 eth3 mgmt0 nic0 nic1]"
	for name, s := range st {
		if got := fmt.Sprint(sortedKeys(s.Interfaces)); got != wantNames {
			t.Errorf("%s: interfaces %s, want %s", name, got, wantNames)
		}
		if show(s.DNS) != show([]string{"192.0.2.53", "198.51.100.53", "2001:db8::53"}) || show(s.Search) != show([]string{"example.com", "prod.example.com"}) {
			t.Errorf("%s: DNS %v search %v", name, s.DNS, s.Search)
		}
	}
	for name, a := range v1.Interfaces {
		for other, s := range map[string]netState{"v2": v2, "network_data.json": nd} {
			b := s.Interfaces[name]
			if a.Type != b.Type || show(a.Subnets) != show(b.Subnets) || show(a.MTU) != show(b.MTU) {
				t.Errorf("%s: v1 %s %v mtu %v, %s %s %v mtu %v", name, a.Type, a.Subnets, show(a.MTU), other, b.Type, b.Subnets, show(b.MTU))
			}
			if show(stripMetrics(a.Routes)) != show(stripMetrics(b.Routes)) {
				t.Errorf("%s routes: v1 %v, %s %v", name, a.Routes, other, b.Routes)
			}
			if a.Type == "vlan" && (show(a.VLANID) != show(b.VLANID) || show(a.VLANLink) != show(b.VLANLink)) {
				t.Errorf("%s: v1 vlan %v on %v, %s %v on %v", name, show(a.VLANID), show(a.VLANLink), other, show(b.VLANID), show(b.VLANLink))
			}
			if a.Type == "physical" && show(a.MAC) != show(b.MAC) {
				t.Errorf("%s: v1 MAC %v, %s %v", name, show(a.MAC), other, show(b.MAC))
			}
			if a.Type == "bond" || a.Bond["bond-master"] != nil {
				if show(a.Bond) != show(b.Bond) {
					t.Errorf("%s: v1 bond %v, %s %v", name, a.Bond, other, b.Bond)
				}
			}
		}
		// Metrics survive v1 and network_data.json.
		if show(a.Routes) != show(nd.Interfaces[name].Routes) {
			t.Errorf("%s routes: v1 %v, network_data.json %v", name, a.Routes, nd.Interfaces[name].Routes)
		}
	}
	if b := v1.Interfaces["bond0"]; show(b.MAC) != `"52:54:00:12:34:01"` || show(nd.Interfaces["bond0"].MAC) != show(b.MAC) {
		t.Errorf("bond MAC: v1 %v, network_data.json %v", show(b.MAC), show(nd.Interfaces["bond0"].MAC))
	}
	if r := v1.Interfaces["bond0"].Routes; show(r) != `[["0.0.0.0",0,"192.0.2.1",null],["::",0,"2001:db8::1",null]]` {
		t.Errorf("gateways became %v", r)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func TestV2HasNoNetworkKey(t *testing.T) {
	out, err := V2(parseNetwork(t, serverNet))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := yaml.Unmarshal(out, &top); err != nil {
		t.Fatal(err)
	}
	if top["version"] != 2 || top["network"] != nil {
		t.Errorf("top level: %v", top)
	}
	if strings.Contains(string(out), "default") {
		t.Errorf("v2 uses \"default\", which cloud-init's v2 parser cannot read:\n%s", out)
	}
}

func TestNetworkDataJSONErrors(t *testing.T) {
	for _, c := range []struct{ net, want string }{
		{"ethernets:\n  eth0:\n    dhcp4: true\n", "spec.network.ethernets.eth0.match.macAddress: ConfigDrive's network_data.json matches NICs by MAC address; add one"},
		{"ethernets:\n  eth0:\n    match: {name: \"en*\"}\n    dhcp4: true\n", "spec.network.ethernets.eth0.match.macAddress: ConfigDrive's network_data.json matches NICs by MAC address"},
		{"ethernets:\n  a:\n    match: {macAddress: \"52:54:00:00:00:01\"}\nbonds:\n  uplink:\n    interfaces: [a]\n    dhcp4: true\n", "spec.network.bonds.uplink: cloud-init names the bonds of network_data.json bond0, bond1… in order, so this bond would become bond0"},
		{"ethernets:\n  a:\n    match: {macAddress: \"52:54:00:00:00:01\"}\n    setName: a\nvlans:\n  v20:\n    id: 20\n    link: a\n", "spec.network.vlans.v20: cloud-init names a network_data.json VLAN <parent>.<VLAN ID>, so this one would become a.20"},
		{"ethernets:\n  a:\n    match: {macAddress: \"52:54:00:00:00:01\"}\nvlans:\n  a.20:\n    id: 20\n    link: a\n", "spec.network.vlans.a.20.link: cloud-init names a network_data.json VLAN after its parent's interface name"},
		{"ethernets:\n  a:\n    match: {macAddress: \"52:54:00:00:00:01\"}\n    routes: [{to: 10.0.0.0/8, via: 192.0.2.1}]\n", "spec.network.ethernets.a.routes[0]: network_data.json attaches routes to a network; give this interface an IPv4 address or DHCP"},
	} {
		_, err := NetworkDataJSON(parseNetwork(t, c.net))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v\nwant %q", err, c.want)
		}
		if err != nil && spec.AsErrors(err) == nil {
			t.Errorf("%v is not spec.Errors", err)
		}
	}
}

func TestV1Errors(t *testing.T) {
	for _, c := range []struct{ net, want string }{
		{"ethernets:\n  lan:\n    match: {name: \"en*\"}\n    dhcp4: true\n", `spec.network.ethernets.lan.match.name: network-config v1 cannot match interfaces by a name pattern ("en*")`},
		{"ethernets:\n  lan:\n    match: {name: \"en*\"}\n    setName: lan\n", "spec.network.ethernets.lan.setName: network-config v1 renames only a NIC matched by MAC address"},
		{"ethernets:\n  eth0:\n    macAddress: \"52:54:00:00:00:09\"\n", "spec.network.ethernets.eth0.macAddress: network-config v1 cannot change a NIC's MAC address"},
	} {
		_, err := V1(parseNetwork(t, c.net))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v\nwant %q", err, c.want)
		}
	}
}

// TestSimpleDHCP is the common case: one NIC by kernel name, DHCP. v1 and
// v2 agree; network_data.json refuses it (no MAC).
func TestSimpleDHCP(t *testing.T) {
	n := parseNetwork(t, "ethernets:\n  eth0:\n    dhcp4: true\n")
	st := parseAll(t, n, false, nil)
	for _, name := range []string{"v1", "v2"} {
		e := st[name].Interfaces["eth0"]
		if e.Type != "physical" || show(e.Subnets) != `[["dhcp4"]]` {
			t.Errorf("%s: %+v", name, e)
		}
	}
}

func TestStableOutput(t *testing.T) {
	n := parseNetwork(t, serverNet)
	for _, render := range []func(*spec.Network) ([]byte, error){V2, V1, NetworkDataJSON} {
		a, _ := render(n)
		for range 20 {
			if b, _ := render(n); string(a) != string(b) {
				t.Fatal("two renderings differ")
			}
		}
	}
}
