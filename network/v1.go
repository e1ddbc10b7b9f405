package network

import (
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/spec"
)

// V1 renders n as cloud-init network-config version 1: `version: 1` and a
// config list of physical, bond, vlan and bridge entries with their subnets,
// followed by one nameserver entry holding every interface's DNS servers
// and search domains.
//
// Version 1 differs from the spec's netplan-like model in ways V1 resolves
// as follows, and refuses where it cannot:
//
//   - a physical interface always has a name, and cloud-init renames the
//     NIC with the entry's MAC address to it: an ethernet is named after
//     its setName, else its match.name (when not a pattern), else (when it
//     has no match) its configuration ID; a NIC matched by MAC address
//     alone would be renamed, so it needs a setName, and a name pattern
//     cannot be matched at all;
//   - routes belong to a subnet: IPv4 routes (gateway4 included, as a
//     default route) go to the interface's first static IPv4 subnet, or its
//     DHCPv4 subnet, and likewise for IPv6; a route is written with a
//     netmask, never "prefix: 0", which cloud-init misreads as /64;
//   - DNS servers and search domains are also set on the interface's first
//     static subnet, as cloud-init's own v2-to-v1 conversion does.
//
// It returns nil for a nil network.
func V1(n *spec.Network) ([]byte, error) {
	if n == nil {
		return nil, nil
	}
	var errs spec.ErrorList
	ifs := interfaces(n)
	names := map[string]string{} // configuration ID -> v1 name
	for _, f := range ifs {
		names[f.id] = v1Name(f, &errs)
	}
	config := yaml11.Sequence()
	var dnsAddrs, dnsSearch []string
	for _, f := range ifs {
		e := v1Entry(f, names, &errs)
		if f.in.MTU != 0 {
			yaml11.AddPair(e, "mtu", yaml11.IntNode(int64(f.in.MTU)))
		}
		addrs, search := f.nameservers()
		dnsAddrs, dnsSearch = appendUnique(dnsAddrs, addrs...), appendUnique(dnsSearch, search...)
		if subnets := v1Subnets(f, addrs, search, &errs); len(subnets.Content) > 0 {
			yaml11.AddPair(e, "subnets", subnets)
		}
		config.Content = append(config.Content, e)
	}
	if len(dnsAddrs)+len(dnsSearch) > 0 {
		ns := yaml11.Mapping("type", yaml11.String("nameserver"))
		yaml11.AddPair(ns, "address", yaml11.Flow(yaml11.Strings(dnsAddrs)))
		if len(dnsSearch) > 0 {
			yaml11.AddPair(ns, "search", yaml11.Flow(yaml11.Strings(dnsSearch)))
		}
		config.Content = append(config.Content, ns)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return yaml11.Marshal(yaml11.Mapping("version", yaml11.IntNode(1), "config", config))
}

// v1Entry starts an interface's config entry with what its kind has of
// its own (type, name, MAC address, members, parameters); V1 adds the
// MTU and subnets every kind shares. names maps configuration IDs to v1
// names.
func v1Entry(f *iface, names map[string]string, errs *spec.ErrorList) *yaml.Node {
	e := yaml11.Mapping()
	add := func(k string, v *yaml.Node) { yaml11.AddPair(e, k, v) }
	ownMAC := func() {
		if f.in.MACAddress != "" {
			add("mac_address", yaml11.String(mac(f.in.MACAddress)))
		}
	}
	switch {
	case f.eth != nil:
		add("type", yaml11.String("physical"))
		add("name", yaml11.String(names[f.id]))
		v1PhysicalMAC(e, f, errs)
	case f.bond != nil:
		add("type", yaml11.String("bond"))
		add("name", yaml11.String(f.id))
		ownMAC()
		add("bond_interfaces", v1Members(f.bond.Interfaces, names))
		// cloud-init requires params, even empty.
		add("params", v1BondParams(f.bond.Parameters, names))
	case f.bridge != nil:
		add("type", yaml11.String("bridge"))
		add("name", yaml11.String(f.id))
		ownMAC()
		add("bridge_interfaces", v1Members(f.bridge.Interfaces, names))
		add("params", v1BridgeParams(f))
	case f.vlan != nil:
		add("type", yaml11.String("vlan"))
		add("name", yaml11.String(f.id))
		add("vlan_link", yaml11.String(names[f.vlan.Link]))
		add("vlan_id", yaml11.IntNode(int64(f.vlan.ID)))
		ownMAC()
	}
	return e
}

// v1PhysicalMAC adds the MAC address that selects a physical NIC. Version
// 1 has no other use for it, so a spec that sets a different macAddress
// (changing the NIC's) is refused.
func v1PhysicalMAC(e *yaml.Node, f *iface, errs *spec.ErrorList) {
	const cannot = "network-config v1 cannot change a NIC's MAC address (its mac_address selects the NIC)"
	m := f.matchMAC()
	if m != "" {
		yaml11.AddPair(e, "mac_address", yaml11.String(m))
	}
	if f.in.MACAddress != "" && (m == "" || mac(f.in.MACAddress) != m) {
		errs.Add(f.field+".macAddress", cannot)
	}
}

// v1Members is a bond's or bridge's member list, by v1 name.
func v1Members(ids []string, names map[string]string) *yaml.Node {
	members := yaml11.Sequence()
	for _, m := range ids {
		members.Content = append(members.Content, yaml11.String(names[m]))
	}
	return yaml11.Flow(members)
}

// v1BondParams is a bond's params mapping, in ifupdown's bond-* names.
func v1BondParams(p *spec.BondParameters, names map[string]string) *yaml.Node {
	params := yaml11.Mapping()
	if p == nil {
		return params
	}
	str := func(k, v string) {
		if v != "" {
			yaml11.AddPair(params, k, yaml11.String(v))
		}
	}
	str("bond-mode", p.Mode)
	if p.MIIMonitorInterval != nil {
		yaml11.AddPair(params, "bond-miimon", yaml11.IntNode(int64(*p.MIIMonitorInterval)))
	}
	str("bond-lacp-rate", p.LACPRate)
	str("bond-xmit-hash-policy", p.TransmitHashPolicy)
	if p.Primary != "" {
		str("bond-primary", names[p.Primary])
	}
	return params
}

// v1BridgeParams is a bridge's params mapping, which always says whether
// STP is on.
func v1BridgeParams(f *iface) *yaml.Node {
	params := yaml11.Mapping("bridge_stp", yaml11.BoolNode(f.stp()))
	if p := f.bridge.Parameters; p != nil {
		if p.ForwardDelay != nil {
			yaml11.AddPair(params, "bridge_fd", yaml11.IntNode(int64(*p.ForwardDelay)))
		}
		if p.Priority != nil {
			yaml11.AddPair(params, "bridge_bridgeprio", yaml11.IntNode(int64(*p.Priority)))
		}
	}
	return params
}

// v1Name returns the name version 1 gives an interface (see V1).
func v1Name(f *iface, errs *spec.ErrorList) string {
	if f.eth == nil {
		return f.id
	}
	mt := f.eth.Match
	if f.eth.SetName != "" {
		if f.matchMAC() == "" {
			errs.Add(f.field+".setName", "network-config v1 renames only a NIC matched by MAC address; add match.macAddress")
		}
		return f.eth.SetName
	}
	if mt != nil && mt.Name != "" && hasGlob(mt.Name) && f.matchMAC() == "" {
		errs.Add(f.field+".match.name", "network-config v1 cannot match interfaces by a name pattern (%q); use match.macAddress or a literal name", mt.Name)
	}
	if n := f.literalName(); n != "" {
		return n
	}
	if f.matchMAC() != "" {
		// v1 names every NIC and renames the one with the MAC to that
		// name, where v2 and network_data.json keep the kernel's.
		errs.Add(f.field, "network-config v1 gives every NIC a name and renames the one with this MAC address to it, where the spec keeps the kernel's name; add setName (the name to give it), or use network-config v2")
	}
	return f.id
}

func v1Subnets(f *iface, dnsAddrs, dnsSearch []string, errs *spec.ErrorList) *yaml.Node {
	subnets := yaml11.Sequence()
	var first4, first6, firstStatic, dhcp4, dhcp6 *yaml.Node
	if f.in.DHCP4 {
		dhcp4 = yaml11.Mapping("type", yaml11.String("dhcp4"))
		subnets.Content = append(subnets.Content, dhcp4)
	}
	if f.in.DHCP6 {
		dhcp6 = yaml11.Mapping("type", yaml11.String("dhcp6"))
		subnets.Content = append(subnets.Content, dhcp6)
	}
	for _, a := range f.addresses(errs) {
		typ := "static"
		if !a.prefix.Addr().Is4() {
			typ = "static6"
		}
		s := yaml11.Mapping("type", yaml11.String(typ), "address", yaml11.String(a.prefix.String()))
		subnets.Content = append(subnets.Content, s)
		if firstStatic == nil {
			firstStatic = s
		}
		if typ == "static" && first4 == nil {
			first4 = s
		}
		if typ == "static6" && first6 == nil {
			first6 = s
		}
	}
	if first4 == nil {
		first4 = dhcp4
	}
	if first6 == nil {
		first6 = dhcp6
	}
	routes := map[*yaml.Node]*yaml.Node{}
	for _, r := range f.routes(errs) {
		target, fam := first4, "IPv4"
		if !r.is4() {
			target, fam = first6, "IPv6"
		}
		if target == nil {
			errs.Add(r.field, "network-config v1 attaches routes to an address; give this interface an %s address or DHCP", fam)
			continue
		}
		if routes[target] == nil {
			routes[target] = yaml11.Sequence()
			yaml11.AddPair(target, "routes", routes[target])
		}
		routes[target].Content = append(routes[target].Content, v1Route(r))
	}
	if firstStatic != nil {
		if len(dnsAddrs) > 0 {
			yaml11.AddPair(firstStatic, "dns_nameservers", yaml11.Flow(yaml11.Strings(dnsAddrs)))
		}
		if len(dnsSearch) > 0 {
			yaml11.AddPair(firstStatic, "dns_search", yaml11.Flow(yaml11.Strings(dnsSearch)))
		}
	}
	return subnets
}

// v1Route writes a route with network and netmask, IPv6 included:
// cloud-init drops a falsy prefix 0 before reading it and then assumes
// /64, so "::" with prefix 0 would become ::/64 instead of a default route.
func v1Route(r route) *yaml.Node {
	m := yaml11.Mapping("network", yaml11.String(r.to.Addr().String()))
	if r.is4() {
		yaml11.AddPair(m, "netmask", yaml11.String(ipv4Mask(r.to.Bits())))
	} else {
		yaml11.AddPair(m, "netmask", yaml11.String(ipv6Mask(r.to.Bits())))
	}
	if r.via.IsValid() {
		yaml11.AddPair(m, "gateway", yaml11.String(r.via.String()))
	}
	if r.metric != nil {
		yaml11.AddPair(m, "metric", yaml11.IntNode(int64(*r.metric)))
	}
	return m
}
