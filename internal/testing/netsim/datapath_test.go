package netsim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/vminit/vminit/internal/testing/netsim"
	"github.com/vminit/vminit/mdserver/intercept"
)

// agentAddr and agentAddr6 are where the simulated node agent listens:
// the node's addresses, as a DaemonSet on the host network would.
var (
	agentAddr  = netip.AddrPortFrom(netsim.NodeAddr, 8775)
	agentAddr6 = netip.AddrPortFrom(netsim.NodeAddr6, 8775)
)

// family is one address family's metadata address, and the pod address
// the agent must see a guest's request come from.
type family struct {
	metadata string // host part of the URL
	podIP    func(*netsim.Pod) netip.Addr
}

var families = []family{
	{"169.254.169.254", func(p *netsim.Pod) netip.Addr { return p.IP }},
	{"[fd00:ec2::254]", func(p *netsim.Pod) netip.Addr { return p.IP6 }},
}

// TestGuestReachesAgent proves both data paths of mdserver/intercept on
// the simulated KubeVirt node (package doc): two virt-launcher pods, one
// routed and one bridged, each with a guest behind KubeVirt's
// masquerade. Before vminit, a guest's GET of http://169.254.169.254/
// reaches the stub cloud metadata service beyond the node's default
// route (what the interception is for). With the host table in the
// node's namespace ("host"), or with vminit-cni run by libcni from a
// conflist as a runtime runs it ("cni"), each guest's GET reaches the
// node agent, which sees that guest's pod IP (so the two are told
// apart), and the cloud's service gets nothing from a pod, not even on
// another port (the node's own requests still reach it). Removing the
// table (Remove, or CNI DEL) leaves every namespace's ruleset as it was,
// and the guests' requests go where they went before. All of it holds
// for IPv6 too: EC2's fd00:ec2::254, KubeVirt's IPv6 masquerade (the
// guest's fd10:0:2::2 leaving as the pod's fd00:244:N::2), the ip6
// table, the agent's IPv6 address.
func TestGuestReachesAgent(t *testing.T) {
	netsim.Require(t)
	var plugin string // vminit-cni, built once for the "cni" path
	for _, path := range []string{"host", "cni"} {
		t.Run(path, func(t *testing.T) {
			node := netsim.NewNode(t)
			pods := []*netsim.Pod{
				node.AddPod(t, "virt-launcher-vm-a-x8k2p", false),
				node.AddPod(t, "virt-launcher-vm-b-q7w4m", true),
			}
			for _, a := range []netip.AddrPort{agentAddr, agentAddr6} {
				node.NS.Serve(t, a.String(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					host, _, _ := net.SplitHostPort(r.RemoteAddr)
					io.WriteString(w, host)
				}))
			}
			var cloudHits atomic.Int64
			cloud := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				cloudHits.Add(1)
				io.WriteString(w, "cloud")
			})
			for _, f := range families {
				node.Cloud.Serve(t, f.metadata+":80", cloud)
				node.Cloud.Serve(t, f.metadata+":8080", cloud)
			}

			// Before: the guests' requests go to the cloud.
			for _, p := range pods {
				for _, f := range families {
					for _, url := range []string{"http://" + f.metadata + "/", "http://" + f.metadata + ":8080/"} {
						if body, err := get(p.Guest, url); err != nil || body != "cloud" {
							t.Fatalf("%s before vminit: GET %s: %q, %v; want the cloud's answer (is the simulation routed?)", p.Name, url, body, err)
						}
					}
				}
			}
			before := rulesets(t, node)

			var remove func()
			switch path {
			case "host":
				for _, a := range []netip.AddrPort{agentAddr, agentAddr6} {
					tb, err := intercept.Host(a, nil)
					if err != nil {
						t.Fatal(err)
					}
					if err := tb.Install(node.NS.Fd()); err != nil {
						t.Fatal(err)
					}
				}
				remove = func() {
					if err := intercept.Remove(node.NS.Fd()); err != nil {
						t.Fatal(err)
					}
				}
			case "cni":
				if plugin == "" {
					plugin = buildPlugin(t)
				}
				remove = runCNI(t, plugin, pods)
			}

			hits := cloudHits.Load()
			seen := map[string]string{}
			for _, p := range pods {
				for _, f := range families {
					want := f.podIP(p).String()
					body, err := get(p.Guest, "http://"+f.metadata+"/")
					if err != nil || body != want {
						t.Errorf("%s: the guest's GET of %s: %q, %v; want the agent to see the pod's address %s", p.Name, f.metadata, body, err, want)
					}
					if other, ok := seen[body]; ok {
						t.Errorf("%s and %s reach the agent as the same source %s", other, p.Name, body)
					}
					seen[body] = p.Name
					if body, err := getDropped(p.Guest, "http://"+f.metadata+":8080/"); err == nil {
						t.Errorf("%s: the guest's GET of %s:8080 was answered: %q", p.Name, f.metadata, body)
					}
					if path == "cni" {
						// The pod's own processes (KubeVirt's passt binding
						// proxies the guest from the pod) are redirected too.
						if body, err := get(p.NS, "http://"+f.metadata+"/"); err != nil || body != want {
							t.Errorf("%s: the pod's own GET of %s: %q, %v; want %s", p.Name, f.metadata, body, err, want)
						}
					}
				}
			}
			if n := cloudHits.Load() - hits; n != 0 {
				t.Errorf("the cloud's metadata service was reached %d times with vminit's tables installed", n)
			}
			// The node's own processes are not pods: they keep their cloud.
			for _, f := range families {
				if body, err := get(node.NS, "http://"+f.metadata+"/"); err != nil || body != "cloud" {
					t.Errorf("the node's own GET of %s: %q, %v; want the cloud's answer", f.metadata, body, err)
				}
			}
			counted := map[string]uint64{}
			for _, n := range tableNamespaces(node, path) {
				for chain, packets := range netsim.Counters(t, n, intercept.TableName) {
					counted[chain] += packets
				}
			}
			if counted["redirect"] == 0 || counted["drop"] == 0 {
				t.Errorf("vminit's counters: %v; want packets redirected and dropped", counted)
			}

			remove()
			if after := rulesets(t, node); after != before {
				t.Errorf("the rulesets after removal differ from before:\n%s\nthen\n%s", before, after)
			}
			for _, p := range pods {
				for _, f := range families {
					if body, err := get(p.Guest, "http://"+f.metadata+"/"); err != nil || body != "cloud" {
						t.Errorf("%s after removal: GET %s: %q, %v; want the cloud's answer again", p.Name, f.metadata, body, err)
					}
				}
			}
		})
	}
}

// get is one GET from the namespace, the body if it is a 200.
// get is the answer to a GET from n that must get through (ten seconds
// to connect), getDropped one that must not (a second: a dropped SYN is a
// timeout).
func get(n *netsim.NS, url string) (string, error) {
	return getWith(n.ClientConnecting(10*time.Second), url)
}

func getDropped(n *netsim.NS, url string) (string, error) {
	return getWith(n.Client(), url)
}

func getWith(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}

// rulesets is every namespace's ruleset, named.
func rulesets(t *testing.T, node *netsim.Node) string {
	var b strings.Builder
	for _, n := range append([]*netsim.NS{node.NS, node.Cloud}, podNamespaces(node)...) {
		fmt.Fprintf(&b, "== %s\n%s", n.Name, netsim.Ruleset(t, n))
	}
	return b.String()
}

func podNamespaces(node *netsim.Node) []*netsim.NS {
	var out []*netsim.NS
	for _, p := range node.Pods {
		out = append(out, p.NS, p.Guest)
	}
	return out
}

// tableNamespaces are where the path puts vminit's table.
func tableNamespaces(node *netsim.Node, path string) []*netsim.NS {
	if path == "host" {
		return []*netsim.NS{node.NS}
	}
	var out []*netsim.NS
	for _, p := range node.Pods {
		out = append(out, p.NS)
	}
	return out
}

// buildPlugin builds cmd/vminit-cni into a CNI bin directory, beside the
// simulation's pod network plugin.
func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "vminit-cni")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/vminit/vminit/cmd/vminit-cni").CombinedOutput(); err != nil {
		t.Fatalf("go build vminit-cni: %v\n%s", err, out)
	}
	return bin
}

// runCNI runs the conflist [pod network, vminit-cni] for each pod through
// libcni, as a runtime runs it (ADD, then CHECK; GC and STATUS too), and
// returns the DEL of each. A pod that is not a virt-launcher's is left
// alone, and DEL of what was never added (twice, and in a namespace gone)
// succeeds.
func runCNI(t *testing.T, plugin string, pods []*netsim.Pod) (del func()) {
	t.Helper()
	dir := t.TempDir()
	binDir := filepath.Join(dir, "bin")
	netsim.InstallPodNetwork(t, binDir)
	if err := os.Symlink(plugin, filepath.Join(binDir, "vminit-cni")); err != nil {
		t.Fatal(err)
	}
	conflist := filepath.Join(dir, "10-pod-network.conflist")
	if err := os.WriteFile(conflist, fmt.Appendf(nil, `{
  "cniVersion": "1.0.0",
  "name": "k8s-pod-network",
  "plugins": [
    {"type": %q},
    {"type": "vminit-cni", "agent": %q, "agent6": %q}
  ]
}`, netsim.PodNetworkType, agentAddr, agentAddr6), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := libcni.NetworkConfFromFile(conflist)
	if err != nil {
		t.Fatal(err)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{binDir}, filepath.Join(dir, "cache"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if _, err := cni.ValidateNetworkList(ctx, list); err != nil {
		t.Fatalf("ValidateNetworkList: %v", err)
	}
	runtime := func(id, podName, netns string) *libcni.RuntimeConf {
		return &libcni.RuntimeConf{ContainerID: id, NetNS: netns, IfName: "eth0", Args: [][2]string{
			{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "vms"}, {"K8S_POD_NAME", podName}, {"K8S_POD_INFRA_CONTAINER_ID", id},
		}}
	}
	var rts []*libcni.RuntimeConf
	for i, p := range pods {
		rt := runtime(fmt.Sprintf("sandbox%d", i), p.Name, p.NS.Path())
		prevJSON := p.Result(t, binDir, rt.ContainerID)
		// Twice: ADD is idempotent (the rulesets after removal show one
		// table was there).
		for range 2 {
			res, err := cni.AddNetworkList(ctx, list, rt)
			if err != nil {
				t.Fatalf("%s: ADD: %v", p.Name, err)
			}
			if got := resultJSON(t, res, list.CNIVersion); got != string(prevJSON) {
				t.Errorf("%s: ADD's result\n%s\nwant the pod network's, unchanged\n%s", p.Name, got, prevJSON)
			}
		}
		if err := cni.CheckNetworkList(ctx, list, rt); err != nil {
			t.Errorf("%s: CHECK: %v", p.Name, err)
		}
		// CHECK sees the table gone, and ADD puts it back.
		if err := intercept.Remove(p.NS.Fd()); err != nil {
			t.Fatal(err)
		}
		if err := cni.CheckNetworkList(ctx, list, rt); err == nil || !strings.Contains(err.Error(), "not installed") {
			t.Errorf("%s: CHECK without the table: %v, want it missing", p.Name, err)
		}
		if _, err := cni.AddNetworkList(ctx, list, rt); err != nil {
			t.Fatalf("%s: ADD: %v", p.Name, err)
		}
		if err := cni.CheckNetworkList(ctx, list, rt); err != nil {
			t.Errorf("%s: CHECK after ADD again: %v", p.Name, err)
		}
		rts = append(rts, rt)
	}

	// Not a virt-launcher pod: ADD passes it through and writes nothing.
	other := netsim.NewNS(t, "coredns")
	before := netsim.Ruleset(t, other)
	rt := runtime("sandbox-coredns", "coredns-5d78c9869d-abcde", other.Path())
	if err := os.WriteFile(filepath.Join(binDir, "results", rt.ContainerID+".json"), []byte(`{"cniVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cni.AddNetworkList(ctx, list, rt); err != nil {
		t.Errorf("a pod that is not a virt-launcher's: ADD: %v", err)
	}
	if after := netsim.Ruleset(t, other); after != before {
		t.Errorf("ADD of a pod that is not a virt-launcher's wrote\n%s", after)
	}
	// GC keeps the attachments it is told are valid (and DELs the rest).
	valid := []types.GCAttachment{{ContainerID: rt.ContainerID, IfName: rt.IfName}}
	for _, rt := range rts {
		valid = append(valid, types.GCAttachment{ContainerID: rt.ContainerID, IfName: rt.IfName})
	}
	if err := cni.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
		t.Errorf("GC: %v", err)
	}
	if err := cni.GetStatusNetworkList(ctx, list); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	gone := runtime("sandbox-gone", "virt-launcher-gone-abcde", "/run/netns/vminit-no-such-namespace")
	if err := cni.DelNetworkList(ctx, list, gone); err != nil {
		t.Errorf("DEL in a namespace that is gone: %v", err)
	}
	return func() {
		for i, rt := range rts {
			for range 2 {
				if err := cni.DelNetworkList(ctx, list, rt); err != nil {
					t.Fatalf("%s: DEL: %v", pods[i].Name, err)
				}
			}
		}
	}
}

// resultJSON is a result libcni read, as JSON of version v.
func resultJSON(t *testing.T, r types.Result, v string) string {
	t.Helper()
	res, err := r.GetAsVersion(v)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
