package cniplugin

import (
	"strings"
	"testing"
)

// TestParseConfig: a conflist entry as a runtime passes it is taken, the
// previous result kept byte for byte.
func TestParseConfig(t *testing.T) {
	prev := `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/run/netns/x"}],"ips":[{"address":"10.244.1.2/24","interface":0}]}`
	c, err := ParseConfig([]byte(`{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"vminit-cni","agent":"172.31.0.10:8775",
		"runtimeConfig":{"portMappings":[]},"args":{"cni":{}},"cni.dev/valid-attachments":[],"prevResult":` + prev + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Table.Agent().String() != "172.31.0.10:8775" {
		t.Errorf("agent %s", c.Table.Agent())
	}
	if out, err := c.result(); err != nil || string(out) != prev {
		t.Errorf("result %s, %v; want the prevResult unchanged: %s", out, err, prev)
	}
	c, err = ParseConfig([]byte(`{"cniVersion":"1.1.0","type":"vminit-cni","agent":"172.31.0.10:8775"}`))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.result(); err != nil || string(out) != `{"cniVersion":"1.1.0"}` {
		t.Errorf("first in a chain: result %s, %v", out, err)
	}
	if c.Table6 != nil || len(c.tables()) != 1 {
		t.Errorf("no agent6, and an IPv6 table: %v", c.tables())
	}
	// A dual-stack node's entry: a table per family.
	c, err = ParseConfig([]byte(`{"cniVersion":"1.0.0","type":"vminit-cni","agent":"172.31.0.10:8775","agent6":"[fd00:31::10]:8775"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Table6 == nil || c.Table6.Name() != "ip6 vminit" || c.Table6.Agent().String() != "[fd00:31::10]:8775" || len(c.tables()) != 2 {
		t.Errorf("agent6: tables %v", c.tables())
	}
}

// TestParseConfigRefuses: every problem is listed, naming its field.
func TestParseConfigRefuses(t *testing.T) {
	for _, tc := range []struct {
		conf string
		want []string
	}{
		{`[]`, []string{"configuration: json: cannot unmarshal array"}},
		{`{"type":"vminit-cni"}`, []string{"cniVersion: want a version string", "agent: missing"}},
		{`{"cniVersion":1,"agent":8775,"agnet":"x","mtu":1500}`, []string{
			`"agnet": unknown field`, `"mtu": unknown field`, "cniVersion: want", "agent: want a string ADDRESS:PORT"}},
		{`{"cniVersion":"1.0.0","agent":"node:8775"}`, []string{`agent: "node:8775" is not ADDRESS:PORT`}},
		{`{"cniVersion":"1.0.0","agent":"127.0.0.1:8775"}`, []string{"agent: 127.0.0.1:8775 is a loopback address"}},
		{`{"cniVersion":"1.0.0","agent":"10.0.0.1:8775","prevResult":{"ips":"x"}}`, []string{"prevResult: not a CNI 1.0.0 result"}},
		{`{"cniVersion":"1.0.0","agent":"[fd00::1]:8775","agent6":"10.0.0.1:8775"}`, []string{
			"agent: [fd00::1]:8775 is not IPv4: give the node agent's IPv6 address as agent6", "agent6: 10.0.0.1:8775 is IPv4"}},
		{`{"cniVersion":"1.0.0","agent":"10.0.0.1:8775","agent6":"[::1]:8775"}`, []string{"agent6: [::1]:8775 is a loopback address"}},
		{`{"cniVersion":"1.0.0","agent":"10.0.0.1:8775","agent6":6}`, []string{"agent6: want a string ADDRESS:PORT"}},
	} {
		_, err := ParseConfig([]byte(tc.conf))
		if err == nil {
			t.Errorf("%s: accepted", tc.conf)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nlacks %q", tc.conf, err, w)
			}
		}
	}
}

// TestIsVirtLauncher: the pod name kubelet's runtime passes decides.
func TestIsVirtLauncher(t *testing.T) {
	for args, want := range map[string]bool{
		"IgnoreUnknown=1;K8S_POD_NAMESPACE=vms;K8S_POD_NAME=virt-launcher-fedora-x8k2p;K8S_POD_INFRA_CONTAINER_ID=abc": true,
		"K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=coredns-5d78c9869d-abcde":                                          false,
		"K8S_POD_NAME=virt-handler-x": false,
		"":                            false, // not Kubernetes: nothing names the pod
	} {
		if got, err := IsVirtLauncher(args); err != nil || got != want {
			t.Errorf("IsVirtLauncher(%q) = %v, %v; want %v", args, got, err, want)
		}
	}
	if _, err := IsVirtLauncher("K8S_POD_NAME"); err == nil {
		t.Error("a pair without '=' accepted")
	}
}
