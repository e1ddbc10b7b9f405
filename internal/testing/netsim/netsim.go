// Package netsim builds, in network namespaces, the data path between a
// KubeVirt guest and its node, for tests of how a guest reaches vminit
// (mdserver/intercept, cmd/internal/cniplugin). KubeVirt cannot run on
// the machines the tests run on, so this is a simulation, made as a
// cluster makes it:
//
//   - a node namespace, whose default routes lead to a "cloud" namespace
//     that holds 169.254.169.254 and fd00:ec2::254, where a test's stub of
//     the cloud's own metadata service listens (and must never be
//     reached);
//   - virt-launcher pods joined to the node by veth pairs, as a veth CNI
//     does: routed (the node's end carries the pod's gateway, as the ptp
//     plugin and kindnet do) or bridged (the node's end on the bridge
//     cni0, as the bridge plugin and Flannel do); pod IPs 10.244.N.2 and
//     fd00:244:N::2 (a dual-stack cluster);
//   - inside each pod, the guest: a namespace of its own at 10.0.2.2 and
//     fd10:0:2::2 behind the pod's bridge k6t-eth0 (10.0.2.1,
//     fd10:0:2::1: KubeVirt's defaults), joined by a veth named tap0 as
//     KubeVirt's tap is, with KubeVirt's masquerade rules for both
//     families in the pod (masquerade.go), which make the guest's packets
//     leave the pod as the pod's IPs.
//
// The namespaces are named vminit-PID-N-ROLE, so runs do not collide,
// and deleted in t.Cleanup, failed test or not. Links and addresses are
// made with ip(8) (the test is skipped without it, or without root);
// nftables rules through netlink, as KubeVirt and vminit write them.
package netsim

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// Require stops the test (a skip, or a failure under
// VMINIT_REQUIRE_TOOLS=1) where namespaces cannot be made: without root
// or without ip(8).
func Require(t testing.TB) {
	t.Helper()
	testtools.Require(t, "ip")
	if os.Geteuid() != 0 {
		testtools.Missing(t, "network namespaces need root")
	}
}

var seq atomic.Int64

// NS is a named network namespace (/run/netns/NAME).
type NS struct {
	Name string
	h    ns.NetNS
}

// NewNS makes an empty network namespace with its loopback up, deleted
// when the test ends.
func NewNS(t testing.TB, role string) *NS {
	t.Helper()
	Require(t)
	name := fmt.Sprintf("vminit-%d-%d-%s", os.Getpid(), seq.Add(1), role)
	run(t, "ip", "netns", "add", name)
	n := &NS{Name: name}
	t.Cleanup(func() {
		if n.h != nil {
			n.h.Close()
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v %s", name, err, out)
		}
	})
	h, err := ns.GetNS(n.Path())
	if err != nil {
		t.Fatal(err)
	}
	n.h = h
	// No duplicate address detection on IPv6 addresses, link-local ones
	// included (every interface made here inherits it): an address is
	// usable at once, not after DAD's second, in which a first
	// connection would time out.
	n.Sysctl(t, "net.ipv6.conf.default.accept_dad", "0")
	n.Sysctl(t, "net.ipv6.conf.all.accept_dad", "0")
	n.IP(t, "link", "set", "lo", "up")
	return n
}

// Path is the namespace's file, what a runtime passes a CNI plugin as
// CNI_NETNS.
func (n *NS) Path() string { return "/run/netns/" + n.Name }

// Fd is an open file of the namespace, for nftables' netlink.
func (n *NS) Fd() int { return int(n.h.Fd()) }

// IP runs ip(8) in the namespace.
func (n *NS) IP(t testing.TB, args ...string) {
	t.Helper()
	run(t, "ip", append([]string{"-n", n.Name}, args...)...)
}

// Do runs f on a thread in the namespace: sockets it opens stay there.
func (n *NS) Do(f func() error) error {
	return n.h.Do(func(ns.NetNS) error { return f() })
}

// Sysctl writes a /proc/sys/net value of the namespace (the file is the
// opening thread's namespace's).
func (n *NS) Sysctl(t testing.TB, key, value string) {
	t.Helper()
	if err := n.Do(func() error {
		return os.WriteFile("/proc/sys/"+strings.ReplaceAll(key, ".", "/"), []byte(value), 0o644)
	}); err != nil {
		t.Fatalf("%s: sysctl %s=%s: %v", n.Name, key, value, err)
	}
}

// Listen listens on the TCP address addr inside the namespace (the
// socket belongs to it; accepting from any goroutine is then fine).
func (n *NS) Listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	if err := n.Do(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("%s: listen %s: %v", n.Name, addr, err)
	}
	return l
}

// Serve answers HTTP with h on addr in the namespace until the test ends.
func (n *NS) Serve(t testing.TB, addr string, h http.Handler) {
	t.Helper()
	l := n.Listen(t, addr)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// Client is an HTTP client whose connections are opened from the
// namespace: a second to connect (a dropped SYN is a timeout), five for
// the answer, no connection kept.
func (n *NS) Client() *http.Client { return n.ClientConnecting(time.Second) }

// ClientConnecting is Client with connect as the time to connect. A
// request that must get through takes more than Client's second: on a
// loaded machine the first packet of a fresh veth or bridge can wait that
// long for its neighbour to be resolved.
func (n *NS) ClientConnecting(connect time.Duration) *http.Client {
	d := &net.Dialer{Timeout: connect}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			Proxy:             nil,
			DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
				err = n.Do(func() error {
					c, err = d.DialContext(ctx, network, addr)
					return err
				})
				return c, err
			},
		},
	}
}

// settle waits until no IPv6 address of the namespaces is tentative.
// Without DAD an address still starts tentative, for as long as the
// kernel's work queue takes to pass it (no time at all, mostly): a bind
// to it or a connection from it meanwhile fails.
func settle(t testing.TB, namespaces ...*NS) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range namespaces {
		for {
			out, err := exec.Command("ip", "-n", n.Name, "-6", "addr", "show", "tentative").CombinedOutput()
			if err != nil {
				t.Fatalf("%s: ip -6 addr show tentative: %v\n%s", n.Name, err, out)
			}
			if len(bytes.TrimSpace(out)) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: IPv6 addresses still tentative:\n%s", n.Name, out)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// Addresses of the simulation.
var (
	// MetadataAddr is the link-local metadata address, and MetadataAddr6
	// EC2's IPv6 one.
	MetadataAddr  = netip.MustParseAddr("169.254.169.254")
	MetadataAddr6 = netip.MustParseAddr("fd00:ec2::254")
	// NodeAddr and NodeAddr6 are the node's addresses on its uplink to the
	// cloud: where a node agent on the host network listens.
	NodeAddr  = netip.MustParseAddr("172.31.0.10")
	NodeAddr6 = netip.MustParseAddr("fd00:31::10")
	// CloudAddr and CloudAddr6 are the node's default gateways, in the
	// cloud namespace.
	CloudAddr  = netip.MustParseAddr("172.31.0.1")
	CloudAddr6 = netip.MustParseAddr("fd00:31::1")
	// GuestAddr and GatewayAddr are KubeVirt's masquerade defaults: the
	// guest's address and its gateway, the pod's bridge; GuestAddr6 and
	// GatewayAddr6 the same in its IPv6 default, fd10:0:2::/120.
	GuestAddr    = netip.MustParseAddr("10.0.2.2")
	GatewayAddr  = netip.MustParseAddr("10.0.2.1")
	GuestAddr6   = netip.MustParseAddr("fd10:0:2::2")
	GatewayAddr6 = netip.MustParseAddr("fd10:0:2::1")
)

// Node is a simulated Kubernetes node: its namespace, the cloud beyond
// its default route, and its virt-launcher pods.
type Node struct {
	NS    *NS
	Cloud *NS
	Pods  []*Pod

	bridge bool // cni0 is made
}

// Pod is a simulated virt-launcher pod with its guest.
type Pod struct {
	Name    string     // the pod's name, virt-launcher-…
	NS      *NS        // the pod's namespace
	IP      netip.Addr // the pod IP, 10.244.N.2
	IP6     netip.Addr // the pod's IPv6, fd00:244:N::2
	Guest   *NS        // the VM's namespace, 10.0.2.2 and fd10:0:2::2
	HostEnd string     // the node's end of the pod's veth pair
	Bridged bool       // the node's end is on the bridge cni0
}

// NewNode makes the node and the cloud namespaces, the link between
// them, and 169.254.169.254 in the cloud: the node forwards, and routes
// everything it has no route for to the cloud.
func NewNode(t testing.TB) *Node {
	t.Helper()
	node := &Node{NS: NewNS(t, "node"), Cloud: NewNS(t, "cloud")}
	node.NS.IP(t, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", node.Cloud.Name)
	node.NS.IP(t, "addr", "add", NodeAddr.String()+"/24", "dev", "eth0")
	node.NS.IP(t, "link", "set", "eth0", "up")
	node.NS.IP(t, "route", "add", "default", "via", CloudAddr.String())
	node.NS.Sysctl(t, "net.ipv4.ip_forward", "1")
	node.NS.Sysctl(t, "net.ipv6.conf.all.forwarding", "1")
	node.Cloud.IP(t, "addr", "add", CloudAddr.String()+"/24", "dev", "eth0")
	node.Cloud.IP(t, "link", "set", "eth0", "up")
	node.Cloud.IP(t, "addr", "add", MetadataAddr.String()+"/32", "dev", "lo")
	node.NS.IP(t, "-6", "addr", "add", NodeAddr6.String()+"/64", "dev", "eth0")
	node.NS.IP(t, "-6", "route", "add", "default", "via", CloudAddr6.String())
	node.Cloud.IP(t, "-6", "addr", "add", CloudAddr6.String()+"/64", "dev", "eth0")
	node.Cloud.IP(t, "-6", "addr", "add", MetadataAddr6.String()+"/128", "dev", "lo")
	// The cloud answers the pods as a VPC does: it knows the pod ranges
	// are behind the node.
	node.Cloud.IP(t, "route", "add", "10.244.0.0/16", "via", NodeAddr.String())
	node.Cloud.IP(t, "-6", "route", "add", "fd00:244::/32", "via", NodeAddr6.String())
	settle(t, node.NS, node.Cloud)
	return node
}

// AddPod makes a virt-launcher pod named name (its guest and KubeVirt's
// masquerade in it) and joins it to the node: bridged, the node's end of
// its veth is a port of the bridge cni0; else it carries the pod's
// gateway itself.
func (node *Node) AddPod(t testing.TB, name string, bridged bool) *Pod {
	t.Helper()
	i := len(node.Pods) + 1
	if i > 200 {
		t.Fatal("netsim: at most 200 pods a node")
	}
	p := &Pod{Name: name, NS: NewNS(t, fmt.Sprintf("pod%d", i)), IP: netip.AddrFrom4([4]byte{10, 244, byte(i), 2}),
		IP6: netip.MustParseAddr(fmt.Sprintf("fd00:244:%x::2", i)), Bridged: bridged}
	gw, gw6 := fmt.Sprintf("10.244.%d.1", i), fmt.Sprintf("fd00:244:%x::1", i)
	p.HostEnd = fmt.Sprintf("veth%d", i)
	node.NS.IP(t, "link", "add", p.HostEnd, "type", "veth", "peer", "name", "eth0", "netns", p.NS.Name)
	if bridged {
		if node.bridge {
			t.Fatal("netsim: one bridged pod a node (cni0 holds one pod subnet here)")
		}
		node.bridge = true
		node.NS.IP(t, "link", "add", "cni0", "type", "bridge")
		node.NS.IP(t, "addr", "add", gw+"/24", "dev", "cni0")
		node.NS.IP(t, "-6", "addr", "add", gw6+"/64", "dev", "cni0")
		node.NS.IP(t, "link", "set", "cni0", "up")
		node.NS.IP(t, "link", "set", p.HostEnd, "master", "cni0")
	} else {
		node.NS.IP(t, "addr", "add", gw+"/24", "dev", p.HostEnd)
		node.NS.IP(t, "-6", "addr", "add", gw6+"/64", "dev", p.HostEnd)
	}
	node.NS.IP(t, "link", "set", p.HostEnd, "up")
	p.NS.IP(t, "addr", "add", p.IP.String()+"/24", "dev", "eth0")
	p.NS.IP(t, "-6", "addr", "add", p.IP6.String()+"/64", "dev", "eth0")
	p.NS.IP(t, "link", "set", "eth0", "up")
	p.NS.IP(t, "route", "add", "default", "via", gw)
	p.NS.IP(t, "-6", "route", "add", "default", "via", gw6)
	p.NS.Sysctl(t, "net.ipv4.ip_forward", "1")
	p.NS.Sysctl(t, "net.ipv6.conf.all.forwarding", "1")

	// The guest behind the pod's bridge, as virt-launcher plugs a VM's
	// tap into k6t-eth0.
	p.Guest = NewNS(t, fmt.Sprintf("guest%d", i))
	p.NS.IP(t, "link", "add", "k6t-eth0", "type", "bridge")
	p.NS.IP(t, "addr", "add", GatewayAddr.String()+"/24", "dev", "k6t-eth0")
	p.NS.IP(t, "-6", "addr", "add", GatewayAddr6.String()+"/120", "dev", "k6t-eth0")
	p.NS.IP(t, "link", "set", "k6t-eth0", "up")
	p.NS.IP(t, "link", "add", "tap0", "type", "veth", "peer", "name", "eth0", "netns", p.Guest.Name)
	p.NS.IP(t, "link", "set", "tap0", "master", "k6t-eth0")
	p.NS.IP(t, "link", "set", "tap0", "up")
	p.Guest.IP(t, "addr", "add", GuestAddr.String()+"/24", "dev", "eth0")
	p.Guest.IP(t, "-6", "addr", "add", GuestAddr6.String()+"/120", "dev", "eth0")
	p.Guest.IP(t, "link", "set", "eth0", "up")
	p.Guest.IP(t, "route", "add", "default", "via", GatewayAddr.String())
	p.Guest.IP(t, "-6", "route", "add", "default", "via", GatewayAddr6.String())
	for _, v6 := range []bool{false, true} {
		if err := masquerade(p.NS.Fd(), "eth0", "k6t-eth0", v6); err != nil {
			t.Fatalf("%s: KubeVirt's masquerade rules (IPv6 %v): %v", p.NS.Name, v6, err)
		}
	}
	settle(t, node.NS, p.NS, p.Guest)
	node.Pods = append(node.Pods, p)
	return p
}
