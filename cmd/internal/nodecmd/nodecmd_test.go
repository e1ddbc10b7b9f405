package nodecmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/vminit/vminit/cmd/internal/servekit"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// node is a node's CNI directories in a temporary directory: the pod
// network's conflist (a published one), a later file runtimes ignore,
// the pod network's plugin, and a vminit-cni to install.
type node struct {
	conf, bin, plugin string
}

func newNode(t *testing.T) node {
	t.Helper()
	root := t.TempDir()
	n := node{conf: filepath.Join(root, "net.d"), bin: filepath.Join(root, "bin"), plugin: filepath.Join(root, "image", "vminit-cni")}
	published, err := os.ReadFile("testdata/10-containerd-net.conflist")
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{
		filepath.Join(n.conf, "10-containerd-net.conflist"): published,
		filepath.Join(n.conf, "99-loopback.conf"):           []byte(`{"cniVersion": "1.0.0", "name": "lo", "type": "loopback"}`),
		filepath.Join(n.bin, "bridge"):                      []byte("#!/bin/sh\n"),
		n.plugin:                                            []byte("vminit-cni, as the image holds it\n"),
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// snapshot is every file of the node's CNI directories: name, mode and
// bytes.
func (n node) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range []string{n.conf, n.bin} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			out[p] = fmt.Sprintf("%v %q", fi.Mode(), data)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// runtimeList is the pod network's configuration as a runtime reads it
// from the conf dir: the first file, as a list.
func (n node) runtimeList(t *testing.T) *libcni.NetworkConfigList {
	t.Helper()
	files, err := libcni.ConfFiles(n.conf, confExts)
	if err != nil || len(files) == 0 {
		t.Fatalf("conf dir: %v %v", files, err)
	}
	list, err := libcni.NetworkConfFromFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func (n node) args(extra ...string) []string {
	return append([]string{"--intercept", "cni", "--agent-address", agent, "--cni-conf-dir", n.conf, "--cni-bin-dir", n.bin, "--cni-plugin", n.plugin}, extra...)
}

// agentRun is vminit-node running in the test.
type agentRun struct {
	log  *testtools.SyncBuffer
	stop context.CancelFunc
	done chan error
}

// start runs vminit-node with args on an empty instance directory, its
// checks at a short interval, until stop (SIGTERM's path: its context
// ends), and waits until it serves.
func start(t *testing.T, args ...string) *agentRun {
	t.Helper()
	return startPolling(t, 20*time.Millisecond, args...)
}

// startPolling is start with the cni path's poll at backstop.
func startPolling(t *testing.T, backstop time.Duration, args ...string) *agentRun {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	r := &agentRun{log: &testtools.SyncBuffer{}, stop: cancel, done: make(chan error, 1)}
	cmd := newCommand(20*time.Millisecond, backstop)
	cmd.SetOut(io.Discard)
	cmd.SetErr(r.log)
	cmd.SetArgs(append([]string{"--instances", t.TempDir(), "--listen", addr, "--allow-loopback-instances", "--log-format", "text"}, args...))
	go func() { r.done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() { cancel(); r.wait(t) })
	r.waitFor(t, "it serves", func() bool { return strings.Contains(r.log.String(), "msg=listening") })
	return r
}

// wait returns the command's error once it stopped.
func (r *agentRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(time.Minute):
		t.Fatalf("vminit-node still runs a minute after it was stopped:\n%s", r.log)
		return nil
	}
}

// waitFor polls cond (a hang bound, not a measure).
func (r *agentRun) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		select {
		case err := <-r.done:
			t.Fatalf("vminit-node returned (%v) before %s:\n%s", err, what, r.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %s:\n%s", what, r.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// chained reports whether path's list ends with vminit-cni's entry, once.
func chained(path string) bool {
	list, err := libcni.ConfListFromFile(path)
	if err != nil {
		return false
	}
	n := 0
	for _, p := range list.Plugins {
		if p.Network.Type == pluginType {
			n++
		}
	}
	return n == 1 && list.Plugins[len(list.Plugins)-1].Network.Type == pluginType &&
		bytes.Contains(list.Plugins[len(list.Plugins)-1].Bytes, []byte(agent))
}

// TestCNILifecycle runs vminit-node --intercept cni on a node's CNI
// directories: vminit-cni appears in the bin directory (0755, the
// image's bytes) and its entry at the end of the pod network's conflist;
// the CNI rewriting its file gets the entry back; a new file that sorts
// first takes the entry, and the old one is left as the CNI wrote it;
// when the agent stops, both directories are byte for byte what they were.
func TestCNILifecycle(t *testing.T) {
	n := newNode(t)
	before := n.snapshot(t)
	primary := filepath.Join(n.conf, "10-containerd-net.conflist")
	published, _ := os.ReadFile(primary)

	r := start(t, n.args()...)
	// An IPv4 agent address alone: the agent says IPv6 is not
	// intercepted, and goes on.
	if !strings.Contains(r.log.String(), "no IPv6 agent address") || strings.Contains(r.log.String(), "agent6") {
		t.Errorf("an agent without an IPv6 address does not say so, or chains an agent6:\n%s", r.log)
	}
	if !chained(primary) {
		data, _ := os.ReadFile(primary)
		t.Fatalf("serving, and %s holds no vminit-cni entry at its end:\n%s", primary, data)
	}
	installed := filepath.Join(n.bin, pluginType)
	fi, err := os.Stat(installed)
	want, _ := os.ReadFile(n.plugin)
	if got, _ := os.ReadFile(installed); err != nil || fi.Mode().Perm() != 0o755 || !bytes.Equal(got, want) {
		t.Errorf("%s: %v, %v, %q; want mode 0755 and the image's bytes", installed, err, fi.Mode(), got)
	}
	if after := n.snapshot(t); after[filepath.Join(n.conf, "99-loopback.conf")] != before[filepath.Join(n.conf, "99-loopback.conf")] {
		t.Errorf("a file that is not the pod network's was changed")
	}

	// The CNI rewrites its file, as its agent does at start.
	if err := os.WriteFile(primary+".new", published, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(primary+".new", primary); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "put the entry back after the CNI rewrote its file", func() bool { return chained(primary) })

	// Another CNI's list sorts first: the entry moves there.
	first := filepath.Join(n.conf, "05-cilium.conflist")
	if err := os.WriteFile(first, []byte(`{"cniVersion": "1.0.0", "name": "cilium", "plugins": [{"type": "cilium-cni"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "moved the entry to the new first list", func() bool {
		data, _ := os.ReadFile(primary)
		return chained(first) && bytes.Equal(data, published)
	})
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "put the entry back in the pod network's list", func() bool { return chained(primary) })

	r.stop()
	if err := r.wait(t); err != nil {
		t.Fatalf("vminit-node: %v\n%s", err, r.log)
	}
	if after := n.snapshot(t); !maps.Equal(after, before) {
		t.Errorf("after vminit-node stopped, the CNI directories differ:\n%v\nwant\n%v", after, before)
	}
	for _, line := range []string{"installed the CNI plugin", "chained vminit-cni", "removed vminit-cni from", "removed the CNI plugin", "interception removed"} {
		if !strings.Contains(r.log.String(), line) {
			t.Errorf("the log says nothing of %q:\n%s", line, r.log)
		}
	}
}

// TestCNIRefused: a node vminit-cni cannot be chained on is refused
// before anything is changed or served, with the reason; so are flags
// of the other data path.
func TestCNIRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string // the conf dir's
		extra []string
		want  string
	}{
		{"no configuration", map[string]string{"README": "x"}, nil, "holds no network configuration (*.conflist, *.conf, *.json)"},
		{"a .conf first", map[string]string{"05-ovn.conf": `{"cniVersion": "1.0.0", "name": "ovn", "type": "ovn-k8s-cni-overlay"}`}, nil, "05-ovn.conf is a single-plugin network configuration"},
		{"CNI 0.2.0", map[string]string{"10-old.conflist": `{"cniVersion": "0.2.0", "name": "old", "plugins": [{"type": "bridge"}]}`}, nil, `cniVersion "0.2.0": vminit-cni speaks CNI 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0`},
		{"unparsable", map[string]string{"10-x.conflist": "{"}, nil, "10-x.conflist: not a network configuration list"},
		{"no plugin binary", nil, []string{"--cni-plugin", "/nonexistent/vminit-cni"}, "--cni-plugin: open /nonexistent/vminit-cni"},
		{"a host flag", nil, []string{"--pod-interfaces", "veth*"}, "--pod-interfaces is for --intercept host"},
		{"loopback agent", nil, []string{"--agent-address", "[::1]:8775"}, "agent: [::1]:8775 is a loopback address"},
		{"no agent port", nil, []string{"--agent-address", "10.0.0.1"}, `--agent-address "10.0.0.1": want this node's IP:PORT`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newNode(t)
			if c.files != nil {
				os.RemoveAll(n.conf)
				os.MkdirAll(n.conf, 0o755)
				for name, data := range c.files {
					os.WriteFile(filepath.Join(n.conf, name), []byte(data), 0o644)
				}
			}
			before := n.snapshot(t)
			var stderr bytes.Buffer
			args := append(n.args(c.extra...), "--instances", t.TempDir(), "--listen", "127.0.0.1:1", "--log-format", "text")
			code := Main(args, io.Discard, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d:\n%s\nwant a failure saying %q", code, stderr.String(), c.want)
			}
			if strings.Contains(stderr.String(), "msg=listening") {
				t.Errorf("it served:\n%s", stderr.String())
			}
			if after := n.snapshot(t); !maps.Equal(after, before) {
				t.Errorf("the CNI directories changed:\n%v\nwant\n%v", after, before)
			}
		})
	}
}

// TestUninstall: --uninstall takes out every vminit-cni entry an agent
// killed before its clean-up left (in the primary list and in one that no
// longer is) and the binary, and serves nothing; with nothing to remove
// it succeeds too.
func TestUninstall(t *testing.T) {
	n := newNode(t)
	before := n.snapshot(t)
	left := map[string]string{
		filepath.Join(n.conf, "10-containerd-net.conflist"): "",
		filepath.Join(n.conf, "20-old.conflist"):            `{"cniVersion": "1.0.0", "name": "old", "plugins": [{"type": "ptp"}]}`,
	}
	for path, data := range left {
		if data == "" {
			b, _ := os.ReadFile(path)
			data = string(b)
		}
		list, err := parseConflist(path, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		with, _ := list.with(agent, "")
		os.WriteFile(path, with, 0o644)
	}
	os.WriteFile(filepath.Join(n.bin, pluginType), []byte("old"), 0o755)
	for range 2 {
		var stderr bytes.Buffer
		if code := Main(append(n.args(), "--uninstall", "--log-format", "text"), io.Discard, &stderr); code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr.String())
		}
		if strings.Contains(stderr.String(), "msg=listening") {
			t.Errorf("--uninstall served:\n%s", stderr.String())
		}
	}
	after := n.snapshot(t)
	old := filepath.Join(n.conf, "20-old.conflist")
	if got, _ := os.ReadFile(old); string(got) != left[old] {
		t.Errorf("%s after --uninstall:\n%s\nwant\n%s", old, got, left[old])
	}
	delete(after, old)
	if !maps.Equal(after, before) {
		t.Errorf("after --uninstall:\n%v\nwant\n%v", slices.Sorted(maps.Values(after)), slices.Sorted(maps.Values(before)))
	}
}

// TestFlags: flags of a data path not chosen, an unknown one, and an
// agent address the redirect cannot use are usage errors (exit 2), each
// naming the flag.
func TestFlags(t *testing.T) {
	for args, want := range map[string]string{
		"--intercept bpf":                              `--intercept "bpf": want host, cni or none`,
		"--intercept host --cni-conf-dir /x":           "--cni-conf-dir is for --intercept cni",
		"--intercept none --agent-address 10.0.0.1:80": "--agent-address: with --intercept none there is nothing to install",
		"--intercept none --uninstall":                 "--uninstall: with --intercept none there is nothing to install",
		// serve's default --listen is 169.254.169.254:80.
		"--intercept host":                                                         "the metadata address itself",
		"--intercept host --listen localhost:8775":                                 "--agent-address (default: the first --listen of each family): no IPv4 address",
		"--intercept host --pod-interfaces eth0,*":                                 `interfaces[1]: "*" matches every interface`,
		"--intercept cni --agent-address [fd00::1]:8775":                           "--agent-address: no IPv4 address",
		"--intercept cni --agent-address 10.0.0.1:1 --agent-address 10.0.0.2:1":    "--agent-address 10.0.0.2:1: one address of each family at most",
		"--intercept host --agent-address 10.0.0.1:1 --agent-address [fe80::1]:80": "[fe80::1]:80 is a link-local IPv6 address",
	} {
		var stderr bytes.Buffer
		code := Main(append(strings.Fields(args), "--instances", t.TempDir()), io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), want) {
			t.Errorf("%s: exit %d:\n%s\nwant 2 and %q", args, code, stderr.String(), want)
		}
	}
}

// TestCNIRechainFollowsRewrite: with the poll an hour away, the agent
// re-chains vminit-cni as soon as the CNI rewrites its conflist
// (inotify), and a runtime's ADD right after that signal (libcni reading
// the conf dir, as containerd and CRI-O do) runs vminit-cni after the
// pod network's plugins. Stub plugins record what the runtime runs.
func TestCNIRechainFollowsRewrite(t *testing.T) {
	n := newNode(t)
	calls := filepath.Join(t.TempDir(), "calls")
	stub := func(name string) []byte {
		return fmt.Appendf(nil, "#!/bin/sh\necho \"%s $CNI_COMMAND\" >>%s\necho '{\"cniVersion\": \"1.0.0\"}'\n", name, calls)
	}
	for path, name := range map[string]string{filepath.Join(n.bin, "bridge"): "bridge", filepath.Join(n.bin, "portmap"): "portmap", n.plugin: pluginType} {
		if err := os.WriteFile(path, stub(name), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, 0o755) // newNode wrote it 0644
	}
	primary := filepath.Join(n.conf, "10-containerd-net.conflist")
	published, _ := os.ReadFile(primary)
	const signal = "msg=\"vminit-node: chained vminit-cni"
	r := startPolling(t, time.Hour, n.args()...)
	if got := strings.Count(r.log.String(), signal); got != 1 || !chained(primary) {
		t.Fatalf("installed: %d chain messages, chained %v:\n%s", got, chained(primary), r.log)
	}

	// The CNI rewrites its file, as its agent does at start: a new file
	// renamed over the old one.
	if err := os.WriteFile(primary+".new", published, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(primary+".new", primary); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "re-chained after the rewrite (its log says so)", func() bool { return strings.Count(r.log.String(), signal) == 2 })

	list := n.runtimeList(t)
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.bin}, t.TempDir(), nil)
	rt := &libcni.RuntimeConf{ContainerID: "sandbox0", NetNS: "/var/run/netns/cni-0", IfName: "eth0",
		Args: [][2]string{{"K8S_POD_NAMESPACE", "vms"}, {"K8S_POD_NAME", "virt-launcher-vm-a-x8k2p"}}}
	if _, err := cni.AddNetworkList(context.Background(), list, rt); err != nil {
		t.Fatalf("ADD right after the agent's signal: %v", err)
	}
	if got, _ := os.ReadFile(calls); string(got) != "bridge ADD\nportmap ADD\nvminit-cni ADD\n" {
		t.Errorf("the runtime's ADD ran:\n%s\nwant bridge, portmap, then vminit-cni", got)
	}
}

// TestNodeIPs: --node-ips (the DaemonSet's status.hostIPs) adds a
// --listen on the node's IPv6 address at the first --listen's port; a
// node without one is said to have no IPv6, and nothing is added; a bad
// list, or no IP:PORT --listen to take the port from, is a usage error.
func TestNodeIPs(t *testing.T) {
	for _, tc := range []struct {
		nodeIPs string
		listen  []string
		want    []string
		err     string
		log     string
	}{
		{"10.0.0.5,fd00::5", []string{"10.0.0.5:8775"}, []string{"10.0.0.5:8775", "[fd00::5]:8775"}, "", ""},
		{"fd00::5,10.0.0.5", []string{"10.0.0.5:8775", "[fd00::5]:8775"}, []string{"10.0.0.5:8775", "[fd00::5]:8775"}, "", ""},
		{"10.0.0.5", []string{"10.0.0.5:8775"}, []string{"10.0.0.5:8775"}, "", "the node has no IPv6 address"},
		{"10.0.0.5,node-1", []string{"10.0.0.5:8775"}, nil, `"node-1" is not an IP address`, ""},
		{"10.0.0.5,fd00::5", nil, nil, "the port comes from the first --listen", ""},
	} {
		cmd := servekit.NewCommand("vminit-node", nil)
		var args []string
		for _, l := range tc.listen {
			args = append(args, "--listen", l)
		}
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		err := (&flags{nodeIPs: tc.nodeIPs}).listenNodeIPv6(cmd.Flags(), slog.New(slog.NewTextHandler(&log, nil)))
		got, _ := cmd.Flags().GetStringArray("listen")
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("--node-ips %s: %v, want %q", tc.nodeIPs, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want) || !strings.Contains(log.String(), tc.log)):
			t.Errorf("--node-ips %s --listen %v: %v, listen %v, log %q; want %v and %q", tc.nodeIPs, tc.listen, err, got, log.String(), tc.want, tc.log)
		}
	}
}
