package intercept

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// TableName is the name of vminit's tables, one in the ip (IPv4) family
// and one in the ip6 (IPv6) family: the only tables this package writes
// or deletes.
const TableName = "vminit"

// MetadataPort is the port guests ask the metadata service on.
const MetadataPort = 80

// MetadataAddr is the link-local address guests ask (EC2, OpenStack,
// Ignition's aws and openstack platforms).
var MetadataAddr = netip.AddrFrom4([4]byte{169, 254, 169, 254})

// MetadataAddr6 is EC2's IPv6 metadata address, which cloud-init's Ec2
// datasource asks beside 169.254.169.254 (its metadata_urls) and Nitro
// instances answer on when their IPv6 endpoint is on.
var MetadataAddr6 = netip.MustParseAddr("fd00:ec2::254")

// DefaultPodInterfaces are the names (a trailing '*' makes a prefix) of
// the node-side interfaces pod traffic arrives on with the common CNIs,
// which Host matches when it is given none:
//
//   - "veth*": the node's end of a pod's veth pair, as the reference ptp
//     and bridge plugins and kindnet name it;
//   - "cni*": the bridge the reference bridge plugin and Flannel put the
//     veths on (cni0); bridged traffic reaches the node's IP layer on
//     the bridge, not on the veth;
//   - "cbr0": kubenet's bridge;
//   - "cali*": Calico's veths (Canal's too);
//   - "lxc*": Cilium's veths (Cilium with eBPF host routing bypasses the
//     node's netfilter: use the pod data path there);
//   - "weave": Weave Net's bridge;
//   - "kube-bridge": kube-router's bridge;
//   - "antrea-gw0": Antrea's gateway, where pod traffic leaves OVS for the
//     node.
//
// Only "veth*" and "cni*" are exercised by this repository's tests
// (internal/testing/netsim); the others are read from each CNI's
// documentation.
var DefaultPodInterfaces = []string{"veth*", "cni*", "cbr0", "cali*", "lxc*", "weave", "kube-bridge", "antrea-gw0"}

// MaxInterfaces bounds Host's interface list: one rule per entry per
// chain, and a node has few CNIs.
const MaxInterfaces = 64

// Priorities of the table's chains. The redirect runs before the
// dstnat chains of kube-proxy, the CNI and KubeVirt (-100): the first
// nat chain that binds a connection wins, so a later one cannot send the
// request elsewhere.
const (
	natPriority    = -110
	filterPriority = 0
)

// Table is vminit's table for one data path and one address family,
// checked and ready to install: made by Host or Pod. Its family is its
// agent's: an IPv4 agent makes "ip vminit", matching MetadataAddr; an
// IPv6 agent "ip6 vminit", matching MetadataAddr6. A dual-stack node has
// one of each (a DNAT cannot change a packet's family).
type Table struct {
	agent  netip.AddrPort
	chains []chain
}

// chain is one base chain of the table.
type chain struct {
	name     string
	nat      bool // type nat; else type filter
	hook     string
	priority int32
	rules    []rule
}

// rule is one rule: from iif (a name, a prefix ending in '*', or "" for
// any interface), either the redirect of TCP to MetadataAddr:MetadataPort
// to the agent, or the drop of anything else to MetadataAddr.
type rule struct {
	iif      string
	redirect bool
}

// Host is the table of the host data path, for the node's network
// namespace: TCP to 169.254.169.254:80 (fd00:ec2::254 port 80 for an
// IPv6 agent) arriving on one of interfaces
// (names, or prefixes ending in '*'; DefaultPodInterfaces when empty) is
// redirected to agent, its source address kept (DNAT, no masquerade), and
// anything else arriving on them for 169.254.169.254 that would be
// forwarded is dropped.
func Host(agent netip.AddrPort, interfaces []string) (*Table, error) {
	if len(interfaces) == 0 {
		interfaces = DefaultPodInterfaces
	}
	errs := []error{checkAgent(agent)}
	errs = append(errs, checkInterfaces(interfaces)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var redirect, drop []rule
	for _, name := range interfaces {
		redirect = append(redirect, rule{iif: name, redirect: true})
		drop = append(drop, rule{iif: name})
	}
	return &Table{agent: agent, chains: []chain{
		{name: "redirect", nat: true, hook: "prerouting", priority: natPriority, rules: redirect},
		{name: "drop", hook: "forward", priority: filterPriority, rules: drop},
	}}, nil
}

// Pod is the table of the pod data path, for a virt-launcher pod's
// network namespace: TCP to 169.254.169.254:80 (fd00:ec2::254 port 80
// for an IPv6 agent) is redirected to agent
// whether it arrives from the VM (prerouting: KubeVirt's masquerade
// binding, where the guest's packets come in on the pod's bridge and
// KubeVirt's postrouting masquerade then makes their source the pod IP)
// or leaves from the pod itself (output: KubeVirt's passt binding, whose
// proxy in the pod opens the guest's connections as its own). Anything
// else for 169.254.169.254, forwarded or sent, is dropped.
func Pod(agent netip.AddrPort) (*Table, error) {
	if err := checkAgent(agent); err != nil {
		return nil, err
	}
	redirect, drop := []rule{{redirect: true}}, []rule{{}}
	return &Table{agent: agent, chains: []chain{
		{name: "redirect", nat: true, hook: "prerouting", priority: natPriority, rules: redirect},
		{name: "redirect-local", nat: true, hook: "output", priority: natPriority, rules: redirect},
		{name: "drop", hook: "forward", priority: filterPriority, rules: drop},
		{name: "drop-local", hook: "output", priority: filterPriority, rules: drop},
	}}, nil
}

// Agent is the address requests are redirected to.
func (t *Table) Agent() netip.AddrPort { return t.agent }

// IPv6 says the table is the ip6 family's.
func (t *Table) IPv6() bool { return !t.agent.Addr().Is4() }

// Name is the table as nft names it: "ip vminit" or "ip6 vminit".
func (t *Table) Name() string { return familyName(t.IPv6()) + " " + TableName }

// metadataAddr is the metadata address of a family.
func metadataAddr(v6 bool) netip.Addr {
	if v6 {
		return MetadataAddr6
	}
	return MetadataAddr
}

func familyName(v6 bool) string {
	if v6 {
		return "ip6"
	}
	return "ip"
}

// checkAgent refuses an address the redirect cannot reach or that would
// redirect to itself.
func checkAgent(a netip.AddrPort) error {
	ip := a.Addr()
	switch {
	case !a.IsValid():
		return errors.New("agent: no address")
	case ip.Is4In6():
		return fmt.Errorf("agent: %s is an IPv4-mapped IPv6 address: give the IPv4 address, or the node's IPv6 one", a)
	case ip.Zone() != "" || ip.Is6() && ip.IsLinkLocalUnicast():
		// A DNAT target has no zone, and a pod's packet cannot be
		// routed to the node's link-local address.
		return fmt.Errorf("agent: %s is a link-local IPv6 address: give the node's global or unique local IPv6 address", a)
	case a.Port() == 0:
		return fmt.Errorf("agent: %s has no port", a)
	case ip.IsLoopback():
		// The kernel drops a packet from another interface that is
		// DNATed to 127.0.0.0/8 as a martian (unless route_localnet).
		return fmt.Errorf("agent: %s is a loopback address, which a pod's packet cannot be redirected to: give the node's address", a)
	case ip.IsUnspecified(), ip.IsMulticast(), ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("agent: %s is not a unicast address", a)
	case ip == MetadataAddr || ip == MetadataAddr6:
		return fmt.Errorf("agent: %s is the metadata address itself: give the node agent's own address", a)
	}
	return nil
}

// ifNameMax is the longest interface name Linux takes (IFNAMSIZ - 1).
const ifNameMax = 15

// checkInterfaces lists every problem of an interface list, each naming
// its entry.
func checkInterfaces(names []string) []error {
	var errs []error
	if len(names) > MaxInterfaces {
		errs = append(errs, fmt.Errorf("interfaces: %d entries, at most %d", len(names), MaxInterfaces))
	}
	seen := map[string]int{}
	for i, n := range names {
		field := fmt.Sprintf("interfaces[%d]", i)
		name, prefix := strings.CutSuffix(n, "*")
		switch {
		case name == "" && prefix:
			errs = append(errs, fmt.Errorf("%s: %q matches every interface, the node's own uplink too: name the pods' interfaces", field, n))
		case name == "":
			errs = append(errs, fmt.Errorf("%s: empty", field))
		case len(name) > ifNameMax:
			errs = append(errs, fmt.Errorf("%s: %q is longer than an interface name (%d bytes)", field, n, ifNameMax))
		case name == "." || name == ".." || strings.ContainsAny(name, "/:*\x00") || strings.IndexFunc(name, isSpace) >= 0:
			errs = append(errs, fmt.Errorf("%s: %q is not an interface name (a trailing '*' makes a prefix)", field, n))
		}
		if j, ok := seen[n]; ok {
			errs = append(errs, fmt.Errorf("%s: %q repeats interfaces[%d]", field, n, j))
		} else {
			seen[n] = i
		}
	}
	return errs
}

// isSpace is what Linux's dev_valid_name refuses (isspace).
func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r'
}

// text is the rule in nft's syntax: its comment in the kernel, and a line
// of Table.String.
func (r rule) text(agent netip.AddrPort) string {
	var b strings.Builder
	if r.iif != "" {
		fmt.Fprintf(&b, "iifname %q ", r.iif)
	}
	v6 := !agent.Addr().Is4()
	fmt.Fprintf(&b, "%s daddr %s ", familyName(v6), metadataAddr(v6))
	if r.redirect {
		fmt.Fprintf(&b, "tcp dport %d counter dnat to %s", MetadataPort, agent)
	} else {
		b.WriteString("counter drop")
	}
	return b.String()
}

// String is the table in nft's syntax, as `nft list table ip vminit`
// (or ip6) shows it (less counters and comments): for logs and docs.
func (t *Table) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s {\n", t.Name())
	for i, c := range t.chains {
		if i > 0 {
			b.WriteString("\n")
		}
		kind := "filter"
		if c.nat {
			kind = "nat"
		}
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype %s hook %s priority %d; policy accept;\n", c.name, kind, c.hook, c.priority)
		for _, r := range c.rules {
			fmt.Fprintf(&b, "\t\t%s\n", r.text(t.agent))
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}
