package network

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/vminit/vminit/spec"
)

// The network_data.json schema, fields in the order OpenStack Nova writes
// them. cloud-init reads it in sources/helpers/openstack.py
// (convert_net_json).
type networkData struct {
	Links    []link    `json:"links"`
	Networks []osNet   `json:"networks"`
	Services []service `json:"services"`
}

type link struct {
	ID                 string   `json:"id"`
	Type               string   `json:"type"`
	EthernetMACAddress string   `json:"ethernet_mac_address,omitempty"`
	MACAddress         string   `json:"mac_address,omitempty"` // a bond's; see bondMAC
	MTU                int      `json:"mtu,omitempty"`
	Name               string   `json:"name,omitempty"`
	BondLinks          []string `json:"bond_links,omitempty"`
	BondMode           string   `json:"bond_mode,omitempty"`
	BondMIIMon         *int     `json:"bond_miimon,omitempty"`
	BondLACPRate       string   `json:"bond_lacp_rate,omitempty"`
	BondXmitHashPolicy string   `json:"bond_xmit_hash_policy,omitempty"`
	BondPrimary        string   `json:"bond_primary,omitempty"`
	VLANLink           string   `json:"vlan_link,omitempty"`
	VLANID             int      `json:"vlan_id,omitempty"`
	VLANMACAddress     string   `json:"vlan_mac_address,omitempty"`
}

type osNet struct {
	ID             string    `json:"id"`
	Type           string    `json:"type"`
	Link           string    `json:"link"`
	IPAddress      string    `json:"ip_address,omitempty"`
	Netmask        string    `json:"netmask,omitempty"`
	Routes         []osRoute `json:"routes,omitempty"`
	DNSNameservers []string  `json:"dns_nameservers,omitempty"`
	DNSSearch      []string  `json:"dns_search,omitempty"`
}

type osRoute struct {
	Network string `json:"network"`
	Netmask string `json:"netmask"`
	Gateway string `json:"gateway,omitempty"`
	Metric  *int   `json:"metric,omitempty"`
}

type service struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// NetworkDataJSON renders n as OpenStack's network_data.json, the network
// configuration of a ConfigDrive. Links are the ethernets (type phy), bonds
// and VLANs; networks are their DHCP and static addresses (ipv4, ipv6,
// ipv4_dhcp, ipv6_dhcp) with routes, the default routes included; services
// are the DNS servers, one per entry.
//
// The format is narrower than the spec, and cloud-init reads it in set
// ways, so NetworkDataJSON refuses what it cannot carry, naming the field:
//
//   - a NIC is found by its MAC address, so an ethernet needs
//     match.macAddress; an ethernet's setName is passed as the link's name
//     (cloud-init renames the NIC to it), otherwise the guest's own name
//     stays. An ethernet without a MAC but with a literal match.name is a
//     link named so and no MAC (cloud-init configures the interface of that
//     name), as oVirt writes its links: weaker, since the guest's names
//     decide which NIC it is;
//   - cloud-init names bonds bond0, bond1… in the order of the links, so
//     bond IDs must be exactly those;
//   - cloud-init names a VLAN <parent>.<VLAN ID>, so a VLAN's ID must be
//     that, with a parent whose name is known (a bond, or an ethernet with
//     setName or a literal match.name);
//   - routes and search domains hang off an address: an interface with
//     routes or search domains needs an address (or DHCP) of that family.
//
// It returns nil for a nil network.
func NetworkDataJSON(n *spec.Network) ([]byte, error) {
	if n == nil {
		return nil, nil
	}
	var errs spec.ErrorList
	ifs := interfaces(n)
	byID := indexByID(ifs)
	nd := networkData{Links: []link{}, Networks: []osNet{}, Services: []service{}}
	var dns []string
	bondIndex := 0
	for _, f := range ifs {
		l := link{ID: f.id, MTU: f.in.MTU}
		switch {
		case f.eth != nil:
			osEthernetLink(&l, f, &errs)
		case f.bond != nil:
			osBondLink(&l, f, bondIndex, byID, &errs)
			bondIndex++
		case f.bridge != nil:
			errs.Add(f.field, "ConfigDrive's network_data.json has no bridges (cloud-init 22.4 would configure this one as a NIC); use NoCloud")
			continue
		case f.vlan != nil:
			osVLANLink(&l, f, byID, &errs)
		}
		nd.Links = append(nd.Links, l)
		nd.Networks = append(nd.Networks, osNetworks(f, len(nd.Networks), &dns, &errs)...)
	}
	for _, a := range dns {
		nd.Services = append(nd.Services, service{Type: "dns", Address: a})
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(nd); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// osEthernetLink fills in a phy link: found by its MAC address, or, as
// oVirt writes its links, named after a literal match.name.
func osEthernetLink(l *link, f *iface, errs *spec.ErrorList) {
	l.Type = "phy"
	l.EthernetMACAddress = f.matchMAC()
	l.Name = f.eth.SetName
	if l.EthernetMACAddress == "" && f.eth.SetName == "" && f.eth.Match != nil && f.literalName() != "" {
		l.Name = f.literalName()
	} else if l.EthernetMACAddress == "" {
		field := f.field + ".match.macAddress"
		errs.Add(field, "ConfigDrive's network_data.json matches NICs by MAC address; add one")
	} else if f.in.MACAddress != "" && mac(f.in.MACAddress) != l.EthernetMACAddress {
		errs.Add(f.field+".macAddress", "network_data.json cannot change a NIC's MAC address (ethernet_mac_address selects the NIC)")
	}
}

// osBondLink fills in a bond link, the index-th bond (cloud-init names
// them bond0, bond1… in that order).
func osBondLink(l *link, f *iface, index int, byID map[string]*iface, errs *spec.ErrorList) {
	l.Type = "bond"
	if want := "bond" + strconv.Itoa(index); f.id != want {
		errs.Add(f.field, "cloud-init names the bonds of network_data.json bond0, bond1… in order, so this bond would become %s; use that ID", want)
	}
	l.MACAddress = mac(f.in.MACAddress)
	l.BondLinks = f.bond.Interfaces
	if p := f.bond.Parameters; p != nil {
		l.BondMode, l.BondMIIMon, l.BondLACPRate, l.BondXmitHashPolicy = p.Mode, p.MIIMonitorInterval, p.LACPRate, p.TransmitHashPolicy
	}
	l.BondPrimary = bondPrimary(f, byID, "network_data.json", errs)
}

// osVLANLink fills in a vlan link, with the MAC address cloud-init
// requires, and checks that its ID is the name cloud-init will give it.
func osVLANLink(l *link, f *iface, byID map[string]*iface, errs *spec.ErrorList) {
	l.Type = "vlan"
	l.VLANLink, l.VLANID = f.vlan.Link, f.vlan.ID
	parent := byID[f.vlan.Link]
	if parent == nil {
		errs.Add(f.field+".link", "%q is not defined in spec.network", f.vlan.Link)
		return
	}
	// cloud-init requires vlan_mac_address; a VLAN has its
	// parent's MAC unless set.
	l.VLANMACAddress = mac(f.in.MACAddress)
	if l.VLANMACAddress == "" {
		l.VLANMACAddress = parentMAC(parent, byID)
	}
	if l.VLANMACAddress == "" {
		errs.Add(f.field+".macAddress", "network_data.json needs a VLAN's MAC address, and its parent %s has none to inherit; set one", f.vlan.Link)
	}
	if pn := parent.guestName(); pn == "" {
		errs.Add(f.field+".link", "cloud-init names a network_data.json VLAN after its parent's interface name, which for %s depends on the guest; give %s a setName", parent.field, f.vlan.Link)
	} else if want := fmt.Sprintf("%s.%d", pn, f.vlan.ID); f.id != want {
		errs.Add(f.field, "cloud-init names a network_data.json VLAN <parent>.<VLAN ID>, so this one would become %s; use that ID", want)
	}
}

// A bond's own MAC address is written as the link's mac_address, not as
// the ethernet_mac_address Nova would use. cloud-init before 24.2 (and
// Debian 12's 22.4.2 before 22.4.2-1+deb12u4) puts a bond link's
// ethernet_mac_address into the bond's parameters, and its v1 parser copies
// every bond parameter to each member: every member then carries the bond's
// MAC and is matched by it, so a guest configures the wrong NIC (upstream
// cloud-init #5368, fixed by #5369). Every cloud-init, old and new, copies a
// link's mac_address key into the interface it builds (its valid_keys
// filter), so the bond gets its MAC and its members keep theirs.

// parentMAC is the MAC address a VLAN on p inherits: an ethernet's, or a
// bond's own, else its first member's (a Linux bond takes its first
// member's address).
func parentMAC(p *iface, byID map[string]*iface) string {
	switch {
	case p.eth != nil:
		if m := mac(p.in.MACAddress); m != "" {
			return m
		}
		return p.matchMAC()
	case p.bond != nil:
		if m := mac(p.in.MACAddress); m != "" {
			return m
		}
		if len(p.bond.Interfaces) > 0 {
			if m := byID[p.bond.Interfaces[0]]; m != nil {
				return parentMAC(m, byID)
			}
		}
	}
	return ""
}

// osNetworks returns the networks of one link: DHCP first, then static
// addresses. Routes go to the first network of their family (static
// before DHCP), DNS servers and search domains to the first static network
// (or the first network); the servers are also collected into dns for the
// services list.
func osNetworks(f *iface, next int, dns *[]string, errs *spec.ErrorList) []osNet {
	var nets []osNet
	add := func(n osNet) {
		n.ID, n.Link = "network"+strconv.Itoa(next+len(nets)), f.id
		nets = append(nets, n)
	}
	if f.in.DHCP4 {
		add(osNet{Type: "ipv4_dhcp"})
	}
	if f.in.DHCP6 {
		add(osNet{Type: "ipv6_dhcp"})
	}
	first4, first6, firstStatic := -1, -1, -1
	for _, a := range f.addresses(errs) {
		n := osNet{Type: "ipv4", IPAddress: a.prefix.Addr().String(), Netmask: ipv4Mask(a.prefix.Bits())}
		if !a.prefix.Addr().Is4() {
			n.Type, n.Netmask = "ipv6", ipv6Mask(a.prefix.Bits())
		}
		if firstStatic < 0 {
			firstStatic = len(nets)
		}
		if n.Type == "ipv4" && first4 < 0 {
			first4 = len(nets)
		}
		if n.Type == "ipv6" && first6 < 0 {
			first6 = len(nets)
		}
		add(n)
	}
	for i, n := range nets {
		if n.Type == "ipv4_dhcp" && first4 < 0 {
			first4 = i
		}
		if n.Type == "ipv6_dhcp" && first6 < 0 {
			first6 = i
		}
	}
	for _, r := range f.routes(errs) {
		target, fam := first4, "IPv4"
		if !r.is4() {
			target, fam = first6, "IPv6"
		}
		if target < 0 {
			errs.Add(r.field, "network_data.json attaches routes to a network; give this interface an %s address or DHCP", fam)
			continue
		}
		or := osRoute{Network: r.to.Addr().String(), Metric: r.metric}
		if r.is4() {
			or.Netmask = ipv4Mask(r.to.Bits())
		} else {
			or.Netmask = ipv6Mask(r.to.Bits())
		}
		if r.via.IsValid() {
			or.Gateway = r.via.String()
		}
		nets[target].Routes = append(nets[target].Routes, or)
	}
	addrs, search := f.nameservers()
	*dns = appendUnique(*dns, addrs...)
	if len(addrs)+len(search) > 0 {
		target := firstStatic
		if target < 0 && len(nets) > 0 {
			target = 0
		}
		switch {
		case target >= 0:
			nets[target].DNSNameservers, nets[target].DNSSearch = addrs, search
		case len(search) > 0:
			errs.Add(f.field+".nameservers.search", "network_data.json carries search domains on an interface's networks, and this interface has no address or DHCP")
		}
	}
	return nets
}
