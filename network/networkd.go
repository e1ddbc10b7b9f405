package network

import (
	"fmt"
	"strings"

	"github.com/vminit/vminit/spec"
)

// Networkd renders n as systemd-networkd configuration, for Flatcar and
// other networkd guests: a .network file per interface, a .netdev file per
// bond, VLAN and bridge, and a .link file for each ethernet with setName.
//
// Files are named 20-vminit-<ID> (10-vminit-<ID>.link), so they sort
// before the images' catch-all DHCP file (Flatcar's zz-default.network)
// and networkd applies them first. A NIC matched by MAC address is matched
// by PermanentMACAddress (systemd 245 and later): a bond created with its
// MAC address, and VLANs on that bond, carry the same current address and
// would otherwise match the NIC's file instead of their own. gateway4 and
// gateway6 become [Route] sections like the other routes, so every route
// of an interface reads the same way.
//
// Output is stable: files in the order ethernets, bonds, VLANs, bridges, each
// sorted by configuration ID. It returns nil for a nil network.
func Networkd(n *spec.Network) ([]File, error) {
	if n == nil {
		return nil, nil
	}
	var errs spec.ErrorList
	ifs := interfaces(n)
	portOf := ports(ifs)
	vlansOn := map[string][]string{}
	for _, f := range ifs {
		if f.vlan != nil {
			vlansOn[f.vlan.Link] = append(vlansOn[f.vlan.Link], f.id)
		}
	}
	var out []File
	for _, f := range ifs {
		if lf, ok := linkFile(f); ok {
			out = append(out, lf)
		}
	}
	for _, f := range ifs {
		if nd := netdevFile(f); nd != nil {
			out = append(out, File{Path: NetworkdDir + "/20-vminit-" + f.id + ".netdev", Mode: 0o644, Data: nd})
		}
	}
	for _, f := range ifs {
		var primary bool
		if c := portOf[f.id]; c != nil && c.bond != nil {
			if p := c.bond.Parameters; p != nil && p.Primary == f.id {
				primary = true
			}
		}
		out = append(out, File{
			Path: NetworkdDir + "/20-vminit-" + f.id + ".network",
			Mode: 0o644,
			Data: networkFile(f, portOf[f.id], primary, vlansOn[f.id], &errs),
		})
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// netdevFile creates a bond, VLAN or bridge device; nil for an ethernet.
func netdevFile(f *iface) []byte {
	if f.eth != nil {
		return nil
	}
	w := newINI(header(f))
	w.section("NetDev")
	w.kv("Name", f.id)
	w.kv("Kind", map[string]string{"bonds": "bond", "vlans": "vlan", "bridges": "bridge"}[f.kind])
	if m := mac(f.in.MACAddress); m != "" {
		w.kv("MACAddress", m)
	}
	switch {
	case f.bond != nil && f.bond.Parameters != nil:
		p := f.bond.Parameters
		var kv [][2]string
		if p.Mode != "" {
			kv = append(kv, [2]string{"Mode", p.Mode})
		}
		if p.MIIMonitorInterval != nil {
			kv = append(kv, [2]string{"MIIMonitorSec", fmt.Sprintf("%dms", *p.MIIMonitorInterval)})
		}
		if p.LACPRate != "" {
			kv = append(kv, [2]string{"LACPTransmitRate", p.LACPRate})
		}
		if p.TransmitHashPolicy != "" {
			kv = append(kv, [2]string{"TransmitHashPolicy", p.TransmitHashPolicy})
		}
		if len(kv) > 0 {
			w.section("Bond")
			for _, e := range kv {
				w.kv(e[0], e[1])
			}
		}
	case f.bridge != nil:
		w.section("Bridge")
		w.kv("STP", map[bool]string{true: "yes", false: "no"}[f.stp()])
		if p := f.bridge.Parameters; p != nil {
			if p.ForwardDelay != nil {
				w.kv("ForwardDelaySec", fmt.Sprint(*p.ForwardDelay))
			}
			if p.Priority != nil {
				w.kv("Priority", fmt.Sprint(*p.Priority))
			}
		}
	case f.vlan != nil:
		w.section("VLAN")
		w.kv("Id", fmt.Sprint(f.vlan.ID))
	}
	return w.bytes()
}

func networkFile(f *iface, controller *iface, primary bool, vlans []string, errs *spec.ErrorList) []byte {
	w := newINI(header(f))
	w.section("Match")
	if m := f.matchMAC(); m != "" {
		w.kv("PermanentMACAddress", m)
		if nm := f.matchName(); nm != "" {
			w.kv("Name", nm)
		}
	} else if name := f.guestName(); name != "" {
		w.kv("Name", name)
	} else if f.eth != nil && f.eth.Match != nil {
		w.kv("Name", f.eth.Match.Name) // a pattern: Name= takes globs
	}
	if f.in.MTU != 0 || (f.eth != nil && f.in.MACAddress != "") {
		w.section("Link")
		if f.eth != nil && f.in.MACAddress != "" {
			// A bond's or VLAN's address is set by its .netdev.
			w.kv("MACAddress", mac(f.in.MACAddress))
		}
		if f.in.MTU != 0 {
			w.kv("MTUBytes", fmt.Sprint(f.in.MTU))
		}
	}
	w.section("Network")
	if controller != nil {
		w.kv(map[string]string{"bonds": "Bond", "bridges": "Bridge"}[controller.kind], controller.id)
		if primary {
			w.kv("PrimarySlave", "true")
		}
	} else {
		dhcp := "no"
		switch {
		case f.in.DHCP4 && f.in.DHCP6:
			dhcp = "yes"
		case f.in.DHCP4:
			dhcp = "ipv4"
		case f.in.DHCP6:
			dhcp = "ipv6"
		}
		w.kv("DHCP", dhcp)
		for _, a := range f.addresses(errs) {
			w.kv("Address", a.prefix.String())
		}
		dns, search := f.nameservers()
		for _, s := range dns {
			w.kv("DNS", s)
		}
		if len(search) > 0 {
			w.kv("Domains", strings.Join(search, " "))
		}
	}
	for _, v := range vlans {
		w.kv("VLAN", v)
	}
	if controller == nil {
		for _, r := range f.routes(errs) {
			w.section("Route")
			if r.to.Bits() != 0 || !r.via.IsValid() {
				w.kv("Destination", r.to.String())
			}
			if r.via.IsValid() {
				w.kv("Gateway", r.via.String())
			} else if r.is4() {
				// On-link: the destination is reachable without a
				// router.
				w.kv("Scope", "link")
			}
			if r.metric != nil {
				w.kv("Metric", fmt.Sprint(*r.metric))
			}
		}
	}
	return w.bytes()
}
