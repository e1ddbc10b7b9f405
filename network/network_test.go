package network

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
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
const pyNetState = cloudinittest.NetJSONReaders + `
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
        bridge = {k.replace("_", "-"): v for k, v in i.items() if k.startswith("bridge") and k != "bridge_ports"}
        ifaces[i["name"]] = {
            "type": i["type"], "mac": i.get("mac_address"), "mtu": i.get("mtu"),
            "subnets": sorted(subnets, key=repr), "routes": sorted(routes, key=repr),
            "bond": bond, "vlan_id": i.get("vlan_id"), "vlan_link": i.get("vlan-raw-device"),
            "bridge": bridge, "ports": i.get("bridge_ports"),
        }
    return {"interfaces": ifaces, "dns": sorted(dns), "search": sorted(search)}

# The guest's NICs: the v2 parser names a NIC without set-name after the
# kernel's name for its MAC, as on a real guest.
known = {m.lower(): n for m, n in (inp["known_macs"] or {}).items()}
with mock.patch.object(ns, "get_interfaces_by_mac", return_value=known), \
     mock.patch.object(ns, "find_interface_name_from_mac", side_effect=known.get), \
     mock.patch.object(cloudinit.net, "get_ib_hwaddrs_by_interface", return_value={}):
    out = {}
    out["v2"] = summarize(ns.parse_net_config_data(safeyaml.load(inp["v2"])))
    if inp.get("v1"):
        out["v1"] = summarize(ns.parse_net_config_data(safeyaml.load(inp["v1"])))
    if inp.get("nd"):
        for name, read in net_json_readers().items():
            conv = read(json.loads(inp["nd"]), known_macs=inp["known_macs"])
            out["nd:" + name] = summarize(ns.parse_net_config_data(conv))
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
	Bridge   map[string]any `json:"bridge"`
	Ports    []string       `json:"ports"`
}

type netState struct {
	Interfaces map[string]netIface `json:"interfaces"`
	DNS        []string            `json:"dns"`
	Search     []string            `json:"search"`
}

// parseAll renders n as v2, v1 (unless noV1) and network_data.json (with
// withND) and returns cloud-init's reading of each: "v2", "v1" and
// "nd:<reader>" for each of cloudinittest.NetJSONReaders.
func parseAll(t *testing.T, n *spec.Network, noV1, withND bool, knownMACs map[string]string) map[string]netState {
	t.Helper()
	v2, err := V2(n)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"v2": string(v2), "known_macs": knownMACs}
	if !noV1 {
		v1, err := V1(n)
		if err != nil {
			t.Fatal(err)
		}
		in["v1"] = string(v1)
	}
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

// agreementCases are networks whose v1, v2 and network_data.json
// renderings must mean the same to cloud-init. knownMACs names the NICs
// the way the guest's kernel would, for those no config renames.
var agreementCases = []struct {
	name      string
	net       string
	knownMACs map[string]string
	noV1      bool // v1 cannot carry it
	noND      bool // network_data.json cannot carry it
}{
	// eth3 keeps the kernel's name, which v1 cannot say.
	{name: "server", net: serverNet, noV1: true},
	// oVirt's links: a NIC known by its name only (no MAC), which
	// network_data.json carries as a link name.
	{name: "matched by name", net: `
ethernets:
  eth1:
    match: {name: eth1}
    addresses: [10.34.60.86/22]
    gateway4: 10.34.63.254
    nameservers: {addresses: [8.8.8.8, 8.8.4.4]}
`},
	{name: "bond MAC of no member", net: `
ethernets:
  nic0: {match: {macAddress: "52:54:00:00:01:01"}, setName: nic0}
  nic1: {match: {macAddress: "52:54:00:00:01:02"}, setName: nic1}
bonds:
  bond0:
    interfaces: [nic0, nic1]
    parameters: {mode: 802.3ad, lacpRate: fast, transmitHashPolicy: layer3+4}
    macAddress: "02:00:00:00:01:00"
    dhcp4: true
vlans:
  bond0.7: {id: 7, link: bond0, addresses: [10.7.0.2/24]}
`},
	{name: "bond without a MAC", net: `
ethernets:
  a: {match: {macAddress: "52:54:00:00:02:01"}, setName: a}
  b: {match: {macAddress: "52:54:00:00:02:02"}, setName: b}
bonds:
  bond0: {interfaces: [a, b], parameters: {mode: balance-rr}, addresses: [10.2.0.2/24], gateway4: 10.2.0.1}
`},
	{name: "renames and a VLAN on a NIC", net: `
ethernets:
  lan:
    match: {macAddress: "52:54:00:00:03:01"}
    setName: lan0
    addresses: ["192.0.2.2/24", "2001:db8:3::2/64"]
    gateway6: "2001:db8:3::1"
    nameservers: {addresses: [192.0.2.53], search: [example.net]}
  wan:
    match: {macAddress: "52:54:00:00:03:02"}
    dhcp4: true
vlans:
  lan0.100: {id: 100, link: lan, addresses: [10.100.0.2/24], routes: [{to: 10.200.0.0/16, via: 10.100.0.1, metric: 50}]}
`, knownMACs: map[string]string{"52:54:00:00:03:02": "ens4"}, noV1: true},
	{name: "bridges", net: bridgeNet, noND: true},
}

// bridgeNet bridges a bond and a NIC, with a VLAN on the first bridge.
const bridgeNet = `
ethernets:
  nic0: {match: {macAddress: "52:54:00:00:04:01"}, setName: nic0}
  nic1: {match: {macAddress: "52:54:00:00:04:02"}, setName: nic1}
  nic2: {match: {macAddress: "52:54:00:00:04:03"}, setName: nic2, mtu: 9000}
bonds:
  bond0: {interfaces: [nic0, nic1], parameters: {mode: active-backup}}
bridges:
  br0:
    interfaces: [bond0]
    parameters: {stp: true, forwardDelay: 4, priority: 4096}
    addresses: [192.0.2.5/24]
    gateway4: 192.0.2.1
    nameservers: {addresses: [192.0.2.53]}
  br1:
    interfaces: [nic2]
    dhcp4: true
    mtu: 9000
vlans:
  br0.30: {id: 30, link: br0, addresses: [10.30.0.5/24]}
`

// TestRenderingsAgreeInCloudInit parses the v1, v2 and network_data.json
// renderings of each case (and of every example's network) with cloud-init
// and compares the network states it builds, interface by interface.
// network_data.json is read by every reader of
// cloudinittest.NetJSONReaders: proven on Debian 12's cloud-init
// 22.4.2-1+deb12u4 and on 22.4.2 as released (deb12u3 and before), whose
// readings of a bond's MAC differ.
func TestRenderingsAgreeInCloudInit(t *testing.T) {
	type netCase struct {
		name       string
		net        *spec.Network
		knownMACs  map[string]string
		noV1, noND bool
	}
	var cases []netCase
	for _, c := range agreementCases {
		cases = append(cases, netCase{c.name, parseNetwork(t, c.net), c.knownMACs, c.noV1, c.noND})
	}
	examples, _ := filepath.Glob("../examples/*.yaml")
	more, _ := filepath.Glob("../examples/*/instance.yaml")
	for _, path := range append(examples, more...) {
		// As a cluster reads them: examples/kubevirt-instance.yaml is an
		// Instance for kubectl, known by its VMI rather than addresses.
		inst, err := spec.Loader{IdentifiedByPlatform: true}.Load(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if inst.Spec.Network != nil {
			_, v1Err := V1(inst.Spec.Network)
			_, ndErr := NetworkDataJSON(inst.Spec.Network)
			cases = append(cases, netCase{path, inst.Spec.Network, nil, v1Err != nil, ndErr != nil})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			known := map[string]string{}
			maps.Copy(known, c.knownMACs)
			for _, id := range slices.Sorted(maps.Keys(c.net.Ethernets)) {
				// A NIC neither renamed nor matched by name keeps the
				// kernel's name; the configs call it by its ID.
				if e := c.net.Ethernets[id]; e.Match != nil && e.Match.MACAddress != "" && e.SetName == "" {
					if _, ok := known[mac(e.Match.MACAddress)]; !ok {
						known[mac(e.Match.MACAddress)] = id
					}
				}
			}
			st := parseAll(t, c.net, c.noV1, !c.noND, known)
			if !c.noND && st["nd:installed"].Interfaces == nil {
				t.Fatal("no network_data.json reading")
			}
			t.Logf("readings: %v", slices.Sorted(maps.Keys(st)))
			compareStates(t, st)
		})
	}
}

// compareStates compares cloud-init's reading of v1 (or, when v1 cannot
// carry the network, of network_data.json, else v2) with every other
// reading in st: the same interfaces, each of the same type with the same
// MAC (NICs and bonds), MTU, subnets, routes, bond settings and VLAN, and
// the same DNS servers and search domains.
func compareStates(t *testing.T, st map[string]netState) {
	t.Helper()
	ref := "v1"
	for _, r := range []string{"v1", "nd:installed", "v2"} {
		if _, ok := st[r]; ok {
			ref = r
			break
		}
	}
	v1 := st[ref]
	for other, s := range st {
		if other == ref {
			continue
		}
		if a, b := fmt.Sprint(sortedKeys(v1.Interfaces)), fmt.Sprint(sortedKeys(s.Interfaces)); a != b {
			t.Errorf("interfaces: v1 %s, %s %s", a, other, b)
		}
		if show(v1.DNS) != show(s.DNS) || show(v1.Search) != show(s.Search) {
			t.Errorf("DNS: v1 %v %v, %s %v %v", v1.DNS, v1.Search, other, s.DNS, s.Search)
		}
		for name, a := range v1.Interfaces {
			b, ok := s.Interfaces[name]
			if !ok {
				continue
			}
			if a.Type != b.Type || show(a.Subnets) != show(b.Subnets) || show(a.MTU) != show(b.MTU) {
				t.Errorf("%s: v1 %s %v mtu %v, %s %s %v mtu %v", name, a.Type, a.Subnets, show(a.MTU), other, b.Type, b.Subnets, show(b.MTU))
			}
			ra, rb := a.Routes, b.Routes
			if other == "v2" || ref == "v2" {
				// cloud-init's v2 parser drops route metrics (netplan,
				// which reads v2 itself on Ubuntu, keeps them).
				ra, rb = stripMetrics(ra), stripMetrics(rb)
			}
			if show(ra) != show(rb) {
				t.Errorf("%s routes: v1 %v, %s %v", name, ra, other, rb)
			}
			if a.Type == "vlan" && (show(a.VLANID) != show(b.VLANID) || show(a.VLANLink) != show(b.VLANLink)) {
				t.Errorf("%s: v1 vlan %v on %v, %s %v on %v", name, show(a.VLANID), show(a.VLANLink), other, show(b.VLANID), show(b.VLANLink))
			}
			// cloud-init's own v2 parser drops a bond's macaddress (V2's
			// doc says so; netplan, which reads v2 on Ubuntu, keeps it,
			// and TestV2BondMAC checks that V2 writes it).
			v2Bond := a.Type == "bond" && (other == "v2" || ref == "v2")
			if (a.Type == "physical" || a.Type == "bond" && !v2Bond) && show(a.MAC) != show(b.MAC) {
				t.Errorf("%s: v1 MAC %v, %s %v", name, show(a.MAC), other, show(b.MAC))
			}
			if (a.Type == "bond" || a.Bond["bond-master"] != nil) && show(a.Bond) != show(b.Bond) {
				t.Errorf("%s: v1 bond %v, %s %v", name, a.Bond, other, b.Bond)
			}
			if a.Type == "bridge" && (show(a.Bridge) != show(b.Bridge) || show(a.Ports) != show(b.Ports)) {
				t.Errorf("%s: v1 bridge %v over %v, %s %v over %v", name, a.Bridge, a.Ports, other, b.Bridge, b.Ports)
			}
		}
	}
}

// TestServerNetworkReadings pins what cloud-init makes of the server
// network beyond agreement: the names, the bond's MAC and its gateways.
func TestServerNetworkReadings(t *testing.T) {
	n := parseNetwork(t, serverNet)
	st := parseAll(t, n, true, true, map[string]string{"52:54:00:00:00:03": "eth3", "52:54:00:12:34:01": "ens3", "52:54:00:12:34:02": "ens4", "52:54:00:ab:cd:ef": "ens5"})
	wantNames := "[bond0 bond0.20 eth3 mgmt0 nic0 nic1]"
	for name, s := range st {
		if got := fmt.Sprint(sortedKeys(s.Interfaces)); got != wantNames {
			t.Errorf("%s: interfaces %s, want %s", name, got, wantNames)
		}
		if show(s.DNS) != show([]string{"192.0.2.53", "198.51.100.53", "2001:db8::53"}) || show(s.Search) != show([]string{"example.com", "prod.example.com"}) {
			t.Errorf("%s: DNS %v search %v", name, s.DNS, s.Search)
		}
		if b := s.Interfaces["bond0"]; name != "v2" && show(b.MAC) != `"52:54:00:12:34:01"` {
			t.Errorf("%s: bond MAC %v", name, show(b.MAC))
		}
		for nic, m := range map[string]string{"nic0": `"52:54:00:12:34:01"`, "nic1": `"52:54:00:12:34:02"`} {
			if got := show(s.Interfaces[nic].MAC); got != m {
				t.Errorf("%s: %s is matched by %s, want %s", name, nic, got, m)
			}
		}
		if r := s.Interfaces["bond0"].Routes; name != "v2" && show(r) != `[["0.0.0.0",0,"192.0.2.1",null],["::",0,"2001:db8::1",null]]` {
			t.Errorf("%s: gateways became %v", name, r)
		}
	}
	if r := st["nd:installed"].Interfaces["bond0.20"].Routes; show(r) != `[["0.0.0.0",0,"198.51.100.254",500],["203.0.113.0",24,"198.51.100.1",100]]` {
		t.Errorf("network_data.json lost route metrics: %v", r)
	}
}

// TestV2BondMAC: V2 writes a bond's MAC for netplan, which honours it,
// though cloud-init's own v2 parser drops it.
func TestV2BondMAC(t *testing.T) {
	out, err := V2(parseNetwork(t, serverNet))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Bonds map[string]struct {
			MAC string `yaml:"macaddress"`
		} `yaml:"bonds"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Bonds["bond0"].MAC; got != "52:54:00:12:34:01" {
		t.Errorf("bond0 macaddress %q", got)
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
		{bridgeNet, "spec.network.bridges.br0: ConfigDrive's network_data.json has no bridges"},
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

// TestBondPrimaryByName: NetworkManager and network_data.json both name a
// bond's primary port by its interface name, one rule (bondPrimary) for
// both: a renamed NIC's new name is written, and a NIC known only by its
// MAC address is refused by each at the same field, naming the format.
// (TestKeyfilesAgreeWithCloudInit and TestRenderingsAgreeInCloudInit hold
// the outputs to cloud-init's readings.)
func TestBondPrimaryByName(t *testing.T) {
	const named = `
ethernets:
  a: {match: {macAddress: "52:54:00:00:00:0a"}, setName: uplink}
  b: {match: {macAddress: "52:54:00:00:00:0b"}, setName: b}
bonds:
  bond0:
    interfaces: [a, b]
    parameters: {mode: active-backup, primary: a}
    dhcp4: true
`
	unnamed := strings.Replace(named, ", setName: uplink", "", 1)
	for _, r := range []struct {
		format  string
		primary func(*spec.Network) (string, error) // the bond's rendered primary
	}{
		{"NetworkManager", func(n *spec.Network) (string, error) {
			files, err := NMKeyfiles(n)
			for _, f := range files {
				if f.Path == KeyfileDir+"/vminit-bond0.nmconnection" {
					return parseINI(t, f.Path, f.Data).get("bond", "primary"), nil
				}
			}
			return "", err
		}},
		{"network_data.json", func(n *spec.Network) (string, error) {
			data, err := NetworkDataJSON(n)
			if err != nil {
				return "", err
			}
			var nd networkData
			if err := json.Unmarshal(data, &nd); err != nil {
				t.Fatal(err)
			}
			for _, l := range nd.Links {
				if l.ID == "bond0" {
					return l.BondPrimary, nil
				}
			}
			return "", nil
		}},
	} {
		if got, err := r.primary(parseNetwork(t, named)); got != "uplink" || err != nil {
			t.Errorf("%s: a renamed primary is %q, %v; want uplink", r.format, got, err)
		}
		want := "spec.network.bonds.bond0.parameters.primary: " + r.format + " names a bond's primary port by its interface name, which for a depends on the guest; give it a setName"
		if _, err := r.primary(parseNetwork(t, unnamed)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: a primary known by MAC address alone: %v\nwant %s", r.format, err, want)
		}
	}
}

func TestV1Errors(t *testing.T) {
	for _, c := range []struct{ net, want string }{
		{"ethernets:\n  lan:\n    match: {name: \"en*\"}\n    dhcp4: true\n", `spec.network.ethernets.lan.match.name: network-config v1 cannot match interfaces by a name pattern ("en*")`},
		{"ethernets:\n  lan:\n    match: {name: \"en*\"}\n    setName: lan\n", "spec.network.ethernets.lan.setName: network-config v1 renames only a NIC matched by MAC address"},
		{"ethernets:\n  eth0:\n    macAddress: \"52:54:00:00:00:09\"\n", "spec.network.ethernets.eth0.macAddress: network-config v1 cannot change a NIC's MAC address"},
		{"ethernets:\n  wan:\n    match: {macAddress: \"52:54:00:00:00:09\"}\n    dhcp4: true\n", "spec.network.ethernets.wan: network-config v1 gives every NIC a name and renames the one with this MAC address to it"},
	} {
		_, err := V1(parseNetwork(t, c.net))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v\nwant %q", err, c.want)
		}
	}
}

// TestBridgeReadings pins what cloud-init reads from v1 and v2 bridges
// beyond agreement: the ports, and spanning tree settings written out even
// when the spec leaves them to their default.
func TestBridgeReadings(t *testing.T) {
	st := parseAll(t, parseNetwork(t, bridgeNet), false, false, nil)
	for _, name := range []string{"v1", "v2"} {
		for br, want := range map[string]string{
			"br0": `{"bridge-bridgeprio":4096,"bridge-fd":4,"bridge-stp":true}`,
			"br1": `{"bridge-stp":false}`,
		} {
			got := st[name].Interfaces[br]
			if got.Type != "bridge" || show(got.Bridge) != want {
				t.Errorf("%s %s: %s %s, want bridge %s", name, br, got.Type, show(got.Bridge), want)
			}
		}
		if p := show(st[name].Interfaces["br0"].Ports); p != `["bond0"]` {
			t.Errorf("%s: br0 ports %s", name, p)
		}
	}
}

func TestV2Errors(t *testing.T) {
	for _, c := range []struct{ net, want string }{
		{"ethernets:\n  a: {match: {macAddress: \"52:54:00:00:00:01\"}}\n  b: {match: {macAddress: \"52:54:00:00:00:02\"}, setName: b}\nbonds:\n  bond0: {interfaces: [a, b], dhcp4: true}\n",
			"spec.network.bonds.bond0.interfaces[0]: cloud-init's own network-config v2 parser (distributions without netplan) refers to spec.network.ethernets.a by its interface name"},
		{"ethernets:\n  a: {match: {macAddress: \"52:54:00:00:00:01\"}}\nvlans:\n  v7: {id: 7, link: a}\n",
			"spec.network.vlans.v7.link: cloud-init's own network-config v2 parser"},
		{"ethernets:\n  a: {match: {macAddress: \"52:54:00:00:00:01\"}, setName: b}\n  b: {dhcp4: true}\n",
			`spec.network.ethernets.b: is also named "b", like spec.network.ethernets.a`},
	} {
		_, err := V2(parseNetwork(t, c.net))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v\nwant %q", err, c.want)
		}
	}
}

// TestSimpleDHCP is the common case: one NIC by kernel name, DHCP. v1 and
// v2 agree; network_data.json refuses it (no MAC).
func TestSimpleDHCP(t *testing.T) {
	n := parseNetwork(t, "ethernets:\n  eth0:\n    dhcp4: true\n")
	st := parseAll(t, n, false, false, nil)
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
