package spec

// The rules of spec.network (netplan's version 2, vminit's subset).

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vminit/vminit/internal/lib/lazyre"
)

var (
	ifnameRE  = lazyre.New(`^[A-Za-z0-9_.:-]{1,15}$`)
	bondModes = []string{"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}
)

// validateNetwork checks spec.network in the order a reader of the
// document would: the configuration IDs, then each kind of interface (the
// later kinds refer to the earlier ones by ID), then the VLANs whose link
// became a bridge port. Each step adds its problems to c in that order.
func validateNetwork(c *ErrorList, n *Network) {
	ids := networkIDs(c, n)
	validateEthernets(c, n)
	inBond := validateBonds(c, n)
	validateVLANs(c, n, ids)
	inBridge := validateBridges(c, n, ids, inBond)
	for _, id := range sortedKeys(n.VLANs) {
		if v := n.VLANs[id]; inBridge[v.Link] != "" && v.Link != "" && ids[v.Link] != "bridges" {
			c.Add("spec.network.vlans."+id+".link", "%q is a port of bridge %q; put the VLAN on the bridge instead", v.Link, inBridge[v.Link])
		}
	}
}

// networkIDs maps every configuration ID to its kind ("ethernets",
// "bonds", "vlans", "bridges"): one namespace for all four, as in netplan,
// so an ID used twice is an error at its second use.
func networkIDs(c *ErrorList, n *Network) map[string]string {
	ids := map[string]string{}
	claim := func(kind string, keys []string) {
		for _, id := range keys {
			if prev, dup := ids[id]; dup {
				c.Add("spec.network."+kind+"."+id, "configuration ID %q is also used under %s", id, prev)
			}
			ids[id] = kind
		}
	}
	claim("ethernets", sortedKeys(n.Ethernets))
	claim("bonds", sortedKeys(n.Bonds))
	claim("vlans", sortedKeys(n.VLANs))
	claim("bridges", sortedKeys(n.Bridges))
	return ids
}

// validateEthernets checks how each NIC is found (match, or its ID as the
// interface name), that no two match one MAC address, and its renaming.
func validateEthernets(c *ErrorList, n *Network) {
	macs := map[string]string{}
	for _, id := range sortedKeys(n.Ethernets) {
		e := n.Ethernets[id]
		f := "spec.network.ethernets." + id
		if e.Match != nil {
			if e.Match.MACAddress == "" && e.Match.Name == "" {
				c.Add(f+".match", "give macAddress or name")
			}
			if e.Match.MACAddress != "" {
				if mac, ok := checkMAC(c, f+".match.macAddress", e.Match.MACAddress); ok {
					if other, dup := macs[mac]; dup {
						c.Add(f+".match.macAddress", "%s is also matched by %s", mac, other)
					}
					macs[mac] = f
				}
			}
		} else {
			if !ifnameRE.MatchString(id) {
				c.Add(f, "without match, the ID is the interface name, and %q is not one (at most 15 characters); add match.macAddress or match.name", id)
			}
			if e.SetName != "" {
				c.Add(f+".setName", "needs match: only a matched interface can be renamed")
			}
		}
		if e.SetName != "" && !ifnameRE.MatchString(e.SetName) {
			c.Add(f+".setName", "%q is not an interface name (at most 15 characters)", e.SetName)
		}
		validateInterface(c, f, &e.Interface)
	}
}

// validateBonds checks each bond and its members, and returns which bond
// each ethernet belongs to (a bridge may not take a bond's member).
func validateBonds(c *ErrorList, n *Network) (inBond map[string]string) {
	inBond = map[string]string{}
	for _, id := range sortedKeys(n.Bonds) {
		b := n.Bonds[id]
		f := "spec.network.bonds." + id
		checkIfname(c, f, id)
		if len(b.Interfaces) == 0 {
			c.Add(f+".interfaces", "required: the ethernets IDs this bond aggregates")
		}
		for i, m := range b.Interfaces {
			mf := fmt.Sprintf("%s.interfaces[%d]", f, i)
			eth, ok := n.Ethernets[m]
			switch {
			case !ok:
				c.Add(mf, "%q is not defined under spec.network.ethernets", m)
			case inBond[m] != "":
				c.Add(mf, "%q is already a member of bond %q", m, inBond[m])
			case eth.DHCP4 || eth.DHCP6 || len(eth.Addresses) > 0:
				c.Add(mf, "%q has its own addresses or DHCP; configure them on the bond", m)
			}
			inBond[m] = id
		}
		if p := b.Parameters; p != nil && p.Mode != "" && !slices.Contains(bondModes, p.Mode) {
			c.Add(f+".parameters.mode", "%q is not a bonding mode (one of %s)", p.Mode, strings.Join(bondModes, ", "))
		}
		validateInterface(c, f, &b.Interface)
	}
	return inBond
}

// validateVLANs checks each VLAN's ID and that its link is an interface
// the spec defines (ids, from networkIDs).
func validateVLANs(c *ErrorList, n *Network, ids map[string]string) {
	for _, id := range sortedKeys(n.VLANs) {
		v := n.VLANs[id]
		f := "spec.network.vlans." + id
		checkIfname(c, f, id)
		if v.ID < 1 || v.ID > 4094 {
			c.Add(f+".id", "%d is not a VLAN ID (1–4094)", v.ID)
		}
		if _, ok := ids[v.Link]; !ok || v.Link == id {
			c.Add(f+".link", "%q is not an ethernet, bond or bridge defined in spec.network", v.Link)
		}
		validateInterface(c, f, &v.Interface)
	}
}

// validateBridges checks each bridge, its ports and its STP parameters,
// and returns which bridge each port belongs to.
func validateBridges(c *ErrorList, n *Network, ids, inBond map[string]string) (inBridge map[string]string) {
	inBridge = map[string]string{}
	for _, id := range sortedKeys(n.Bridges) {
		b := n.Bridges[id]
		f := "spec.network.bridges." + id
		checkIfname(c, f, id)
		for i, m := range b.Interfaces {
			mf := fmt.Sprintf("%s.interfaces[%d]", f, i)
			in := bridgePort(n, ids[m], m)
			switch {
			case in == nil:
				c.Add(mf, "%q is not an ethernet, bond or VLAN defined in spec.network", m)
				continue
			case inBridge[m] != "":
				c.Add(mf, "%q is already a port of bridge %q", m, inBridge[m])
				continue
			case inBond[m] != "":
				c.Add(mf, "%q is a member of bond %q; add the bond to the bridge instead", m, inBond[m])
			case in.DHCP4 || in.DHCP6 || len(in.Addresses) > 0:
				c.Add(mf, "%q has its own addresses or DHCP; configure them on the bridge", m)
			}
			inBridge[m] = id
		}
		if p := b.Parameters; p != nil {
			if d := p.ForwardDelay; d != nil && (*d < 2 || *d > 30) {
				c.Add(f+".parameters.forwardDelay", "%d is not a forward delay in seconds (2–30)", *d)
			}
			if pr := p.Priority; pr != nil && (*pr < 0 || *pr > 65535) {
				c.Add(f+".parameters.priority", "%d is not a bridge priority (0–65535)", *pr)
			}
		}
		validateInterface(c, f, &b.Interface)
	}
	return inBridge
}

// bridgePort is the interface settings of a bridge's port id, of kind
// (from networkIDs), or nil when a bridge cannot take it (undefined, or
// another bridge).
func bridgePort(n *Network, kind, id string) *Interface {
	switch kind {
	case "ethernets":
		e := n.Ethernets[id]
		return &e.Interface
	case "bonds":
		b := n.Bonds[id]
		return &b.Interface
	case "vlans":
		v := n.VLANs[id]
		return &v.Interface
	}
	return nil
}

// checkIfname checks that a bond's, VLAN's or bridge's ID, which is the
// interface the guest creates, is an interface name.
func checkIfname(c *ErrorList, f, id string) {
	if !ifnameRE.MatchString(id) {
		c.Add(f, "%q is not an interface name (at most 15 characters)", id)
	}
}

// validateInterface checks the settings every kind of interface has
// (addresses, gateways, routes, name servers, MTU, MAC address) of the
// interface at field f.
func validateInterface(c *ErrorList, f string, in *Interface) {
	for i, a := range in.Addresses {
		if _, err := netip.ParsePrefix(a); err != nil {
			c.Add(fmt.Sprintf("%s.addresses[%d]", f, i), "%q is not an address in CIDR form such as 192.0.2.10/24", a)
		}
	}
	checkGW := func(field, gw string, v4 bool) {
		if gw == "" {
			return
		}
		a, err := netip.ParseAddr(gw)
		if err != nil || a.Is4() != v4 {
			fam := "IPv6"
			if v4 {
				fam = "IPv4"
			}
			c.Add(field, "%q is not an %s address", gw, fam)
		}
	}
	checkGW(f+".gateway4", in.Gateway4, true)
	checkGW(f+".gateway6", in.Gateway6, false)
	for i, r := range in.Routes {
		rf := fmt.Sprintf("%s.routes[%d]", f, i)
		var to netip.Prefix
		switch {
		case r.To == "default":
		case r.To == "":
			c.Add(rf+".to", "required: a CIDR or \"default\"")
		default:
			var err error
			if to, err = netip.ParsePrefix(r.To); err != nil {
				c.Add(rf+".to", "%q is not a CIDR or \"default\"", r.To)
			}
		}
		if r.Via != "" {
			via, err := netip.ParseAddr(r.Via)
			if err != nil {
				c.Add(rf+".via", "%q is not an IP address", r.Via)
			} else if to.IsValid() && via.Is4() != to.Addr().Is4() {
				c.Add(rf+".via", "%s and %s are of different address families", r.Via, r.To)
			}
		} else if r.To == "default" {
			c.Add(rf+".via", "required for a default route")
		}
		if r.Metric != nil && *r.Metric < 0 {
			c.Add(rf+".metric", "must not be negative")
		}
	}
	if ns := in.Nameservers; ns != nil {
		for i, a := range ns.Addresses {
			if _, err := netip.ParseAddr(a); err != nil {
				c.Add(fmt.Sprintf("%s.nameservers.addresses[%d]", f, i), "%q is not an IP address", a)
			}
		}
		for i, d := range ns.Search {
			if !validDNSName(strings.TrimSuffix(d, ".")) {
				c.Add(fmt.Sprintf("%s.nameservers.search[%d]", f, i), "%q is not a domain name", d)
			}
		}
	}
	if in.MTU != 0 && (in.MTU < 68 || in.MTU > 65535) {
		c.Add(f+".mtu", "%d is out of range (68–65535)", in.MTU)
	}
	if in.MACAddress != "" {
		checkMAC(c, f+".macAddress", in.MACAddress)
	}
}

// reMAC is the one form of a MAC address every consumer of a spec reads:
// six colon-separated octets. netplan takes no other, and QEMU no dotted
// form; Go's net.ParseMAC would also let 5254.0012.3456 and
// 52-54-00-12-34-56 through, to fail in the guest or in QEMU.
var reMAC = lazyre.New(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`)

// checkMAC validates a 48-bit MAC address and returns it in canonical
// lowercase colon form.
func checkMAC(c *ErrorList, field, s string) (string, bool) {
	if !reMAC.MatchString(s) {
		c.Add(field, "%q is not a MAC address in the colon form netplan and QEMU read, such as 52:54:00:12:34:56", s)
		return "", false
	}
	return strings.ToLower(s), true
}
