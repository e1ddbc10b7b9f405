package intercept

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/vminit/vminit/internal/testing/netsim"
)

// others writes tables that are not vminit's into the namespace: ip and
// ip6 filter tables with a rule, and a table named vminit in the inet
// family. Remove must leave every one as it is.
func others(t *testing.T, n *netsim.NS) {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(n.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		filter := c.AddTable(&nftables.Table{Name: "filter", Family: f})
		fwd := c.AddChain(&nftables.Chain{Name: "FORWARD", Table: filter, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
		c.AddRule(&nftables.Rule{Table: filter, Chain: fwd, Exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept}}})
	}
	tb := c.AddTable(&nftables.Table{Name: TableName, Family: nftables.TableFamilyINet})
	c.AddChain(&nftables.Chain{Name: "keep", Table: tb})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestInstallRemove: Install twice leaves one table, the one Check
// knows; another configuration replaces it whole; an IPv6 agent's table
// (ip6 vminit) goes beside it, each Check knowing its own; Remove deletes
// exactly those two, leaving the other tables (of other names, or named
// vminit in the inet family) as they were; a second Remove, and a Remove
// where nothing was installed, succeed.
func TestInstallRemove(t *testing.T) {
	n := netsim.NewNS(t, "intercept")
	others(t, n)
	before := netsim.Ruleset(t, n)

	host, err := Host(agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Check(n.Fd()); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("Check before Install: %v", err)
	}
	if err := host.Install(n.Fd()); err != nil {
		t.Fatal(err)
	}
	once := netsim.Ruleset(t, n)
	if err := host.Install(n.Fd()); err != nil {
		t.Fatal(err)
	}
	twice := netsim.Ruleset(t, n)
	if strip(once) != strip(twice) {
		t.Errorf("a second Install changed the ruleset:\n%s\nthen\n%s", once, twice)
	}
	if got := strings.Count(twice, "dnat to"); got != len(DefaultPodInterfaces) {
		t.Errorf("%d redirect rules after two installs, want %d:\n%s", got, len(DefaultPodInterfaces), twice)
	}
	if err := host.Check(n.Fd()); err != nil {
		t.Errorf("Check after Install: %v", err)
	}

	// Another agent and interface list: the table is replaced, and the
	// first configuration's Check sees the difference.
	other, err := Host(netip.MustParseAddrPort("172.31.0.11:80"), []string{"cali*"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Install(n.Fd()); err != nil {
		t.Fatal(err)
	}
	if err := other.Check(n.Fd()); err != nil {
		t.Errorf("Check of the replacement: %v", err)
	}
	if err := host.Check(n.Fd()); err == nil || !strings.Contains(err.Error(), "chain redirect holds") {
		t.Errorf("Check of the replaced configuration: %v", err)
	}
	pod, err := Pod(agent)
	if err != nil {
		t.Fatal(err)
	}
	if err := pod.Check(n.Fd()); err == nil || !strings.Contains(err.Error(), "chain redirect-local is missing") {
		t.Errorf("Check of the pod table against a host one: %v", err)
	}
	host6, err := Host(agent6, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := host6.Check(n.Fd()); err == nil || !strings.Contains(err.Error(), "(ip6 vminit) is not installed") {
		t.Errorf("Check of ip6 before its Install: %v", err)
	}
	if err := host6.Install(n.Fd()); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []*Table{other, host6} {
		if err := tb.Check(n.Fd()); err != nil {
			t.Errorf("Check of %s beside the other family's: %v", tb.Name(), err)
		}
	}
	if rs := netsim.Ruleset(t, n); !strings.Contains(rs, fmt.Sprintf("table %d vminit", nftables.TableFamilyIPv6)) ||
		!strings.Contains(rs, fmt.Sprintf("table %d vminit", nftables.TableFamilyIPv4)) {
		t.Errorf("both families' tables are not there:\n%s", rs)
	}

	if err := Remove(n.Fd()); err != nil {
		t.Fatal(err)
	}
	if after := netsim.Ruleset(t, n); after != before {
		t.Errorf("Remove did not restore the ruleset:\nbefore\n%s\nafter\n%s", before, after)
	}
	if err := Remove(n.Fd()); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
	if err := Remove(netsim.NewNS(t, "empty").Fd()); err != nil {
		t.Errorf("Remove where nothing was installed: %v", err)
	}
}

// strip drops rule handles, which a replacement renews.
func strip(ruleset string) string {
	var out []string
	for _, l := range strings.Split(ruleset, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "rule" {
			l = strings.Join(f[2:], " ")
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// TestPodInstall: the pod table goes into a namespace beside KubeVirt's
// nat table and comes out leaving it as it was.
func TestPodInstall(t *testing.T) {
	n := netsim.NewNS(t, "intercept")
	others(t, n)
	before := netsim.Ruleset(t, n)
	pod, err := Pod(agent)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := pod.Install(n.Fd()); err != nil {
			t.Fatal(err)
		}
	}
	if err := pod.Check(n.Fd()); err != nil {
		t.Error(err)
	}
	if err := Remove(n.Fd()); err != nil {
		t.Fatal(err)
	}
	if after := netsim.Ruleset(t, n); after != before {
		t.Errorf("Remove did not restore the ruleset:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// TestExplain: the kernel's bare errnos become what is missing.
func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		op   string
		err  error
		want string
	}{
		{"install", syscall.EPERM, "needs CAP_NET_ADMIN"},
		{"install", syscall.EPROTONOSUPPORT, "no nfnetlink (CONFIG_NETFILTER_NETLINK"},
		{"remove", fmt.Errorf("conn.Receive: %w", errors.Join(syscall.EOPNOTSUPP)), "no nf_tables (CONFIG_NF_TABLES"},
		{"install", syscall.EAFNOSUPPORT, "no IPv4 nf_tables (CONFIG_NF_TABLES_IPV4)"},
		{"install6", syscall.EAFNOSUPPORT, "install vminit's nftables table (ip6 vminit): the kernel has no IPv6 nf_tables (CONFIG_NF_TABLES_IPV6)"},
		{"install", syscall.ENOENT, "nat chain type or the nat expression (CONFIG_NFT_NAT"},
		{"remove", syscall.ENOENT, "remove vminit's nftables table (ip vminit): no such file or directory"},
	} {
		op, v6 := strings.CutSuffix(tc.op, "6")
		err := explain(op, v6, tc.err)
		if !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.err) && !errors.Is(err, errors.Unwrap(tc.err)) {
			t.Errorf("explain(%s, %v) = %v, want %q", tc.op, tc.err, err, tc.want)
		}
	}
}
