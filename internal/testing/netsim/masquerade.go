package netsim

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// masquerade writes, in the pod namespace netnsFd, the rules KubeVirt's
// masquerade binding writes in a virt-launcher pod for a VMI with no
// ports listed (no Istio, no migration ports), for one family:
// KubeVirt's pkg/network/setup/netpod/masquerade/masquerade.go,
// setupNATByFamily (read at kubevirt/kubevirt
// d923fdb815cd2016ddaebdaaa51db04133576d72, and again at
// 0be3b6ce583492099453a46755602697a8934496 for IPv6, which it writes the
// same way in "table ip6 nat", with ::1, the guest fd10:0:2::2 and its
// gateway fd10:0:2::1), which runs nft(8) for
//
//	table ip nat {
//		chain prerouting { type nat hook prerouting priority -100; iifname "eth0" counter jump KUBEVIRT_PREINBOUND }
//		chain input { type nat hook input priority 100; }
//		chain output { type nat hook output priority -100; ip daddr { 127.0.0.1 } counter dnat to 10.0.2.2 }
//		chain postrouting { type nat hook postrouting priority 100;
//			ip saddr 10.0.2.2 counter masquerade
//			oifname "k6t-eth0" counter jump KUBEVIRT_POSTINBOUND }
//		chain KUBEVIRT_PREINBOUND { counter dnat to 10.0.2.2 }
//		chain KUBEVIRT_POSTINBOUND { ip saddr { 127.0.0.1 } counter snat to 10.0.2.1 }
//	}
//
// The one-element anonymous sets are written as plain comparisons, which
// match the same packets. The first postrouting rule is the one a guest's
// request depends on: it leaves the pod as the pod IP.
func masquerade(netnsFd int, podIf, bridge string, v6 bool) error {
	c, err := nftables.New(nftables.WithNetNSFd(netnsFd))
	if err != nil {
		return err
	}
	family, loopback, guest, gateway := nftables.TableFamilyIPv4, netip.MustParseAddr("127.0.0.1"), GuestAddr, GatewayAddr
	if v6 {
		family, loopback, guest, gateway = nftables.TableFamilyIPv6, netip.IPv6Loopback(), GuestAddr6, GatewayAddr6
	}
	nat := c.AddTable(&nftables.Table{Name: "nat", Family: family})
	base := func(name string, hook *nftables.ChainHook, prio int32) *nftables.Chain {
		return c.AddChain(&nftables.Chain{Name: name, Table: nat, Type: nftables.ChainTypeNAT, Hooknum: hook,
			Priority: nftables.ChainPriorityRef(nftables.ChainPriority(prio))})
	}
	prerouting := base("prerouting", nftables.ChainHookPrerouting, -100)
	base("input", nftables.ChainHookInput, 100)
	output := base("output", nftables.ChainHookOutput, -100)
	postrouting := base("postrouting", nftables.ChainHookPostrouting, 100)
	preInbound := c.AddChain(&nftables.Chain{Name: "KUBEVIRT_PREINBOUND", Table: nat})
	postInbound := c.AddChain(&nftables.Chain{Name: "KUBEVIRT_POSTINBOUND", Table: nat})

	add := func(ch *nftables.Chain, x ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: nat, Chain: ch, Exprs: x})
	}
	add(prerouting, append(ifname(expr.MetaKeyIIFNAME, podIf), &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictJump, Chain: preInbound.Name})...)
	add(output, append(daddr(loopback), append([]expr.Any{&expr.Counter{}}, natTo(expr.NATTypeDestNAT, guest)...)...)...)
	add(postrouting, append(saddr(guest), &expr.Counter{}, &expr.Masq{})...)
	add(postrouting, append(ifname(expr.MetaKeyOIFNAME, bridge), &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictJump, Chain: postInbound.Name})...)
	add(preInbound, append([]expr.Any{&expr.Counter{}}, natTo(expr.NATTypeDestNAT, guest)...)...)
	add(postInbound, append(saddr(loopback), append([]expr.Any{&expr.Counter{}}, natTo(expr.NATTypeSourceNAT, gateway)...)...)...)
	return c.Flush()
}

// ifname matches an interface name exactly (iifname, oifname).
func ifname(key expr.MetaKey, name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: append([]byte(name), 0)},
	}
}

// saddr and daddr match the source or destination address of a's
// family's header (IPv4: bytes 12 and 16; IPv6: 8 and 24).
func saddr(a netip.Addr) []expr.Any {
	if a.Is4() {
		return addr(12, a)
	}
	return addr(8, a)
}

func daddr(a netip.Addr) []expr.Any {
	if a.Is4() {
		return addr(16, a)
	}
	return addr(24, a)
}

func addr(offset uint32, a netip.Addr) []expr.Any {
	b := a.AsSlice()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(len(b))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

// natTo is "snat to A" or "dnat to A", in A's family.
func natTo(typ expr.NATType, a netip.Addr) []expr.Any {
	family := uint32(unix.NFPROTO_IPV4)
	if a.Is6() {
		family = unix.NFPROTO_IPV6
	}
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a.AsSlice()},
		&expr.NAT{Type: typ, Family: family, RegAddrMin: 1},
	}
}
