package network

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/spec"
)

// V2 renders n as cloud-init network-config version 2 (netplan's format):
// a YAML document whose top level is `version: 2` with ethernets, bonds and
// vlans beside it. It is not wrapped in a top-level `network:` key: cloud-init
// 22.4 strips such a key, but older releases and the NoCloud docs expect the
// bare form, which every release reads.
//
// gateway4 is written as a default route (to 0.0.0.0/0), as netplan now
// prefers, and so is a route "to: default": cloud-init's own v2 parser
// (used on distributions without netplan) cannot read "default". The IPv6
// default route (gateway6, or the first IPv6 default route without a
// metric) stays gateway6, because that parser turns to: ::/0 into ::/64;
// netplan reads it with a deprecation notice. It returns nil for a nil
// network.
//
// Two readers take network-config v2: netplan itself (Ubuntu), and
// cloud-init's own v2 parser everywhere else (Debian, RHEL…), which refers
// to bond members and VLAN parents by interface name, not by netplan's
// configuration ID. So an ethernet is written under its guest name (its
// setName or literal match.name) when it has one, with every reference
// following it, and a bond member or VLAN parent must have one: a NIC
// matched by MAC address alone keeps the kernel's name, which only the
// guest knows. That parser also drops a bond's macaddress (netplan keeps
// it); the bond then takes a member's. Use network-config v1 or ConfigDrive
// where the bond's own MAC matters on such guests.
func V2(n *spec.Network) ([]byte, error) {
	if n == nil {
		return nil, nil
	}
	var errs spec.ErrorList
	ifs := interfaces(n)
	keys := v2Keys(ifs, &errs)
	doc := yaml11.Mapping("version", yaml11.IntNode(2))
	sections := map[string]*yaml.Node{}
	for _, f := range ifs {
		sec := sections[f.kind]
		if sec == nil {
			sec = yaml11.Mapping()
			sections[f.kind] = sec
			yaml11.AddPair(doc, f.kind, sec)
		}
		yaml11.AddPair(sec, keys[f.id], v2Interface(f, keys, &errs))
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return yaml11.Marshal(doc)
}

// v2Keys maps each configuration ID to the key V2 writes it under (see
// V2), and reports references cloud-init's v2 parser could not follow.
func v2Keys(ifs []*iface, errs *spec.ErrorList) map[string]string {
	keys := map[string]string{}
	byID := indexByID(ifs)
	owner := map[string]string{}
	for _, f := range ifs {
		keys[f.id] = f.id
		if n := f.guestName(); f.eth != nil && n != "" {
			keys[f.id] = n
		}
		if prev, dup := owner[keys[f.id]]; dup {
			errs.Add(f.field, "is also named %q, like %s", keys[f.id], prev)
		}
		owner[keys[f.id]] = f.field
	}
	ref := func(field, id string) {
		if m := byID[id]; m != nil && m.eth != nil && m.guestName() == "" {
			errs.Add(field, "cloud-init's own network-config v2 parser (distributions without netplan) refers to %s by its interface name, which for a NIC matched by MAC address alone is the guest kernel's; give it a setName", m.field)
		}
	}
	for _, f := range ifs {
		for i, m := range f.members() {
			ref(fmt.Sprintf("%s.interfaces[%d]", f.field, i), m)
		}
		if f.vlan != nil {
			ref(f.field+".link", f.vlan.Link)
		}
	}
	return keys
}

// v2Interface renders one interface: what its kind has of its own, then
// the settings every kind shares, in netplan's order.
func v2Interface(f *iface, keys map[string]string, errs *spec.ErrorList) *yaml.Node {
	m := yaml11.Mapping()
	switch {
	case f.eth != nil:
		v2Ethernet(m, f.eth)
	case f.bond != nil:
		yaml11.AddPair(m, "interfaces", v2Members(f.bond.Interfaces, keys))
		if params := v2BondParameters(f.bond.Parameters, keys); params != nil {
			yaml11.AddPair(m, "parameters", params)
		}
	case f.bridge != nil:
		yaml11.AddPair(m, "interfaces", v2Members(f.bridge.Interfaces, keys))
		yaml11.AddPair(m, "parameters", v2BridgeParameters(f))
	case f.vlan != nil:
		yaml11.AddPair(m, "id", yaml11.IntNode(int64(f.vlan.ID)))
		yaml11.AddPair(m, "link", yaml11.String(keys[f.vlan.Link]))
	}
	v2Settings(m, f, errs)
	return m
}

// v2Ethernet adds how an ethernet is found and what it is renamed to.
func v2Ethernet(m *yaml.Node, e *spec.Ethernet) {
	if mt := e.Match; mt != nil {
		match := yaml11.Mapping()
		if mt.MACAddress != "" {
			yaml11.AddPair(match, "macaddress", yaml11.String(mac(mt.MACAddress)))
		}
		if mt.Name != "" {
			yaml11.AddPair(match, "name", yaml11.String(mt.Name))
		}
		yaml11.AddPair(m, "match", match)
	}
	if e.SetName != "" {
		yaml11.AddPair(m, "set-name", yaml11.String(e.SetName))
	}
}

// v2Members is a bond's or bridge's member list, under the keys V2 writes
// the members under.
func v2Members(ids []string, keys map[string]string) *yaml.Node {
	members := yaml11.Sequence()
	for _, m := range ids {
		members.Content = append(members.Content, yaml11.String(keys[m]))
	}
	return yaml11.Flow(members)
}

// v2BondParameters is a bond's parameters mapping, or nil when it has
// none.
func v2BondParameters(p *spec.BondParameters, keys map[string]string) *yaml.Node {
	if p == nil {
		return nil
	}
	params := yaml11.Mapping()
	str := func(k, v string) {
		if v != "" {
			yaml11.AddPair(params, k, yaml11.String(v))
		}
	}
	str("mode", p.Mode)
	if p.MIIMonitorInterval != nil {
		yaml11.AddPair(params, "mii-monitor-interval", yaml11.IntNode(int64(*p.MIIMonitorInterval)))
	}
	str("lacp-rate", p.LACPRate)
	str("transmit-hash-policy", p.TransmitHashPolicy)
	if p.Primary != "" {
		str("primary", keys[p.Primary])
	}
	if len(params.Content) == 0 {
		return nil
	}
	return params
}

// v2BridgeParameters is a bridge's parameters mapping, which always says
// whether STP is on.
func v2BridgeParameters(f *iface) *yaml.Node {
	params := yaml11.Mapping("stp", yaml11.BoolNode(f.stp()))
	if p := f.bridge.Parameters; p != nil {
		if p.ForwardDelay != nil {
			yaml11.AddPair(params, "forward-delay", yaml11.IntNode(int64(*p.ForwardDelay)))
		}
		if p.Priority != nil {
			yaml11.AddPair(params, "priority", yaml11.IntNode(int64(*p.Priority)))
		}
	}
	return params
}

// v2Settings adds the settings every kind of interface shares: MAC
// address, MTU, DHCP, addresses, routes and name servers.
func v2Settings(m *yaml.Node, f *iface, errs *spec.ErrorList) {
	add := func(k string, v *yaml.Node) { yaml11.AddPair(m, k, v) }
	if f.in.MACAddress != "" {
		add("macaddress", yaml11.String(mac(f.in.MACAddress)))
	}
	if f.in.MTU != 0 {
		add("mtu", yaml11.IntNode(int64(f.in.MTU)))
	}
	if f.in.DHCP4 {
		add("dhcp4", yaml11.BoolNode(true))
	}
	if f.in.DHCP6 {
		add("dhcp6", yaml11.BoolNode(true))
	}
	if addrs := f.addresses(errs); len(addrs) > 0 {
		seq := yaml11.Sequence()
		for _, a := range addrs {
			seq.Content = append(seq.Content, yaml11.String(a.prefix.String()))
		}
		add("addresses", yaml11.Flow(seq))
	}
	v2Routes(m, f.routes(errs))
	if addrs, search := f.nameservers(); len(addrs)+len(search) > 0 {
		ns := yaml11.Mapping()
		if len(addrs) > 0 {
			yaml11.AddPair(ns, "addresses", yaml11.Flow(yaml11.Strings(addrs)))
		}
		if len(search) > 0 {
			yaml11.AddPair(ns, "search", yaml11.Flow(yaml11.Strings(search)))
		}
		add("nameservers", ns)
	}
}

// v2Routes adds an interface's routes: the IPv6 default route as
// gateway6 (see below), the others as routes.
func v2Routes(m *yaml.Node, routes []route) {
	for i, r := range routes {
		if !r.is4() && r.to.Bits() == 0 && r.via.IsValid() && r.metric == nil {
			// cloud-init 22.4's own v2 parser (distributions without
			// netplan) normalizes a route twice and loses prefix 0 on
			// the way, turning to: ::/0 into ::/64; gateway6 it reads
			// right. netplan reads both.
			yaml11.AddPair(m, "gateway6", yaml11.String(r.via.String()))
			routes = append(routes[:i:i], routes[i+1:]...)
			break
		}
	}
	if len(routes) == 0 {
		return
	}
	seq := yaml11.Sequence()
	for _, r := range routes {
		rm := yaml11.Mapping("to", yaml11.String(r.to.String()))
		if r.via.IsValid() {
			yaml11.AddPair(rm, "via", yaml11.String(r.via.String()))
		}
		if r.metric != nil {
			yaml11.AddPair(rm, "metric", yaml11.IntNode(int64(*r.metric)))
		}
		seq.Content = append(seq.Content, rm)
	}
	yaml11.AddPair(m, "routes", seq)
}
