package intercept

import (
	"net/netip"
	"strings"
	"testing"
)

var (
	agent  = netip.MustParseAddrPort("172.31.0.10:8775")
	agent6 = netip.MustParseAddrPort("[fd00:31::10]:8775")
)

// TestHostTable: with no interfaces named, the host table matches the
// common CNIs' (DefaultPodInterfaces), one redirect and one drop each.
func TestHostTable(t *testing.T) {
	tb, err := Host(agent, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := tb.String()
	for _, want := range []string{
		"table ip vminit {",
		"type nat hook prerouting priority -110; policy accept;",
		`iifname "veth*" ip daddr 169.254.169.254 tcp dport 80 counter dnat to 172.31.0.10:8775`,
		`iifname "antrea-gw0" ip daddr 169.254.169.254 counter drop`,
		"type filter hook forward priority 0; policy accept;",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	if n := strings.Count(s, "dnat to"); n != len(DefaultPodInterfaces) {
		t.Errorf("%d redirects, want %d:\n%s", n, len(DefaultPodInterfaces), s)
	}
	if tb.String() != s {
		t.Error("String differs between calls")
	}
}

// TestPodTable: the pod table redirects what comes from the VM and what
// the pod sends itself, on any interface, and drops the rest; an IPv6
// agent makes the same table in the ip6 family, for EC2's IPv6 metadata
// address.
func TestPodTable(t *testing.T) {
	for _, tc := range []struct {
		agent                  netip.AddrPort
		family, meta, name, to string
	}{
		{agent, "ip", "169.254.169.254", "ip vminit", "172.31.0.10:8775"},
		{agent6, "ip6", "fd00:ec2::254", "ip6 vminit", "[fd00:31::10]:8775"},
	} {
		tb, err := Pod(tc.agent)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.NewReplacer("FAM", tc.family, "META", tc.meta, "AGENT", tc.to).Replace(`table FAM vminit {
	chain redirect {
		type nat hook prerouting priority -110; policy accept;
		FAM daddr META tcp dport 80 counter dnat to AGENT
	}

	chain redirect-local {
		type nat hook output priority -110; policy accept;
		FAM daddr META tcp dport 80 counter dnat to AGENT
	}

	chain drop {
		type filter hook forward priority 0; policy accept;
		FAM daddr META counter drop
	}

	chain drop-local {
		type filter hook output priority 0; policy accept;
		FAM daddr META counter drop
	}
}
`)
		if got := tb.String(); got != want || tb.Name() != tc.name || tb.IPv6() != (tc.family == "ip6") {
			t.Errorf("%s (IPv6 %v): got\n%s\nwant\n%s", tb.Name(), tb.IPv6(), got, want)
		}
	}
	host, err := Host(agent6, []string{"veth*"})
	if err != nil {
		t.Fatal(err)
	}
	if s := host.String(); !strings.Contains(s, `iifname "veth*" ip6 daddr fd00:ec2::254 tcp dport 80 counter dnat to [fd00:31::10]:8775`) {
		t.Errorf("IPv6 host table:\n%s", s)
	}
}

// TestRefused: every problem of a configuration is listed, each naming
// its field.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		agent  string
		ifaces []string
		want   []string
	}{
		{"", nil, []string{"agent: no address"}},
		{"[fe80::1]:80", nil, []string{"agent: [fe80::1]:80 is a link-local IPv6 address"}},
		{"[fe80::1%eth0]:80", nil, []string{"agent: [fe80::1%eth0]:80 is a link-local IPv6 address"}},
		{"[::ffff:10.0.0.1]:80", nil, []string{"agent: [::ffff:10.0.0.1]:80 is an IPv4-mapped IPv6 address"}},
		{"[::1]:8775", nil, []string{"agent: [::1]:8775 is a loopback address"}},
		{"[ff02::1]:8775", nil, []string{"agent: [ff02::1]:8775 is not a unicast address"}},
		{"[fd00:ec2::254]:80", nil, []string{"agent: [fd00:ec2::254]:80 is the metadata address itself"}},
		{"10.0.0.1:0", nil, []string{"agent: 10.0.0.1:0 has no port"}},
		{"127.0.0.1:8775", nil, []string{"agent: 127.0.0.1:8775 is a loopback address"}},
		{"0.0.0.0:8775", nil, []string{"agent: 0.0.0.0:8775 is not a unicast address"}},
		{"169.254.169.254:80", nil, []string{"agent: 169.254.169.254:80 is the metadata address itself"}},
		{"10.0.0.1:8775", []string{"*", "", "averyveryverylongname", "a b", "x/y", "ve*th", "veth*", "veth*"}, []string{
			`interfaces[0]: "*" matches every interface`,
			"interfaces[1]: empty",
			`interfaces[2]: "averyveryverylongname" is longer than an interface name`,
			`interfaces[3]: "a b" is not an interface name`,
			`interfaces[4]: "x/y" is not an interface name`,
			`interfaces[5]: "ve*th" is not an interface name`,
			`interfaces[7]: "veth*" repeats interfaces[6]`,
		}},
		{"", make([]string, MaxInterfaces+1), []string{"agent: no address", "interfaces: 65 entries, at most 64"}},
	} {
		var a netip.AddrPort
		if tc.agent != "" {
			a = netip.MustParseAddrPort(tc.agent)
		}
		_, err := Host(a, tc.ifaces)
		if err == nil {
			t.Errorf("Host(%q, %q) accepted", tc.agent, tc.ifaces)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Host(%q, %q): %v\nlacks %q", tc.agent, tc.ifaces, err, w)
			}
		}
		if tc.ifaces == nil {
			if _, err := Pod(a); err == nil || !strings.Contains(err.Error(), tc.want[0]) {
				t.Errorf("Pod(%q): %v, want %q", tc.agent, err, tc.want[0])
			}
		}
	}
	if _, err := Host(agent, []string{"cni0", "veth*", "eth1"}); err != nil {
		t.Errorf("names and prefixes refused: %v", err)
	}
}
