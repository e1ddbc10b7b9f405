package nodecmd

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/vminit/vminit/internal/testing/netsim"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/intercept"
)

// The agent's address in the simulation: the node's, as the DaemonSet's
// --listen $(NODE_IP):8775.
// simAgent and simAgent6 are the agent's addresses on the simulated
// node: a dual-stack node, so the agent listens on both (the second from
// --node-ips, as the DaemonSet gives it status.hostIPs).
var (
	simAgent  = netsim.NodeAddr.String() + ":8775"
	simAgent6 = netip.AddrPortFrom(netsim.NodeAddr6, 8775).String()
)

var (
	buildOnce sync.Once
	binDir    string // vminit-node and vminit-cni, built once
	buildErr  error
)

// programs builds cmd/vminit-node and cmd/vminit-cni into a directory
// every user may read (the refusal test runs vminit-node as nobody).
func programs(t *testing.T) (node, cni string) {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "vminit-node-test-"); buildErr != nil {
			return
		}
		os.Chmod(binDir, 0o755)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		for _, p := range []string{"vminit-node", "vminit-cni"} {
			out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(binDir, p), "github.com/vminit/vminit/cmd/"+p).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", p, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "vminit-node"), filepath.Join(binDir, "vminit-cni")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// process is vminit-node run as the DaemonSet runs it, in the node's
// network namespace.
type process struct {
	cmd  *exec.Cmd
	log  *testtools.SyncBuffer
	done chan error
}

// runAgent starts vminit-node in the node's namespace serving instances
// (a directory of specs) on simAgent, and waits until it serves.
func runAgent(t *testing.T, node *netsim.Node, instances string, args ...string) *process {
	t.Helper()
	bin, _ := programs(t)
	p := &process{log: &testtools.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", node.NS.Name, bin, "--instances", instances, "--listen", simAgent,
		"--node-ips", netsim.NodeAddr.String() + "," + netsim.NodeAddr6.String(), "--log-format", "text"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill(); p.wait(t) })
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(p.log.String(), "msg=listening") {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("vminit-node exited (%v):\n%s", err, p.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("vminit-node does not serve:\n%s", p.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// terminate sends SIGTERM, as kubelet stops a pod, and returns the exit.
func (p *process) terminate(t *testing.T) error {
	t.Helper()
	// ip netns exec execs the program: the process is vminit-node.
	p.cmd.Process.Signal(syscall.SIGTERM)
	return p.wait(t)
}

func (p *process) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(time.Minute):
		t.Fatalf("vminit-node still runs a minute after SIGTERM:\n%s", p.log)
		return nil
	}
}

// instances writes one Instance spec per pod, owning the pod's IPs (the
// addresses its guest's requests arrive from), and returns the directory.
func instances(t *testing.T, pods []*netsim.Pod) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range pods {
		spec := fmt.Sprintf("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: %s}\nspec:\n  instanceID: i-%[1]s\n  metadataServer: {addresses: [%s, \"%s\"]}\n", p.Name, p.IP, p.IP6)
		if err := os.WriteFile(filepath.Join(dir, p.Name+".yaml"), []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// metadataHosts are the metadata service's addresses as URLs name them:
// IPv4's and EC2's IPv6 one.
var metadataHosts = []string{"169.254.169.254", "[fd00:ec2::254]"}

// instanceID is what the guest of p reads at host (one of metadataHosts)
// as EC2's instance-id ("" and the error when it cannot).
func instanceID(p *netsim.Pod, host string) (string, error) {
	resp, err := p.Guest.Client().Get("http://" + host + "/latest/meta-data/instance-id")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), nil
}

// cloud serves the stub cloud metadata service, on both families'
// addresses, and counts its requests.
func cloud(t *testing.T, node *netsim.Node) func() int {
	var mu sync.Mutex
	n := 0
	for _, host := range metadataHosts {
		node.Cloud.Serve(t, host+":80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			n++
			mu.Unlock()
			io.WriteString(w, "i-the-node")
		}))
	}
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestHostDataPath runs vminit-node --intercept host as the DaemonSet
// does, on the simulated node (internal/testing/netsim): its table is in
// the node's namespace (intercept's Check), each guest (a routed pod and
// a bridged one, behind KubeVirt's masquerade) reads its own Instance's
// instance-id from vminit-node at 169.254.169.254 and the cloud's
// service gets nothing; a table deleted under it is put back; after
// SIGTERM it exits 0, the table is gone, the node's ruleset is what it
// was, and the guests reach the cloud again.
func TestHostDataPath(t *testing.T) {
	netsim.Require(t)
	node := netsim.NewNode(t)
	pods := []*netsim.Pod{node.AddPod(t, "virt-launcher-vm-a-x8k2p", false), node.AddPod(t, "virt-launcher-vm-b-q7w4m", true)}
	cloudHits := cloud(t, node)
	before := netsim.Ruleset(t, node.NS)

	p := runAgent(t, node, instances(t, pods), "--intercept", "host")
	table, err := intercept.Host(netip.MustParseAddrPort(simAgent), nil)
	if err != nil {
		t.Fatal(err)
	}
	table6, err := intercept.Host(netip.MustParseAddrPort(simAgent6), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range []*intercept.Table{table, table6} {
		if err := tb.Check(node.NS.Fd()); err != nil {
			t.Errorf("vminit-node serves, and its table %s is not installed: %v\n%s", tb.Name(), err, p.log)
		}
	}
	readOwn(t, pods)
	if n := cloudHits(); n != 0 {
		t.Errorf("the cloud's metadata service was reached %d times", n)
	}

	// Deleted under it (an `nft flush ruleset`): put back.
	if err := intercept.Remove(node.NS.Fd()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for table.Check(node.NS.Fd()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the table deleted under vminit-node was not put back:\n%s", p.log)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := p.terminate(t); err != nil {
		t.Errorf("vminit-node after SIGTERM: %v\n%s", err, p.log)
	}
	for _, tb := range []*intercept.Table{table, table6} {
		if err := tb.Check(node.NS.Fd()); err == nil || !strings.Contains(err.Error(), "not installed") {
			t.Errorf("after SIGTERM, Check of %s: %v; want the table gone", tb.Name(), err)
		}
	}
	if after := netsim.Ruleset(t, node.NS); after != before {
		t.Errorf("the node's ruleset after SIGTERM:\n%s\nwant\n%s", after, before)
	}
	for _, pod := range pods {
		for _, host := range metadataHosts {
			if id, err := instanceID(pod, host); id != "i-the-node" {
				t.Errorf("%s after SIGTERM: %s: %q, %v; want the cloud's answer again", pod.Name, host, id, err)
			}
		}
	}
}

// readOwn: each pod's guest reads its own Instance's instance-id, at
// 169.254.169.254 and at [fd00:ec2::254] (the agent knows it by its pod's
// IPv6 address there).
func readOwn(t *testing.T, pods []*netsim.Pod) {
	t.Helper()
	for _, p := range pods {
		for _, host := range metadataHosts {
			if id, err := instanceID(p, host); err != nil || id != "i-"+p.Name {
				t.Errorf("%s: the guest's instance-id at %s: %q, %v; want its own, i-%s", p.Name, host, id, err, p.Name)
			}
		}
	}
}

// TestHostRefused: where vminit-node cannot install its table (here: run
// as nobody, without CAP_NET_ADMIN; a kernel without nf_tables takes the
// same path with its own reason), it exits non-zero with intercept's
// error naming what is missing, and serves nothing.
func TestHostRefused(t *testing.T) {
	netsim.Require(t)
	bin, _ := programs(t)
	cmd := exec.Command(bin, "--instances", t.TempDir(), "--listen", "127.0.0.1:1", "--agent-address", simAgent, "--intercept", "host", "--log-format", "text")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || !strings.Contains(string(out), "--intercept host: install vminit's nftables table (ip vminit): changing nftables needs CAP_NET_ADMIN") {
		t.Errorf("vminit-node as nobody: %v\n%s\nwant a failure naming CAP_NET_ADMIN", err, out)
	}
	if strings.Contains(string(out), "msg=listening") {
		t.Errorf("it served:\n%s", out)
	}
}

// TestCNIDataPath runs vminit-node --intercept cni as the DaemonSet does,
// on the simulated node, with the node's CNI directories: it installs
// vminit-cni and chains it in the pod network's conflist; a runtime
// (libcni, as containerd and CRI-O call it) reading that directory then
// sets up two virt-launcher pods, whose guests each read their own
// Instance's instance-id from vminit-node at 169.254.169.254, the
// cloud's service getting nothing. After the pods' DEL and SIGTERM, the
// CNI directories and every namespace's ruleset are what they were.
func TestCNIDataPath(t *testing.T) {
	netsim.Require(t)
	_, plugin := programs(t)
	sim := netsim.NewNode(t)
	pods := []*netsim.Pod{sim.AddPod(t, "virt-launcher-vm-a-x8k2p", false), sim.AddPod(t, "virt-launcher-vm-b-q7w4m", true)}
	cloudHits := cloud(t, sim)
	rulesets := func() string {
		var b strings.Builder
		for _, n := range []*netsim.NS{sim.NS, pods[0].NS, pods[1].NS} {
			fmt.Fprintf(&b, "== %s\n%s", n.Name, netsim.Ruleset(t, n))
		}
		return b.String()
	}
	beforeRules := rulesets()

	root := t.TempDir()
	n := node{conf: filepath.Join(root, "net.d"), bin: filepath.Join(root, "bin"), plugin: plugin}
	netsim.InstallPodNetwork(t, n.bin)
	os.MkdirAll(n.conf, 0o755)
	if err := os.WriteFile(filepath.Join(n.conf, "10-pod-network.conflist"),
		fmt.Appendf(nil, "{\n  \"cniVersion\": \"1.0.0\",\n  \"name\": \"k8s-pod-network\",\n  \"plugins\": [\n    {\"type\": %q}\n  ]\n}\n", netsim.PodNetworkType), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, pod := range pods { // the stand-in's answers, written as the pods' veths were made
		pod.Result(t, n.bin, fmt.Sprintf("sandbox%d", i))
	}
	before := n.snapshot(t)

	p := runAgent(t, sim, instances(t, pods), "--intercept", "cni", "--cni-conf-dir", n.conf, "--cni-bin-dir", n.bin, "--cni-plugin", plugin)

	list := n.runtimeList(t)
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.bin}, filepath.Join(root, "cache"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rts []*libcni.RuntimeConf
	for i, pod := range pods {
		rt := &libcni.RuntimeConf{ContainerID: fmt.Sprintf("sandbox%d", i), NetNS: pod.NS.Path(), IfName: "eth0", Args: [][2]string{
			{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "vms"}, {"K8S_POD_NAME", pod.Name}}}
		if _, err := cni.AddNetworkList(ctx, list, rt); err != nil {
			t.Fatalf("%s: ADD with the conflist vminit-node wrote: %v", pod.Name, err)
		}
		rts = append(rts, rt)
	}
	readOwn(t, pods)
	if n := cloudHits(); n != 0 {
		t.Errorf("the cloud's metadata service was reached %d times", n)
	}
	for i, rt := range rts {
		if err := cni.DelNetworkList(ctx, list, rt); err != nil {
			t.Errorf("%s: DEL: %v", pods[i].Name, err)
		}
	}
	if err := p.terminate(t); err != nil {
		t.Errorf("vminit-node after SIGTERM: %v\n%s", err, p.log)
	}
	if after := n.snapshot(t); !maps.Equal(after, before) {
		t.Errorf("the CNI directories after SIGTERM:\n%v\nwant\n%v", after, before)
	}
	if after := rulesets(); after != beforeRules {
		t.Errorf("the rulesets after DEL:\n%s\nwant\n%s", after, beforeRules)
	}
}
