package netsim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// Ruleset is the namespace's whole nftables ruleset as text, every
// table, chain and rule (with its handle, so a rule deleted and added
// again shows), in a fixed order; counters show without their values,
// which traffic moves. Two calls give the same text for the same
// ruleset: what tests compare before an install and after its removal.
func Ruleset(t testing.TB, n *NS) string {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(n.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTables()
	if err != nil {
		t.Fatalf("%s: list tables: %v", n.Name, err)
	}
	chains, err := c.ListChains()
	if err != nil {
		t.Fatalf("%s: list chains: %v", n.Name, err)
	}
	slices.SortFunc(tables, func(a, b *nftables.Table) int {
		return cmp.Or(cmp.Compare(a.Family, b.Family), strings.Compare(a.Name, b.Name))
	})
	slices.SortFunc(chains, func(a, b *nftables.Chain) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	for _, tb := range tables {
		fmt.Fprintf(&b, "table %d %s\n", tb.Family, tb.Name)
		for _, ch := range chains {
			if ch.Table.Name != tb.Name || ch.Table.Family != tb.Family {
				continue
			}
			fmt.Fprintf(&b, "  chain %s type=%q", ch.Name, ch.Type)
			if ch.Hooknum != nil {
				fmt.Fprintf(&b, " hook=%d", *ch.Hooknum)
			}
			if ch.Priority != nil {
				fmt.Fprintf(&b, " priority=%d", *ch.Priority)
			}
			if ch.Policy != nil {
				fmt.Fprintf(&b, " policy=%d", *ch.Policy)
			}
			b.WriteString("\n")
			rules, err := c.GetRules(tb, ch)
			if err != nil {
				t.Fatalf("%s: rules of %s %s: %v", n.Name, tb.Name, ch.Name, err)
			}
			for _, r := range rules {
				fmt.Fprintf(&b, "    rule %d %q:", r.Handle, r.UserData)
				for _, x := range r.Exprs {
					if _, ok := x.(*expr.Counter); ok {
						b.WriteString(" counter")
						continue
					}
					fmt.Fprintf(&b, " %T%+v", x, x)
				}
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// Counters sums the packets the counters of table (families ip and ip6,
// added together) have counted, by chain: how a test sees which rules a packet met.
func Counters(t testing.TB, n *NS, table string) map[string]uint64 {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(n.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	var chains []*nftables.Chain
	for _, f := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		of, err := c.ListChainsOfTableFamily(f)
		if err != nil {
			t.Fatalf("%s: list chains: %v", n.Name, err)
		}
		chains = append(chains, of...)
	}
	sums := map[string]uint64{}
	for _, ch := range chains {
		if ch.Table.Name != table {
			continue
		}
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			t.Fatalf("%s: rules of %s %s: %v", n.Name, table, ch.Name, err)
		}
		for _, r := range rules {
			for _, x := range r.Exprs {
				if k, ok := x.(*expr.Counter); ok {
					sums[ch.Name] += k.Packets
				}
			}
		}
	}
	return sums
}
