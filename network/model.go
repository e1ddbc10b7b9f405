package network

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/spec"
)

// iface is one interface of the spec in the order every renderer emits
// them: ethernets, then bonds, then VLANs, then bridges, each sorted by
// configuration ID (bonds by their number when named bondN, so bond2
// precedes bond10).
type iface struct {
	kind   string // "ethernets", "bonds", "vlans" or "bridges"
	id     string
	field  string // spec.network.<kind>.<id>
	in     *spec.Interface
	eth    *spec.Ethernet
	bond   *spec.Bond
	vlan   *spec.VLAN
	bridge *spec.Bridge
}

func interfaces(n *spec.Network) []*iface {
	var out []*iface
	for _, id := range slices.Sorted(maps.Keys(n.Ethernets)) {
		e := n.Ethernets[id]
		out = append(out, &iface{kind: "ethernets", id: id, in: &e.Interface, eth: &e})
	}
	bonds := slices.Collect(maps.Keys(n.Bonds))
	slices.SortFunc(bonds, compareBondIDs)
	for _, id := range bonds {
		b := n.Bonds[id]
		out = append(out, &iface{kind: "bonds", id: id, in: &b.Interface, bond: &b})
	}
	for _, id := range slices.Sorted(maps.Keys(n.VLANs)) {
		v := n.VLANs[id]
		out = append(out, &iface{kind: "vlans", id: id, in: &v.Interface, vlan: &v})
	}
	for _, id := range slices.Sorted(maps.Keys(n.Bridges)) {
		b := n.Bridges[id]
		out = append(out, &iface{kind: "bridges", id: id, in: &b.Interface, bridge: &b})
	}
	for _, f := range out {
		f.field = "spec.network." + f.kind + "." + f.id
	}
	return out
}

// indexByID maps each interface's configuration ID to it: the spec refers
// to interfaces by ID (a bond's members and primary, a VLAN's link).
func indexByID(ifs []*iface) map[string]*iface {
	byID := make(map[string]*iface, len(ifs))
	for _, f := range ifs {
		byID[f.id] = f
	}
	return byID
}

// bondPrimary is the interface name of bond f's primary port, "" when it
// has none, for the formats that name the primary by interface name
// (NetworkManager's primary option, network_data.json's bond_primary)
// rather than by configuration ID (netplan, v1) or on the port itself
// (networkd). A primary whose name the spec does not know (a NIC matched
// by MAC address alone, named by the guest's kernel) is refused, naming
// format, the consumer that needs it.
func bondPrimary(f *iface, byID map[string]*iface, format string, errs *spec.ErrorList) string {
	p := f.bond.Parameters
	if p == nil || p.Primary == "" {
		return ""
	}
	if m := byID[p.Primary]; m != nil && m.guestName() != "" {
		return m.guestName()
	}
	errs.Add(f.field+".parameters.primary", "%s names a bond's primary port by its interface name, which for %s depends on the guest; give it a setName", format, p.Primary)
	return ""
}

var bondNumRE = lazyre.New(`^bond(0|[1-9][0-9]{0,8})$`)

// bondNumber returns N for an ID "bondN".
func bondNumber(id string) (int, bool) {
	m := bondNumRE.FindStringSubmatch(id)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(m[1])
	return n, true
}

func compareBondIDs(a, b string) int {
	na, oka := bondNumber(a)
	nb, okb := bondNumber(b)
	switch {
	case oka && okb:
		return na - nb
	case oka:
		return -1
	case okb:
		return 1
	}
	return strings.Compare(a, b)
}

// mac returns the canonical (lower-case, colon) form of a MAC address, or
// "" for an empty one.
func mac(s string) string {
	if s == "" {
		return ""
	}
	if hw, err := net.ParseMAC(s); err == nil {
		return hw.String()
	}
	return strings.ToLower(s)
}

// members returns the configuration IDs a bond aggregates or a bridge
// bridges.
func (f *iface) members() []string {
	switch {
	case f.bond != nil:
		return f.bond.Interfaces
	case f.bridge != nil:
		return f.bridge.Interfaces
	}
	return nil
}

// stp is whether a bridge runs the spanning tree protocol (see
// spec.BridgeParameters.STP).
func (f *iface) stp() bool {
	p := f.bridge.Parameters
	return p != nil && p.STP != nil && *p.STP
}

func (f *iface) matchMAC() string {
	if f.eth != nil && f.eth.Match != nil {
		return mac(f.eth.Match.MACAddress)
	}
	return ""
}

// hasGlob reports whether an interface name pattern is a shell glob.
func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// literalName returns the interface name an ethernet is known to have
// without renaming: its match.name when that is not a pattern, or its ID
// when it has no match.
func (f *iface) literalName() string {
	if f.eth == nil {
		return f.id
	}
	if f.eth.Match == nil {
		return f.id
	}
	if n := f.eth.Match.Name; n != "" && !hasGlob(n) {
		return n
	}
	return ""
}

// guestName is the interface's name on the guest once renaming is done:
// setName, a literal match.name, or the ID of an unmatched ethernet, bond
// or VLAN. It is "" for a NIC known only by MAC address or a name pattern.
func (f *iface) guestName() string {
	if f.eth != nil && f.eth.SetName != "" {
		return f.eth.SetName
	}
	return f.literalName()
}

// address is a static address of an interface.
type address struct {
	prefix netip.Prefix
	field  string
}

func (f *iface) addresses(errs *spec.ErrorList) []address {
	var out []address
	for i, a := range f.in.Addresses {
		field := fmt.Sprintf("%s.addresses[%d]", f.field, i)
		p, err := netip.ParsePrefix(a)
		if err != nil {
			errs.Add(field, "%q is not an address in CIDR form such as 192.0.2.10/24", a)
			continue
		}
		out = append(out, address{p, field})
	}
	return out
}

// route is a static route; gateway4 and gateway6 become default routes
// (0.0.0.0/0 and ::/0), listed first, so that every format carries the
// same routes in the same order.
type route struct {
	to     netip.Prefix
	via    netip.Addr // zero for an on-link route
	metric *int
	field  string
}

func (r route) is4() bool { return r.to.Addr().Is4() }

func (f *iface) routes(errs *spec.ErrorList) []route {
	var out []route
	gw := func(field, s string, def netip.Prefix) {
		if s == "" {
			return
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Is4() != def.Addr().Is4() {
			errs.Add(field, "%q is not an IP address of the right family", s)
			return
		}
		out = append(out, route{to: def, via: a, field: field})
	}
	gw(f.field+".gateway4", f.in.Gateway4, netip.MustParsePrefix("0.0.0.0/0"))
	gw(f.field+".gateway6", f.in.Gateway6, netip.MustParsePrefix("::/0"))
	for i, r := range f.in.Routes {
		field := fmt.Sprintf("%s.routes[%d]", f.field, i)
		var rt route
		rt.field, rt.metric = field, r.Metric
		if r.Via != "" {
			a, err := netip.ParseAddr(r.Via)
			if err != nil {
				errs.Add(field+".via", "%q is not an IP address", r.Via)
				continue
			}
			rt.via = a
		}
		switch {
		case r.To == "default" && rt.via.Is4():
			rt.to = netip.MustParsePrefix("0.0.0.0/0")
		case r.To == "default" && rt.via.IsValid():
			rt.to = netip.MustParsePrefix("::/0")
		case r.To == "default":
			errs.Add(field+".via", "required for a default route")
			continue
		default:
			p, err := netip.ParsePrefix(r.To)
			if err != nil {
				errs.Add(field+".to", "%q is not a CIDR or \"default\"", r.To)
				continue
			}
			// The network, not an address in it: renderers differ on
			// what they make of host bits in a destination.
			rt.to = p.Masked()
		}
		if rt.via.IsValid() && rt.via.Is4() != rt.to.Addr().Is4() {
			errs.Add(field+".via", "%s and %s are of different address families", r.Via, r.To)
			continue
		}
		out = append(out, rt)
	}
	return out
}

func (f *iface) nameservers() (addrs, search []string) {
	if ns := f.in.Nameservers; ns != nil {
		for _, a := range ns.Addresses {
			if p, err := netip.ParseAddr(a); err == nil {
				a = p.String()
			}
			addrs = append(addrs, a)
		}
		search = append(search, ns.Search...)
	}
	return addrs, search
}

// ipv4Mask returns the dotted netmask of an IPv4 prefix length.
func ipv4Mask(bits int) string {
	m := net.CIDRMask(bits, 32)
	return net.IP(m).String()
}

// ipv6Mask returns the IPv6 netmask of a prefix length in the form
// OpenStack writes it (ffff:ffff:ffff:ffff::).
func ipv6Mask(bits int) string {
	m := net.CIDRMask(bits, 128)
	a, _ := netip.AddrFromSlice(m)
	return a.String()
}

func appendUnique(list []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(list, it) {
			list = append(list, it)
		}
	}
	return list
}
