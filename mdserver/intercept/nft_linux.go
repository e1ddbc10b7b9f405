package intercept

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// The table every function here works on: only this one.
var ourTable = &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}

// Install writes the table into the network namespace netnsFd (an open
// file of it: /proc/PID/ns/net, /run/netns/NAME, or the Fd of
// containernetworking's ns.NetNS; 0 is the caller's own), replacing a
// table of the same name that is there: one netlink batch, so the
// kernel applies the whole replacement or none of it, and a second
// Install leaves one table, never two sets of rules.
func (t *Table) Install(netnsFd int) error {
	c, err := nftables.New(nftables.WithNetNSFd(netnsFd))
	if err != nil {
		return explain("install", err)
	}
	// NEWTABLE without NLM_F_EXCL does not fail on an existing table, and
	// the DELTABLE after it then always has one to delete.
	c.AddTable(ourTable)
	c.DelTable(ourTable)
	c.AddTable(ourTable)
	for _, ch := range t.chains {
		nc := c.AddChain(&nftables.Chain{
			Name:     ch.name,
			Table:    ourTable,
			Type:     chainType(ch.nat),
			Hooknum:  hooks[ch.hook],
			Priority: nftables.ChainPriorityRef(nftables.ChainPriority(ch.priority)),
			Policy:   &accept,
		})
		for _, r := range ch.rules {
			c.AddRule(&nftables.Rule{
				Table:    ourTable,
				Chain:    nc,
				Exprs:    r.exprs(t.agent.Addr().As4(), t.agent.Port()),
				UserData: userdata.AppendString(nil, userdata.TypeComment, r.text(t.agent)),
			})
		}
	}
	return explain("install", c.Flush())
}

// Remove deletes vminit's table from the network namespace netnsFd (as
// Install's) and nothing else; a namespace without it is left as it is,
// and that is no error.
func Remove(netnsFd int) error {
	c, err := nftables.New(nftables.WithNetNSFd(netnsFd))
	if err != nil {
		return explain("remove", err)
	}
	// Adding the table first makes the deletion succeed when there was
	// none (DESTROYTABLE, which does that alone, needs Linux 6.3).
	c.AddTable(ourTable)
	c.DelTable(ourTable)
	return explain("remove", c.Flush())
}

// Check reports whether the network namespace netnsFd (as Install's)
// holds this table as Install writes it: its chains with their hooks and
// priorities, and their rules, which it knows by their comments. Every
// difference is listed.
func (t *Table) Check(netnsFd int) error {
	c, err := nftables.New(nftables.WithNetNSFd(netnsFd))
	if err != nil {
		return explain("check", err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return explain("check", err)
	}
	if !slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == TableName }) {
		return fmt.Errorf("vminit's table (ip %s) is not installed", TableName)
	}
	all, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return explain("check", err)
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
			errs = append(errs, fmt.Errorf("ip %s: chain %s is missing", TableName, want.name))
			continue
		}
		if ch.Type != chainType(want.nat) || ch.Hooknum == nil || *ch.Hooknum != *hooks[want.hook] ||
			ch.Priority == nil || int32(*ch.Priority) != want.priority {
			errs = append(errs, fmt.Errorf("ip %s: chain %s is not a %s chain on hook %s at priority %d", TableName, want.name, chainType(want.nat), want.hook, want.priority))
		}
		rules, err := c.GetRules(ourTable, ch)
		if err != nil {
			return explain("check", err)
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
			errs = append(errs, fmt.Errorf("ip %s: chain %s holds %q, want %q", TableName, want.name, have, need))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		errs = append(errs, fmt.Errorf("ip %s: chain %s is not vminit's", TableName, name))
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

// exprs is the rule as the kernel runs it; rule.text says the same in
// nft's syntax.
func (r rule) exprs(agent [4]byte, port uint16) []expr.Any {
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
	meta := MetadataAddr.As4()
	x = append(x,
		// ip daddr: bytes 16-19 of the IPv4 header.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: meta[:]})
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
		&expr.Immediate{Register: 1, Data: agent[:]},
		&expr.Immediate{Register: 2, Data: binary.BigEndian.AppendUint16(nil, port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true})
}

// explain names what a failure of op says is missing: the errors the
// kernel gives are bare errnos, and an operator reads "no such file or
// directory" as a path.
func explain(op string, err error) error {
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
	case errors.Is(err, unix.EAFNOSUPPORT):
		why = "the kernel has no IPv4 nf_tables (CONFIG_NF_TABLES_IPV4)"
	case errors.Is(err, unix.ENOENT) && op == "install":
		why = "the kernel lacks a part of nf_tables the table uses: " +
			"the nat chain type or the nat expression (CONFIG_NFT_NAT; modules nft_chain_nat, nft_nat)"
	}
	if why == "" {
		return fmt.Errorf("%s vminit's nftables table (ip %s): %w", op, TableName, err)
	}
	return fmt.Errorf("%s vminit's nftables table (ip %s): %s: %w", op, TableName, why, err)
}
