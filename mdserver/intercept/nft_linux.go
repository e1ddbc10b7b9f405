package intercept

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// ourTable is the table of a family every function here works on: only
// these two.
func ourTable(v6 bool) *nftables.Table {
	if v6 {
		return &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv6}
	}
	return &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}
}

// Install writes the table into the network namespace netnsFd (an open
// file of it: /proc/PID/ns/net, /run/netns/NAME, or the Fd of
// containernetworking's ns.NetNS; 0 is the caller's own), replacing a
// table of the same name that is there: one netlink batch, so the
// kernel applies the whole replacement or none of it, and a second
// Install leaves one table, never two sets of rules.
func (t *Table) Install(netnsFd int) error {
	v6 := t.IPv6()
	c, err := nftables.New(nftables.WithNetNSFd(netnsFd))
	if err != nil {
		return explain("install", v6, err)
	}
	// NEWTABLE without NLM_F_EXCL does not fail on an existing table, and
	// the DELTABLE after it then always has one to delete.
	table := ourTable(v6)
	c.AddTable(table)
	c.DelTable(table)
	c.AddTable(table)
	for _, ch := range t.chains {
		nc := c.AddChain(&nftables.Chain{
			Name:     ch.name,
			Table:    table,
			Type:     chainType(ch.nat),
			Hooknum:  hooks[ch.hook],
			Priority: nftables.ChainPriorityRef(nftables.ChainPriority(ch.priority)),
			Policy:   &accept,
		})
		for _, r := range ch.rules {
			c.AddRule(&nftables.Rule{
				Table:    table,
				Chain:    nc,
				Exprs:    r.exprs(t.agent),
				UserData: userdata.AppendString(nil, userdata.TypeComment, r.text(t.agent)),
			})
		}
	}
	return explain("install", v6, c.Flush())
}

// Remove deletes vminit's tables, ip and ip6, from the network namespace
// netnsFd (as Install's) and nothing else; a namespace without them is
// left as it is, and that is no error. A kernel without IPv6 nf_tables
// cannot hold an ip6 table, so there is none to remove there.
func Remove(netnsFd int) error {
	var errs []error
	for _, v6 := range []bool{false, true} {
		c, err := nftables.New(nftables.WithNetNSFd(netnsFd))
		if err != nil {
			return explain("remove", v6, err)
		}
		// Adding the table first makes the deletion succeed when there
		// was none (DESTROYTABLE, which does that alone, needs Linux 6.3).
		c.AddTable(ourTable(v6))
		c.DelTable(ourTable(v6))
		if err := c.Flush(); err != nil && !(v6 && errors.Is(err, unix.EAFNOSUPPORT)) {
			errs = append(errs, explain("remove", v6, err))
		}
	}
	return errors.Join(errs...)
}

// Check reports whether the network namespace netnsFd (as Install's)
// holds this table as Install writes it: its chains with their hooks and
// priorities, and their rules, which it knows by their comments. Every
// difference is listed.
func (t *Table) Check(netnsFd int) error {
	v6, name := t.IPv6(), t.Name()
	c, err := nftables.New(nftables.WithNetNSFd(netnsFd))
	if err != nil {
		return explain("check", v6, err)
	}
	table := ourTable(v6)
	tables, err := c.ListTablesOfFamily(table.Family)
	if err != nil {
		return explain("check", v6, err)
	}
	if !slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == TableName }) {
		return fmt.Errorf("vminit's table (%s) is not installed", name)
	}
	all, err := c.ListChainsOfTableFamily(table.Family)
	if err != nil {
		return explain("check", v6, err)
	}
	got := map[string]*nftables.Chain{}
	for _, ch := range all {
		if ch.Table.Name == TableName {
			got[ch.Name] = ch
		}
	}
	var errs []error
	for _, want := range t.chains {
		ch, ok := got[want.name]
		delete(got, want.name)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: chain %s is missing", name, want.name))
			continue
		}
		if ch.Type != chainType(want.nat) || ch.Hooknum == nil || *ch.Hooknum != *hooks[want.hook] ||
			ch.Priority == nil || int32(*ch.Priority) != want.priority {
			errs = append(errs, fmt.Errorf("%s: chain %s is not a %s chain on hook %s at priority %d", name, want.name, chainType(want.nat), want.hook, want.priority))
		}
		rules, err := c.GetRules(table, ch)
		if err != nil {
			return explain("check", v6, err)
		}
		var have, need []string
		for _, r := range rules {
			s, _ := userdata.GetString(r.UserData, userdata.TypeComment)
			have = append(have, s)
		}
		for _, r := range want.rules {
			need = append(need, r.text(t.agent))
		}
		if !slices.Equal(have, need) {
			errs = append(errs, fmt.Errorf("%s: chain %s holds %q, want %q", name, want.name, have, need))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		errs = append(errs, fmt.Errorf("%s: chain %s is not vminit's", t.Name(), name))
	}
	return errors.Join(errs...)
}

var accept = nftables.ChainPolicyAccept

var hooks = map[string]*nftables.ChainHook{
	"prerouting": nftables.ChainHookPrerouting,
	"forward":    nftables.ChainHookForward,
	"output":     nftables.ChainHookOutput,
}

func chainType(nat bool) nftables.ChainType {
	if nat {
		return nftables.ChainTypeNAT
	}
	return nftables.ChainTypeFilter
}

// exprs is the rule as the kernel runs it, in the family of agent;
// rule.text says the same in nft's syntax.
func (r rule) exprs(agent netip.AddrPort) []expr.Any {
	var x []expr.Any
	if r.iif != "" {
		// meta iifname: the kernel loads IFNAMSIZ bytes, NUL-padded; a
		// prefix compares its own bytes, a name its bytes and the NUL.
		name, prefix := strings.CutSuffix(r.iif, "*")
		data := []byte(name)
		if !prefix {
			data = append(data, 0)
		}
		x = append(x,
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data})
	}
	v6 := !agent.Addr().Is4()
	// ip daddr: bytes 16-19 of the IPv4 header; ip6 daddr: bytes 24-39
	// of the IPv6 header.
	daddr, family := uint32(16), uint32(unix.NFPROTO_IPV4)
	if v6 {
		daddr, family = 24, unix.NFPROTO_IPV6
	}
	meta := metadataAddr(v6).AsSlice()
	x = append(x,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: uint32(len(meta))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: meta})
	if !r.redirect {
		return append(x, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop})
	}
	return append(x,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		// tcp dport: bytes 2-3 of the TCP header.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, MetadataPort)},
		&expr.Counter{},
		&expr.Immediate{Register: 1, Data: agent.Addr().AsSlice()},
		&expr.Immediate{Register: 2, Data: binary.BigEndian.AppendUint16(nil, agent.Port())},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: family, RegAddrMin: 1, RegProtoMin: 2, Specified: true})
}

// explain names what a failure of op says is missing: the errors the
// kernel gives are bare errnos, and an operator reads "no such file or
// directory" as a path.
func explain(op string, v6 bool, err error) error {
	if err == nil {
		return nil
	}
	why := ""
	switch {
	case errors.Is(err, unix.EPERM):
		why = "changing nftables needs CAP_NET_ADMIN in the network namespace"
	case errors.Is(err, unix.EPROTONOSUPPORT):
		why = "the kernel has no nfnetlink (CONFIG_NETFILTER_NETLINK, module nfnetlink), so no nftables"
	case errors.Is(err, unix.EOPNOTSUPP):
		why = "the kernel has no nf_tables (CONFIG_NF_TABLES, module nf_tables)"
	case errors.Is(err, unix.EAFNOSUPPORT) && v6:
		why = "the kernel has no IPv6 nf_tables (CONFIG_NF_TABLES_IPV6)"
	case errors.Is(err, unix.EAFNOSUPPORT):
		why = "the kernel has no IPv4 nf_tables (CONFIG_NF_TABLES_IPV4)"
	case errors.Is(err, unix.ENOENT) && op == "install":
		why = "the kernel lacks a part of nf_tables the table uses: " +
			"the nat chain type or the nat expression (CONFIG_NFT_NAT; modules nft_chain_nat, nft_nat)"
	}
	table := familyName(v6) + " " + TableName
	if why == "" {
		return fmt.Errorf("%s vminit's nftables table (%s): %w", op, table, err)
	}
	return fmt.Errorf("%s vminit's nftables table (%s): %s: %w", op, table, why, err)
}
