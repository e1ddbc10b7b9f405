package network

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/spec"
)

// iniFile is a parsed keyfile or systemd-networkd file: its sections in
// order, each with its keys in order (networkd repeats sections and keys).
type iniFile []iniSection

type iniSection struct {
	name string
	kv   [][2]string
}

func parseINI(t *testing.T, name string, data []byte) iniFile {
	t.Helper()
	var f iniFile
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			f = append(f, iniSection{name: line[1 : len(line)-1]})
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || len(f) == 0 || k == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", name, i+1, line)
			}
			f[len(f)-1].kv = append(f[len(f)-1].kv, [2]string{k, v})
		}
	}
	return f
}

// all returns every value of key in every section named sec.
func (f iniFile) all(sec, key string) []string {
	var out []string
	for _, s := range f {
		if s.name != sec {
			continue
		}
		for _, kv := range s.kv {
			if kv[0] == key {
				out = append(out, kv[1])
			}
		}
	}
	return out
}

func (f iniFile) get(sec, key string) string {
	if v := f.all(sec, key); len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// ipFacts is what an interface's configuration means, whichever format
// says it: the comparison key between our files and cloud-init's.
type ipFacts struct {
	DHCP4, DHCP6 bool
	Addresses    []string
	Routes       []string // destination via gateway
	DNS, Search  []string
}

func (x *ipFacts) sort() {
	for _, l := range [][]string{x.Addresses, x.Routes, x.DNS, x.Search} {
		slices.Sort(l)
	}
}

func (x ipFacts) String() string {
	return fmt.Sprintf("dhcp4=%v dhcp6=%v addresses=%q routes=%q dns=%q search=%q", x.DHCP4, x.DHCP6, x.Addresses, x.Routes, x.DNS, x.Search)
}

func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' || r == ' ' })
}

// keyfileFacts reads a keyfile's IP configuration.
func keyfileFacts(f iniFile) ipFacts {
	var x ipFacts
	x.DHCP4 = f.get("ipv4", "method") == "auto"
	x.DHCP6 = f.get("ipv6", "method") == "auto" || f.get("ipv6", "method") == "dhcp"
	for _, fam := range []struct{ sec, def, none string }{{"ipv4", "0.0.0.0/0", "0.0.0.0"}, {"ipv6", "::/0", "::"}} {
		for _, s := range f {
			if s.name != fam.sec {
				continue
			}
			for _, kv := range s.kv {
				switch k, v := kv[0], kv[1]; {
				case strings.HasPrefix(k, "address"):
					x.Addresses = append(x.Addresses, strings.Split(v, ",")[0])
				case k == "gateway":
					x.Routes = append(x.Routes, fam.def+" via "+v)
				case strings.HasPrefix(k, "route") && !strings.Contains(k, "_"):
					p := strings.Split(v, ",")
					via := ""
					if len(p) > 1 && p[1] != fam.none {
						via = p[1]
					}
					x.Routes = append(x.Routes, p[0]+" via "+via)
				case k == "dns":
					x.DNS = append(x.DNS, splitList(v)...)
				case k == "dns-search":
					x.Search = append(x.Search, splitList(v)...)
				}
			}
		}
	}
	x.sort()
	return x
}

// networkdFacts reads a .network file's IP configuration, in either the
// [Network] Address= or the [Address] section form.
func networkdFacts(f iniFile) ipFacts {
	var x ipFacts
	switch f.get("Network", "DHCP") {
	case "yes":
		x.DHCP4, x.DHCP6 = true, true
	case "ipv4":
		x.DHCP4 = true
	case "ipv6":
		x.DHCP6 = true
	}
	x.Addresses = append(f.all("Network", "Address"), f.all("Address", "Address")...)
	for _, gw := range f.all("Network", "Gateway") {
		x.Routes = append(x.Routes, defaultFor(gw)+" via "+gw)
	}
	for _, s := range f {
		if s.name != "Route" {
			continue
		}
		var dst, gw string
		for _, kv := range s.kv {
			switch kv[0] {
			case "Destination":
				dst = kv[1]
			case "Gateway":
				gw = kv[1]
			}
		}
		if dst == "" {
			dst = defaultFor(gw)
		}
		x.Routes = append(x.Routes, dst+" via "+gw)
	}
	for _, d := range f.all("Network", "DNS") {
		x.DNS = append(x.DNS, strings.Fields(d)...)
	}
	for _, d := range f.all("Network", "Domains") {
		x.Search = append(x.Search, strings.Fields(d)...)
	}
	x.sort()
	return x
}

func defaultFor(gw string) string {
	if a, err := netip.ParseAddr(gw); err == nil && a.Is6() {
		return "::/0"
	}
	return "0.0.0.0/0"
}

// simpleNet is what cloud-init 22.4's NetworkManager and networkd
// renderers render completely: NICs matched by MAC address with DHCP,
// static addresses of both families, gateways, routes and DNS. (They drop
// MTUs, bond options and VLAN links, so those are checked separately.)
const simpleNet = `
ethernets:
  lan:
    match: {macAddress: "52:54:00:12:34:56"}
    setName: lan
    addresses: [192.0.2.10/24, "2001:db8::10/64"]
    gateway4: 192.0.2.1
    gateway6: "2001:db8::1"
    routes:
      - {to: 10.20.0.0/16, via: 192.0.2.254}
    nameservers:
      addresses: [192.0.2.53, "2001:db8::53"]
      search: [example.com]
  mgmt:
    match: {macAddress: "52:54:00:ab:cd:ef"}
    setName: mgmt
    dhcp4: true
  v6only:
    match: {macAddress: "52:54:00:00:00:06"}
    addresses: ["2001:db8:6::5/64"]
    routes:
      - {to: "2001:db8:99::/48", via: "2001:db8:6::1"}
`

// pyRender renders a network-config with cloud-init's own NetworkManager
// and networkd renderers and returns the files each wrote.
const pyRender = `
import json, os, sys, tempfile
from unittest import mock
from cloudinit import safeyaml
import cloudinit.net
from cloudinit.net import network_state as ns, network_manager, networkd

inp = json.load(sys.stdin)
out = {}
with mock.patch.object(ns, "get_interfaces_by_mac", return_value={}), \
     mock.patch.object(ns, "find_interface_name_from_mac", return_value=None), \
     mock.patch.object(cloudinit.net, "get_ib_hwaddrs_by_interface", return_value={}):
    state = ns.parse_net_config_data(safeyaml.load(inp["v2"]))
    for name, mod in (("nm", network_manager), ("networkd", networkd)):
        d = tempfile.mkdtemp()
        mod.Renderer({}).render_network_state(state, target=d)
        files = {}
        for root, _, names in os.walk(d):
            for n in names:
                p = os.path.join(root, n)
                files[os.path.relpath(p, d)] = open(p).read()
        out[name] = files
json.dump(out, sys.stdout)
`

// cloudInitFiles renders the spec network's v2 form with cloud-init.
func cloudInitFiles(t *testing.T, doc string) (nm, networkd map[string]string) {
	t.Helper()
	v2, err := V2(parseNetwork(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ NM, Networkd map[string]string }
	cloudinittest.Run(t, pyRender, map[string]string{"v2": string(v2)}, &out)
	return out.NM, out.Networkd
}

// TestKeyfilesAgreeWithCloudInit compares what our keyfiles configure with
// what cloud-init's own NetworkManager renderer writes for the same
// network on a NetworkManager distribution, NIC by NIC (found by MAC
// address).
func TestKeyfilesAgreeWithCloudInit(t *testing.T) {
	theirs, _ := cloudInitFiles(t, simpleNet)
	files, err := NMKeyfiles(parseNetwork(t, simpleNet))
	if err != nil {
		t.Fatal(err)
	}
	byMAC := func(files map[string][]byte) map[string]ipFacts {
		m := map[string]ipFacts{}
		for name, data := range files {
			if !strings.HasSuffix(name, ".nmconnection") {
				continue
			}
			f := parseINI(t, name, data)
			m[strings.ToLower(f.get("ethernet", "mac-address"))] = keyfileFacts(f)
		}
		return m
	}
	ours := map[string][]byte{}
	for _, f := range files {
		ours[f.Path] = f.Data
	}
	theirsB := map[string][]byte{}
	for k, v := range theirs {
		theirsB[k] = []byte(v)
	}
	a, b := byMAC(ours), byMAC(theirsB)
	if len(a) != 3 || len(b) != 3 {
		t.Fatalf("connections: ours %v, cloud-init's %v", a, b)
	}
	for m, x := range a {
		if x.String() != b[m].String() {
			t.Errorf("NIC %s:\nours       %v\ncloud-init %v", m, x, b[m])
		}
	}
}

// TestNetworkdAgreesWithCloudInit is the same comparison with cloud-init's
// networkd renderer.
func TestNetworkdAgreesWithCloudInit(t *testing.T) {
	_, theirs := cloudInitFiles(t, simpleNet)
	files, err := Networkd(parseNetwork(t, simpleNet))
	if err != nil {
		t.Fatal(err)
	}
	mac := func(f iniFile) string {
		if m := f.get("Match", "PermanentMACAddress"); m != "" {
			return m
		}
		return f.get("Match", "MACAddress")
	}
	a, b := map[string]ipFacts{}, map[string]ipFacts{}
	for _, fl := range files {
		if strings.HasSuffix(fl.Path, ".network") {
			f := parseINI(t, fl.Path, fl.Data)
			a[mac(f)] = networkdFacts(f)
		}
	}
	for name, data := range theirs {
		if strings.HasSuffix(name, ".network") {
			f := parseINI(t, name, []byte(data))
			b[mac(f)] = networkdFacts(f)
		}
	}
	if len(a) != 3 || len(b) != 3 {
		t.Fatalf(".network files: ours %v, cloud-init's %v", a, b)
	}
	for m, x := range a {
		if x.String() != b[m].String() {
			t.Errorf("NIC %s:\nours       %v\ncloud-init %v", m, x, b[m])
		}
	}
}

// TestKeyfileServer checks what cloud-init's renderers drop: bond options,
// ports, VLAN parents, MTUs, MAC addresses, route metrics, and the modes
// that make NetworkManager read the files at all.
func TestKeyfileServer(t *testing.T) {
	files, err := NMKeyfiles(parseNetwork(t, serverNet))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]iniFile{}
	for _, f := range files {
		want := map[bool]string{true: "0600", false: "0644"}[strings.HasSuffix(f.Path, ".nmconnection")]
		if m := fmt.Sprintf("%04o", uint32(f.Mode)); m != want {
			t.Errorf("%s: mode %s, want %s", f.Path, m, want)
		}
		got[f.Path] = parseINI(t, f.Path, f.Data)
	}
	kf := func(id string) iniFile {
		f, ok := got[KeyfileDir+"/vminit-"+id+".nmconnection"]
		if !ok {
			t.Fatalf("no keyfile for %s", id)
		}
		return f
	}
	bond, nic0, vlan := kf("bond0"), kf("nic0"), kf("bond0.20")
	bondUUID := bond.get("connection", "uuid")
	for _, c := range []struct {
		f              iniFile
		sec, key, want string
	}{
		{bond, "connection", "type", "bond"},
		{bond, "connection", "interface-name", "bond0"},
		{bond, "bond", "mode", "active-backup"},
		{bond, "bond", "miimon", "100"},
		{bond, "bond", "primary", "nic0"},
		{bond, "ethernet", "mtu", "9000"},
		{bond, "ethernet", "cloned-mac-address", "52:54:00:12:34:01"},
		{nic0, "connection", "master", bondUUID},
		{nic0, "connection", "slave-type", "bond"},
		{nic0, "connection", "interface-name", ""}, // matched by MAC, renamed or not
		{nic0, "ethernet", "mac-address", "52:54:00:12:34:01"},
		{nic0, "ethernet", "mtu", "9000"},
		{nic0, "ipv4", "method", ""}, // a port has no IP configuration
		{vlan, "vlan", "id", "20"},
		{vlan, "vlan", "parent", bondUUID},
		{vlan, "ipv4", "route1", "203.0.113.0/24,198.51.100.1,100"},
		{vlan, "ipv4", "route2", "0.0.0.0/0,198.51.100.254,500"},
	} {
		if got := c.f.get(c.sec, c.key); !strings.EqualFold(got, c.want) {
			t.Errorf("%s [%s] %s = %q, want %q", c.f.get("connection", "id"), c.sec, c.key, got, c.want)
		}
	}
	link := got[NetworkdDir+"/10-vminit-nic0.link"]
	if link.get("Match", "PermanentMACAddress") != "52:54:00:12:34:01" || link.get("Link", "Name") != "nic0" {
		t.Errorf("nic0's .link: %v", link)
	}
	// UUIDs are stable and distinct.
	again, _ := NMKeyfiles(parseNetwork(t, serverNet))
	uuids := map[string]bool{}
	for i, f := range files {
		if string(f.Data) != string(again[i].Data) {
			t.Errorf("%s differs between renderings", f.Path)
		}
		if u := got[f.Path].get("connection", "uuid"); u != "" {
			if uuids[u] {
				t.Errorf("UUID %s used twice", u)
			}
			uuids[u] = true
		}
	}
}

func TestKeyfileMatchForms(t *testing.T) {
	files, err := NMKeyfiles(parseNetwork(t, `
ethernets:
  eth0: {dhcp4: true}
  wired:
    match: {name: "en*"}
    dhcp6: true
  renamed:
    match: {name: ens3}
    setName: uplink
    dhcp4: true
`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]iniFile{}
	for _, f := range files {
		got[f.Path] = parseINI(t, f.Path, f.Data)
	}
	kf := func(id string) iniFile { return got[KeyfileDir+"/vminit-"+id+".nmconnection"] }
	if n := kf("eth0").get("connection", "interface-name"); n != "eth0" {
		t.Errorf("eth0: interface-name %q", n)
	}
	if w := kf("wired"); w.get("connection", "interface-name") != "" || w.get("match", "interface-name") != "en*" || w.get("ipv6", "method") != "auto" || w.get("ipv4", "method") != "disabled" {
		t.Errorf("a name pattern: %v", w)
	}
	if r := kf("renamed"); r.get("connection", "interface-name") != "uplink" {
		t.Errorf("renamed: %v", r)
	}
	if l := got[NetworkdDir+"/10-vminit-renamed.link"]; l.get("Match", "OriginalName") != "ens3" || l.get("Link", "Name") != "uplink" {
		t.Errorf("renamed .link: %v", l)
	}
}

func TestKeyfileBondPrimaryNeedsName(t *testing.T) {
	_, err := NMKeyfiles(parseNetwork(t, `
ethernets:
  a: {match: {macAddress: "52:54:00:00:00:0a"}}
  b: {match: {macAddress: "52:54:00:00:00:0b"}}
bonds:
  bond0:
    interfaces: [a, b]
    parameters: {mode: active-backup, primary: a}
    dhcp4: true
`))
	if err == nil || !strings.Contains(err.Error(), "spec.network.bonds.bond0.parameters.primary") {
		t.Errorf("a primary without a name: %v", err)
	}
	if _, err := Networkd(parseNetwork(t, `
ethernets:
  a: {match: {macAddress: "52:54:00:00:00:0a"}}
bonds:
  bond0:
    interfaces: [a]
    parameters: {mode: active-backup, primary: a}
`)); err != nil {
		t.Errorf("networkd marks the primary port itself: %v", err)
	}
}

func TestNilNetwork(t *testing.T) {
	if f, err := NMKeyfiles(nil); f != nil || err != nil {
		t.Errorf("NMKeyfiles(nil) = %v, %v", f, err)
	}
	if f, err := Networkd(nil); f != nil || err != nil {
		t.Errorf("Networkd(nil) = %v, %v", f, err)
	}
}

func ExampleNMKeyfiles() {
	n := &spec.Network{Ethernets: map[string]spec.Ethernet{
		"lan": {
			Match: &spec.Match{MACAddress: "52:54:00:12:34:56"},
			Interface: spec.Interface{
				Addresses:   []string{"192.0.2.10/24"},
				Gateway4:    "192.0.2.1",
				Nameservers: &spec.Nameservers{Addresses: []string{"192.0.2.53"}},
			},
		},
	}}
	files, err := NMKeyfiles(n)
	if err != nil {
		panic(err)
	}
	for _, f := range files {
		fmt.Printf("%s (%04o)\n%s", f.Path, uint32(f.Mode), f.Data)
	}
	// Output:
	// /etc/NetworkManager/system-connections/vminit-lan.nmconnection (0600)
	// # Generated by vminit from spec.network.ethernets.lan.
	//
	// [connection]
	// id=vminit-lan
	// uuid=fbe67f3c-1d06-545f-bda4-13ad1a466fe3
	// type=ethernet
	//
	// [ethernet]
	// mac-address=52:54:00:12:34:56
	//
	// [ipv4]
	// method=manual
	// address1=192.0.2.10/24
	// gateway=192.0.2.1
	// dns=192.0.2.53;
	//
	// [ipv6]
	// method=ignore
}

// TestKeyfileBridgeAgreesWithCloudInit compares our bridge keyfiles with
// what cloud-init's own NetworkManager renderer writes for the same
// network: the bridge's spanning tree settings and IP configuration, and
// every port pointing at the bridge.
func TestKeyfileBridgeAgreesWithCloudInit(t *testing.T) {
	const net = `
ethernets:
  nic0: {match: {macAddress: "52:54:00:00:04:01"}, setName: nic0}
  nic1: {match: {macAddress: "52:54:00:00:04:02"}, setName: nic1}
bridges:
  br0:
    interfaces: [nic0, nic1]
    parameters: {stp: true, priority: 4096}
    addresses: [192.0.2.5/24]
    gateway4: 192.0.2.1
    nameservers: {addresses: [192.0.2.53], search: [example.com]}
`
	theirs, _ := cloudInitFiles(t, net)
	files, err := NMKeyfiles(parseNetwork(t, net))
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		bridge iniFile
		ports  map[string]iniFile // by MAC
	}
	read := func(files map[string]string) view {
		v := view{ports: map[string]iniFile{}}
		for name, data := range files {
			if !strings.HasSuffix(name, ".nmconnection") {
				continue
			}
			f := parseINI(t, name, []byte(data))
			switch f.get("connection", "type") {
			case "bridge":
				v.bridge = f
			case "ethernet":
				v.ports[strings.ToLower(f.get("ethernet", "mac-address"))] = f
			}
		}
		return v
	}
	ours := map[string]string{}
	for _, f := range files {
		ours[f.Path] = string(f.Data)
	}
	a, b := read(ours), read(theirs)
	if a.bridge == nil || b.bridge == nil || len(a.ports) != 2 || len(b.ports) != 2 {
		t.Fatalf("connections: ours %v, cloud-init's %v", a, b)
	}
	for _, k := range [][2]string{{"connection", "interface-name"}, {"bridge", "stp"}, {"bridge", "priority"}} {
		if x, y := a.bridge.get(k[0], k[1]), b.bridge.get(k[0], k[1]); x != y {
			t.Errorf("bridge [%s] %s: ours %q, cloud-init %q", k[0], k[1], x, y)
		}
	}
	if a.bridge.get("bridge", "priority") != "4096" || a.bridge.get("bridge", "stp") != "true" {
		t.Errorf("our bridge: %v", a.bridge)
	}
	if x, y := keyfileFacts(a.bridge), keyfileFacts(b.bridge); x.String() != y.String() {
		t.Errorf("bridge IP:\nours       %v\ncloud-init %v", x, y)
	}
	for m, p := range a.ports {
		q := b.ports[m]
		if p.get("connection", "slave-type") != "bridge" || q.get("connection", "slave-type") != "bridge" {
			t.Errorf("port %s: slave-type ours %q, cloud-init %q", m, p.get("connection", "slave-type"), q.get("connection", "slave-type"))
		}
		if p.get("connection", "master") != a.bridge.get("connection", "uuid") {
			t.Errorf("port %s: master %q, bridge uuid %q", m, p.get("connection", "master"), a.bridge.get("connection", "uuid"))
		}
		if p.get("ipv4", "method") != "" {
			t.Errorf("port %s has IP configuration", m)
		}
	}
}
