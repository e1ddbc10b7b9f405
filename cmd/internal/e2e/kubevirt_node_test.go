package e2e

// A KubeVirt guest reaches vminit: the simulated
// KubeVirt node of internal/testing/netsim (virt-launcher pods joined to
// the node by veths, each guest behind KubeVirt's masquerade, a stub of
// the cloud's metadata service beyond the node's default route), VMIs
// and Instances on a real kube-apiserver, vminit's node agent in the
// node's namespace, and the guests' real clients: cloud-init's own Ec2
// (IMDSv2) and OpenStack datasource code, the ignition binary, and
// cloud-init's webhook reporting with the report script the controller's
// Secret carries.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/cmd/internal/controller"
	"github.com/vminit/vminit/deploy/kubernetes/crd"
	"github.com/vminit/vminit/internal/lib/systemd"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/internal/testing/netsim"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/kubestore"
)

// nodeName is the simulated node's Kubernetes name.
const nodeName = "node-1"

// agentAddr is where the node agent listens, as the DaemonSet's --listen
// $(NODE_IP):8775, and on this dual-stack node the IPv6 address its
// --node-ips $(NODE_IPS) (status.hostIPs) adds; adminAddr its admin API, on the node's
// loopback (reached as `kubectl port-forward` would: from the node).
var (
	agentAddr = netip.AddrPortFrom(netsim.NodeAddr, 8775)
	adminAddr = "127.0.0.1:8443"
)

// kvGuest is one simulated KubeVirt VM: its VM, VMI and pod, and the
// Instance it names.
type kvGuest struct {
	vm, instance, spec string
	agent              string // cloud-init or ignition
	bridged            bool   // its pod's veth on the node's bridge cni0
	pod                *netsim.Pod
}

// marker is a path only this guest's Instance writes: what tells one
// guest's data from another's.
func (g *kvGuest) marker() string { return "/etc/vminit-e2e/" + g.instance }

// imdsv2Required is whether g's Instance requires IMDSv2 tokens.
func (g *kvGuest) imdsv2Required() bool { return strings.Contains(g.spec, "imdsv2: required") }

// wrap runs a command in the guest's network namespace.
func (g *kvGuest) wrap() []string { return []string{"ip", "netns", "exec", g.pod.Guest.Name} }

// TestKubeVirtGuestsReachVminit is the proof that a KubeVirt guest reaches vminit, without KubeVirt:
// four VMs on one simulated node, each VMI (labelled with the node,
// naming its Instance, reporting its pod's IP as KubeVirt's
// virt-handler does) on a real API server, the node agent (vminit-node
// --kubernetes --node) in the node's namespace, and the controller
// writing each VM's Secret. Through each data path in turn (vminit's
// nftables table in the node's namespace; vminit-cni run by libcni from
// the pod network's conflist in each pod), each guest's real client
// reads its own Instance at 169.254.169.254 and never another's:
// cloud-init's DataSourceEc2 with an IMDSv2 token (required by one
// Instance), cloud-init's OpenStack metadata-service reader, the
// ignition binary's aws platform; the stub cloud metadata service gets
// no request. Then the controller-seeded guests report their first
// boots with the reporting the controller put in their Secrets: two as
// cloud-init does (cloud-init's own webhook handler, runcmd run by
// cloud-init's runparts, the Secret's report script) through the host
// path, two as Ignition's completion unit does (the config applied by
// the real ignition, the script it wrote run with curl) through the pod
// path: one of each done, the other failed with its command's error, as
// `kubectl get instances`, `vminit instances status` and the web page's
// fleet table show.
func TestKubeVirtGuestsReachVminit(t *testing.T) {
	netsim.Require(t)
	cloudinittest.Require(t)
	testtools.RequireFile(t, ignitiontest.Binary)
	kubetest.Binary(t, "kube-apiserver")
	kubetest.Binary(t, "kubectl")
	bins := buildPrograms(t, "vminit", "vminit-node", "vminit-cni")

	s := kubetest.Start(t)
	s.CreateCRDs(t, crd.Instances)
	s.CreateCRDs(t, kubetest.KubeVirtCRDs)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	dyn := s.Dynamic(t)

	node := netsim.NewNode(t)
	var cloudHits atomic.Int64
	for _, addr := range []string{"169.254.169.254:80", "[fd00:ec2::254]:80"} {
		node.Cloud.Serve(t, addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cloudHits.Add(1)
			io.WriteString(w, "the node's own cloud credentials")
		}))
	}
	guests := []*kvGuest{
		{vm: "vm-a", instance: "web-a", agent: "cloud-init",
			spec: "hostname: web-a\ncommands: [\"echo web-a booted\"]\nmetadataServer: {imdsv2: required}\n"},
		{vm: "vm-b", instance: "web-b", agent: "cloud-init", bridged: true,
			spec: "hostname: web-b\ncommands: [/opt/missing]\n"},
		{vm: "vm-c", instance: "coreos-c", agent: "ignition", spec: "agent: ignition\nhostname: coreos-c\n"},
		{vm: "vm-d", instance: "coreos-d", agent: "ignition", spec: "agent: ignition\nhostname: coreos-d\ncommands: [/opt/missing]\n"},
	}
	cloudInitGuests, ignitionGuests := guests[:2], guests[2:]
	for _, g := range guests {
		g.spec += fmt.Sprintf("files: [{path: %s, content: \"%s\\n\"}]\n", g.marker(), g.instance)
		g.pod = node.AddPod(t, "virt-launcher-"+g.vm+"-x8k2p", g.bridged)
		noDNS(t, g.pod.Guest)
		createObjects(t, ctx, dyn, g)
	}

	// Without vminit, a guest's request goes to the cloud's service (the
	// simulation routes it there), over IPv4 and IPv6: what the
	// interception is for.
	for i, host := range []string{"169.254.169.254", "[fd00:ec2::254]"} {
		if resp, err := guests[0].pod.Guest.Client().Get("http://" + host + "/latest/meta-data/"); err != nil || cloudHits.Load() != int64(i+1) {
			t.Fatalf("before vminit, a guest's GET of %s: %v; want the cloud's answer", host, err)
		} else {
			resp.Body.Close()
		}
	}

	// The controller, as vminit-controller runs it: each VM's Secret,
	// reporting to http://169.254.169.254 (its default).
	ctl, err := controller.New(controller.Config{REST: s.Config(), Namespaces: []string{"default"}, KubeVirt: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctlDone := make(chan error, 1)
	ctlCtx, ctlStop := context.WithCancel(ctx)
	go func() { ctlDone <- ctl.Run(ctlCtx) }()
	t.Cleanup(func() {
		ctlStop()
		if err := <-ctlDone; err != nil {
			t.Errorf("controller: %v", err)
		}
	})

	// The node agent (vminit-node) in the node's namespace, as the
	// DaemonSet runs it on the host network, once for each data path;
	// the API server reached at its address there.
	forwardInto(t, node.NS, strings.TrimPrefix(s.URL, "https://"))
	token := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(token, []byte("e2e-admin-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := []string{"--kubernetes", "--kubeconfig", s.Kubeconfig, "--node", nodeName, "--listen", agentAddr.String(),
		"--node-ips", netsim.NodeAddr.String() + "," + netsim.NodeAddr6.String(),
		"--admin-listen", adminAddr, "--admin-token-file", token, "--log-format", "text"}
	var agent *agentProcess
	for _, path := range []string{"host", "cni"} {
		t.Logf("data path %s", path)
		func() {
			if agent != nil {
				agent.stop(t) // the DaemonSet changed: the old agent removes its interception
			}
			hits := cloudHits.Load()
			switch path {
			case "host":
				agent = startAgent(t, node.NS, bins["vminit-node"], append(serve, "--intercept", "host")...)
			case "cni":
				cni := newCNINode(t)
				agent = startAgent(t, node.NS, bins["vminit-node"], append(serve, "--intercept", "cni",
					"--cni-conf-dir", cni.confDir, "--cni-bin-dir", cni.binDir)...)
				defer cni.add(t, ctx, guests)()
			}
			for _, g := range guests {
				readOwn(t, path, g, guests)
			}
			// The first boots report through both paths: cloud-init's
			// through the one most CNIs take, Ignition's through the
			// pod's own redirect.
			if path == "cni" {
				for _, g := range ignitionGuests {
					reportIgnitionBoot(t, ctx, dyn, g)
					if !regexp.MustCompile(`msg=write instance=default/` + g.instance + ` .* path=` + bootreport.ReportPath + ` status=20\d .* remote=` + g.pod.IP.String() + `:`).MatchString(agent.log.String()) {
						t.Errorf("%s: the agent logs no POST %s from %s", g.vm, bootreport.ReportPath, g.pod.IP)
					}
				}
			}
			if path == "host" {
				for _, g := range cloudInitGuests {
					reportFirstBoot(t, ctx, dyn, g)
					// Both reached the agent as this guest: the webhook's
					// events and the report.
					for _, p := range []string{bootreport.EventsPath, bootreport.ReportPath} {
						if !regexp.MustCompile(`msg=write instance=default/` + g.instance + ` .* path=` + p + ` status=20\d .* remote=` + g.pod.IP.String() + `:`).MatchString(agent.log.String()) {
							t.Errorf("%s: the agent logs no POST %s from %s", g.vm, p, g.pod.IP)
						}
					}
				}
			}
			if n := cloudHits.Load() - hits; n != 0 {
				t.Errorf("%s path: the cloud's metadata service was reached %d times from the guests", path, n)
			}
		}()
	}
	if t.Failed() {
		t.Logf("the agent's log:\n%s", agent.log)
	}

	// What the operator sees: done for web-a and coreos-c, failed for
	// web-b and coreos-d with their commands' errors.
	want := map[string]string{"web-a": "done", "web-b": "failed", "coreos-c": "done", "coreos-d": "failed"}
	out, err := s.Kubectl(t, "get", "instances", "-n", "default")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get instances:\n%s", out)
	for name, state := range want {
		if !regexp.MustCompile(`(?m)^` + name + `\s.*\s` + state + `\s`).MatchString(out) {
			t.Errorf("kubectl get instances: no row %s with First-Boot %s:\n%s", name, state, out)
		}
	}
	// The agent of the cni path started after the reports: it reads
	// them back from the Instances' status.
	var status string
	if err := eventually(func() error {
		status = runIn(t, node.NS, bins["vminit"], "instances", "status", "--server", "http://"+adminAddr, "--token-file", token)
		for name, state := range want {
			if !regexp.MustCompile(`(?m)^default/` + name + `\s+\S+\s+` + state + `\b`).MatchString(status) {
				return fmt.Errorf("no row default/%s %s", name, state)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("vminit instances status (the node agent's admin API): %v", err)
	}
	t.Logf("vminit instances status (the node agent's admin API):\n%s", status)
	if detail := runIn(t, node.NS, bins["vminit"], "instances", "status", "default/web-b", "--server", "http://"+adminAddr, "--token-file", token); !strings.Contains(detail, "/opt/missing") {
		t.Errorf("vminit instances status web-b does not show its command's error:\n%s", detail)
	}
	cluster := runIn(t, nil, bins["vminit"], "instances", "status", "--kubeconfig", s.Kubeconfig, "-n", "default")
	t.Logf("vminit instances status --kubeconfig (the Instances' status):\n%s", cluster)
	for _, name := range []string{"web-a", "web-b"} {
		if !regexp.MustCompile(`(?m)^default/` + name + `\s+cloud-init\s+` + want[name] + `\b`).MatchString(cluster) {
			t.Errorf("vminit instances status --kubeconfig: no row default/%s %s", name, want[name])
		}
	}
	page := uiPage(t, node.NS, token, "/ui/")
	for name, state := range want {
		if !strings.Contains(page, fmt.Sprintf(`<tr data-name="default/%s" data-state="%s">`, name, state)) {
			t.Errorf("/ui/: no fleet row default/%s in state %s", name, state)
		}
	}
	if !strings.Contains(page, "Runparts") {
		t.Errorf("/ui/ does not show web-b's error:\n%s", page)
	}
	if page := uiPage(t, node.NS, token, "/ui/instances/"+url.PathEscape("default/web-b")); !strings.Contains(page, "/opt/missing") {
		t.Errorf("web-b's page does not show its command's error:\n%s", page)
	}
}

// createObjects creates g's Instance, its VM naming it, and its VMI as
// KubeVirt makes one: named after the VM, the VM's annotation copied,
// labelled with the node, its pod network reporting the pod's IP.
func createObjects(t *testing.T, ctx context.Context, dyn dynamic.Interface, g *kvGuest) {
	t.Helper()
	var sp map[string]any
	if err := yaml.Unmarshal([]byte(g.spec), &sp); err != nil {
		t.Fatal(err)
	}
	inst := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance",
		"metadata": map[string]any{"name": g.instance}, "spec": sp}}
	if _, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Create(ctx, inst, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{v1alpha1.AnnotationInstance: g.instance}
	vm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": g.vm, "namespace": "default"},
		"spec":     map[string]any{"runStrategy": "Always", "template": map[string]any{"spec": map[string]any{"domain": map[string]any{"devices": map[string]any{}}}}}}}
	vm.SetAnnotations(names)
	vm, err := dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default").Create(ctx, vm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vmis := dyn.Resource(v1alpha1.KubeVirtVirtualMachineInstances).Namespace("default")
	vmi := kubetest.VMI("default", g.vm, names)
	vmi.SetLabels(map[string]string{kubestore.LabelNodeName: nodeName})
	yes := true
	vmi.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: g.vm, UID: vm.GetUID(), Controller: &yes}})
	vmi, err = vmis.Create(ctx, vmi, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedField(vmi.Object, nodeName, "status", "nodeName")
	unstructured.SetNestedField(vmi.Object, "Running", "status", "phase")
	// A dual-stack pod, its guest running no guest agent: both of the
	// pod's addresses, as virt-handler reports them.
	unstructured.SetNestedSlice(vmi.Object, []any{kubetest.VMIInterface("default", kubetest.InfoSourceDomain, g.pod.IP.String(), g.pod.IP6.String())}, "status", "interfaces")
	if _, err := vmis.UpdateStatus(ctx, vmi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ec2Read is what cloudinittest.Ec2Client tells of its read.
type ec2Read struct {
	OK       bool   `json:"ok"`
	Hostname string `json:"hostname"`
	Userdata string `json:"userdata"`
	Token    bool   `json:"token"`
}

// readOwn has g's real clients read 169.254.169.254 from its guest
// namespace, and checks each reads g's Instance and nothing of the
// others'.
func readOwn(t *testing.T, path string, g *kvGuest, all []*kvGuest) {
	t.Helper()
	who := path + " path, " + g.vm // in messages
	var seen []string              // what the clients read, checked for the others' markers
	switch g.agent {
	case "cloud-init":
		var ec2 ec2Read
		in := map[string]any{"base": "http://169.254.169.254", "src": "0.0.0.0", "aws": true}
		// Eventually: the agent follows the VMIs and their Instances.
		if err := eventually(func() error {
			if err := cloudinittest.RunIn(t, g.wrap(), cloudinittest.Ec2Client, in, &ec2); err != nil {
				return err
			}
			if !ec2.OK || ec2.Hostname != g.instance {
				return fmt.Errorf("read %+v", ec2)
			}
			return nil
		}); err != nil {
			t.Errorf("%s: cloud-init's DataSourceEc2 at 169.254.169.254: %v; want its own Instance %s", who, err, g.instance)
		}
		if !ec2.Token {
			t.Errorf("%s: cloud-init's DataSourceEc2 read without an IMDSv2 token", who)
		}
		if !strings.Contains(ec2.Userdata, g.marker()) {
			t.Errorf("%s: Ec2 user data lacks %s:\n%s", who, g.marker(), ec2.Userdata)
		}
		// Over IPv6: EC2's fd00:ec2::254, one of cloud-init's own
		// metadata_urls, through KubeVirt's IPv6 masquerade; the agent
		// knows the guest by its pod's IPv6 address (the VMI's second), so
		// its own hostname proves it.
		var ec26 ec2Read
		in6 := map[string]any{"base": "http://[fd00:ec2::254]", "src": "::", "aws": true}
		if err := cloudinittest.RunIn(t, g.wrap(), cloudinittest.Ec2Client, in6, &ec26); err != nil || !ec26.OK || !ec26.Token || ec26.Hostname != g.instance {
			t.Errorf("%s: cloud-init's DataSourceEc2 at [fd00:ec2::254]: %v, %+v; want its own Instance %s with an IMDSv2 token", who, err, ec26, g.instance)
		}
		seen = append(seen, ec26.Userdata, ec26.Hostname)
		var ost struct {
			Metadata map[string]any `json:"metadata"`
			Userdata string         `json:"userdata"`
		}
		err := cloudinittest.RunIn(t, g.wrap(), cloudinittest.OpenStackClient, map[string]any{"base": "http://169.254.169.254", "src": "0.0.0.0"}, &ost)
		switch {
		case g.imdsv2Required():
			// Required: the dialects without a token are refused.
			if err == nil || !strings.Contains(err.Error(), "NonReadable") {
				t.Errorf("%s: cloud-init's OpenStack reader, IMDSv2 required: %v, %+v; want it refused", who, err, ost)
			}
		case err != nil:
			t.Errorf("%s: cloud-init's OpenStack reader at 169.254.169.254: %v", who, err)
		case ost.Metadata["hostname"] != g.instance || !strings.Contains(ost.Userdata, g.marker()):
			t.Errorf("%s: cloud-init's OpenStack reader read hostname %v and user data\n%s\nwant %s's", who, ost.Metadata["hostname"], ost.Userdata, g.instance)
		}
		seen = append(seen, ec2.Userdata, ec2.Hostname, ost.Userdata, fmt.Sprint(ost.Metadata))
	case "ignition":
		var cache string
		if err := eventually(func() (err error) {
			cache, err = ignitiontest.FetchIn(t, g.wrap(), "aws")
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				return fmt.Errorf("%v\n%s", err, lastLines(ee.Stderr, 20))
			}
			return err
		}); err != nil {
			t.Errorf("%s: ignition -platform aws: %v", who, err)
		}
		if !strings.Contains(cache, g.marker()) {
			t.Errorf("%s: the config ignition fetched lacks %s:\n%s", who, g.marker(), cache)
		}
		seen = append(seen, cache)
	}
	for _, other := range all {
		if other == g {
			continue
		}
		for _, s := range seen {
			if strings.Contains(s, other.instance) {
				t.Errorf("%s read %s's data:\n%s", who, other.instance, s)
			}
		}
	}
}

// eventually retries f for up to 30 s, while the agent catches up with
// the objects just created; the last error if it never succeeds.
func eventually(f func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// pyFirstBoot is a cloud-init first boot's reporting, in the guest, with
// cloud-init's own code: the user data (the controller's Secret) merged
// as first boot merges it; its reporting config given to cloud-init's
// reporting (the webhook handler); the stages' event stacks as cloud-init
// runs them, with runcmd written (util.shellify, as cc_runcmd does) and
// run by subp.runparts (as cc_scripts_user does), its output in
// cloud-init-output.log; status.json and result.json written as
// cloud-init's status_wrapper writes them (an error is str() of the
// (module, exception) pair); then the report script the user data
// carries, run with its unit's URL.
const pyFirstBoot = cloudinittest.FinalConfig + `
import json, os, re, subprocess, sys
from cloudinit import reporting, subp, util
from cloudinit.config import cc_write_files as wf
from cloudinit.reporting import events
inp = json.load(sys.stdin)
root = inp["root"]
cfg, _ = final_config(base64.b64decode(inp["userdata"]))
files = {f["path"]: wf.extract_contents(f.get("content", ""), wf.canonicalize_extraction(f.get("encoding")))
         for f in cfg.get("write_files") or []}
reporting.update_configuration(cfg["reporting"])

def stage(name, modules):
    errors = []
    with events.ReportEventStack(name, "running " + name, reporting_enabled=True) as parent:
        for mod, run in modules:
            try:
                with events.ReportEventStack("config-" + mod, "running config-" + mod, parent=parent):
                    run()
            except Exception as e:
                errors.append(str((mod, e)))
    return errors

scripts = root + "/var/lib/cloud/instance/scripts"
os.makedirs(scripts)
os.makedirs(root + "/var/log")
os.makedirs(root + "/run/cloud-init")
def runcmd():
    util.write_file(scripts + "/runcmd", util.shellify(cfg["runcmd"]), 0o700)
def scripts_user():
    # cloud-init-output.log gets the commands' output, as cloud-init's
    # output redirection does.
    out = os.open(root + "/var/log/cloud-init-output.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    saved = os.dup(1), os.dup(2)
    os.dup2(out, 1); os.dup2(out, 2)
    try:
        subp.runparts(scripts)
    finally:
        os.dup2(saved[0], 1); os.dup2(saved[1], 2)
v1 = {"datasource": "DataSourceEc2", "stage": None}
v1["init-network"] = {"errors": stage("init-network", [("runcmd", runcmd)])}
v1["modules-final"] = {"errors": stage("modules-final", [("scripts-user", scripts_user)])}
reporting.flush_events()
errors = v1["init-network"]["errors"] + v1["modules-final"]["errors"]
with open(root + "/run/cloud-init/status.json", "w") as f:
    json.dump({"v1": v1}, f)
with open(root + "/run/cloud-init/result.json", "w") as f:
    json.dump({"v1": {"datasource": "DataSourceEc2", "errors": errors}}, f)

script = root + "/report.py"
with open(script, "wb") as f:
    f.write(files[inp["script"]] if isinstance(files[inp["script"]], bytes) else files[inp["script"]].encode())
unit = files[inp["unit"]]
url = re.search(r'Environment="VMINIT_REPORT_URL=([^"]+)"', unit if isinstance(unit, str) else unit.decode()).group(1)
p = subprocess.run([sys.executable, script], capture_output=True, text=True,
                   env={"VMINIT_REPORT_URL": url, "VMINIT_REPORT_TEST_ROOT": root, "VMINIT_REPORT_TEST_DELAY": "0"})
json.dump({"webhook": cfg["reporting"]["vminit"]["endpoint"], "report_url": url, "errors": errors,
           "report_exit": p.returncode, "report_stderr": p.stderr}, sys.stdout)
`

// reportFirstBoot runs g's first boot's reporting in its guest namespace
// (pyFirstBoot) with the user data of its VM's Secret, and waits for its
// Instance's status.firstBoot to reach the end its commands give: done,
// or failed with the failing command's error.
func reportFirstBoot(t *testing.T, ctx context.Context, dyn dynamic.Interface, g *kvGuest) {
	t.Helper()
	kube := corev1Secrets(t, ctx, dyn, g.vm+"-vminit")
	var out struct {
		Webhook      string   `json:"webhook"`
		ReportURL    string   `json:"report_url"`
		Errors       []string `json:"errors"`
		ReportExit   int      `json:"report_exit"`
		ReportStderr string   `json:"report_stderr"`
	}
	root := t.TempDir()
	if err := cloudinittest.RunIn(t, g.wrap(), pyFirstBoot, map[string]any{"userdata": base64.StdEncoding.EncodeToString(kube),
		"root": root, "script": cloudinit.ReportScript, "unit": path.Join(systemd.UnitDir, bootreport.ReportUnit)}, &out); err != nil {
		t.Fatalf("%s: cloud-init's first boot: %v", g.vm, err)
	}
	if out.Webhook != bootreport.EventsURL(controller.DefaultReportURL) || out.ReportURL != bootreport.ReportURL(controller.DefaultReportURL) {
		t.Errorf("%s: reports to %s and %s, want the node agent's 169.254.169.254", g.vm, out.Webhook, out.ReportURL)
	}
	if out.ReportExit != 0 || out.ReportStderr != "" {
		t.Errorf("%s: the report script: exit %d\n%s", g.vm, out.ReportExit, out.ReportStderr)
	}
	failing := strings.Contains(g.spec, "/opt/missing")
	if failing != (len(out.Errors) > 0) {
		t.Errorf("%s: cloud-init's errors %q", g.vm, out.Errors)
	}
	fb := waitFirstBoot(t, ctx, dyn, g.instance)
	switch {
	case !failing && fb.State != string(firstboot.Done):
		t.Errorf("%s: status.firstBoot %+v, want done", g.instance, fb)
	case failing && (fb.State != string(firstboot.Failed) || len(fb.Errors) == 0 ||
		!strings.Contains(fb.Errors[0].Message, "Runparts: 1 failures (runcmd)") || !strings.Contains(fb.Errors[0].Message, "/opt/missing")):
		t.Errorf("%s: status.firstBoot %+v, want failed with runcmd's error", g.instance, fb)
	}
}

// reportIgnitionBoot applies g's VM's Secret (its Ignition config) with
// the real ignition, then runs the completion unit's script it wrote,
// with that unit's URL, in g's guest namespace, and waits for g's
// Instance's status.firstBoot: done, or failed naming the unit that
// failed and its journal. No systemd runs here: systemctl and journalctl
// are stubs that say how the boot ended, as systemd would (the failing
// guest's vminit-first-boot.service failed on its command /opt/missing).
// The request goes out as the script sends it, with curl, through the
// masquerade and the interception; the agent must know the guest by its
// pod's IP.
func reportIgnitionBoot(t *testing.T, ctx context.Context, dyn dynamic.Interface, g *kvGuest) {
	t.Helper()
	cfg := corev1Secrets(t, ctx, dyn, g.vm+"-vminit")
	root := ignitiontest.Apply(t, cfg)
	if unit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system", bootreport.ReportUnit)); ignitiontest.ReportURL(unit) != bootreport.ReportURL(controller.DefaultReportURL) {
		t.Errorf("%s: the completion unit reports to %q, want the node agent's 169.254.169.254", g.vm, ignitiontest.ReportURL(unit))
	}
	failing := strings.Contains(g.spec, "/opt/missing")
	boot := ignitiontest.Boot{State: "running", Wrap: g.wrap()}
	if failing {
		boot.State = "degraded"
		boot.Failed = []ignitiontest.FailedUnit{{Unit: "vminit-first-boot.service",
			Journal: "vminit-first-boot.sh[812]: vminit: command 1 failed (exit 127): /opt/missing: No such file or directory\nsystemd[1]: vminit-first-boot.service: Failed with result 'exit-code'."}}
	}
	ignitiontest.RunReport(t, root, boot)
	fb := waitFirstBoot(t, ctx, dyn, g.instance)
	switch {
	case fb.Agent != "ignition":
		t.Errorf("%s: status.firstBoot %+v, want an Ignition report", g.instance, fb)
	case !failing && fb.State != string(firstboot.Done):
		t.Errorf("%s: status.firstBoot %+v, want done", g.instance, fb)
	case failing && (fb.State != string(firstboot.Failed) || len(fb.Errors) == 0 ||
		!strings.Contains(fmt.Sprint(fb.Errors), "vminit-first-boot.service") || !strings.Contains(fmt.Sprint(fb.Errors), "/opt/missing")):
		t.Errorf("%s: status.firstBoot %+v, want failed naming vminit-first-boot.service and /opt/missing", g.instance, fb)
	}
}

// corev1Secrets waits for the Secret name the controller writes and
// returns its user data.
func corev1Secrets(t *testing.T, ctx context.Context, dyn dynamic.Interface, name string) []byte {
	t.Helper()
	res := dyn.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace("default")
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err
			continue
		}
		var sec corev1.Secret
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sec); err != nil {
			t.Fatal(err)
		}
		if len(sec.Data["userdata"]) > 0 {
			return sec.Data["userdata"]
		}
	}
	t.Fatalf("the controller wrote no Secret %s: %v", name, last)
	return nil
}

// waitFirstBoot waits until the Instance's status.firstBoot has ended
// (done or failed), and returns it.
func waitFirstBoot(t *testing.T, ctx context.Context, dyn dynamic.Interface, name string) *v1alpha1.FirstBoot {
	t.Helper()
	res := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default")
	var last *v1alpha1.FirstBoot
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		m, _, _ := unstructured.NestedMap(u.Object, "status", "firstBoot")
		fb := &v1alpha1.FirstBoot{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, fb) == nil {
			last = fb
			if fb.State == string(firstboot.Done) || fb.State == string(firstboot.Failed) {
				return fb
			}
		}
	}
	t.Fatalf("%s: status.firstBoot never ended; last %+v", name, last)
	return nil
}

// uiPage is a page of the web UI (/ui/: the fleet table), as a browser
// on the node (or through kubectl port-forward) gets it with the admin
// token.
func uiPage(t *testing.T, n *netsim.NS, tokenFile, path string) string {
	t.Helper()
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+adminAddr+path, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := n.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", path, resp.Status, err, b)
	}
	return string(b)
}

// buildPrograms builds the commands under cmd/ named into a directory of
// the test's, once per test, and returns their paths by name.
func buildPrograms(t *testing.T, names ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := map[string]string{}
	args := []string{"build", "-o", dir + "/"}
	for _, n := range names {
		args = append(args, "github.com/vminit/vminit/cmd/"+n)
		out[n] = filepath.Join(dir, n)
	}
	if b, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

// agentProcess is the node agent, run in the node's namespace.
type agentProcess struct {
	cmd     *exec.Cmd
	log     *testtools.SyncBuffer
	done    chan error
	stopped bool
}

// startAgent runs bin with args in n (ip netns exec, as a DaemonSet's pod
// on the host network), waits until its guests' and admin listeners
// listen, and stops it (SIGTERM) when the test ends.
func startAgent(t *testing.T, n *netsim.NS, bin string, args ...string) *agentProcess {
	t.Helper()
	p := &agentProcess{log: &testtools.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", n.Name, bin}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	for deadline := time.Now().Add(time.Minute); strings.Count(p.log.String(), "msg=listening") < 2; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the agent exited (%v):\n%s", err, p.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent does not listen:\n%s", p.log)
		}
	}
	return p
}

// stop stops the agent as kubelet stops a pod (SIGTERM), once, and
// fails the test unless it exits 0.
func (p *agentProcess) stop(t *testing.T) {
	t.Helper()
	if p.stopped {
		return
	}
	p.stopped = true
	p.cmd.Process.Signal(syscall.SIGTERM) // ip netns exec execs: the process is the agent
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("the agent after SIGTERM: %v\n%s", err, p.log)
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("the agent did not stop on SIGTERM:\n%s", p.log)
	}
}

// runIn runs bin with args (in n's namespace, unless n is nil) and
// returns its standard output; it fails the test on an error.
func runIn(t *testing.T, n *netsim.NS, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if n != nil {
		cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, bin}, args...)...)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// forwardInto makes addr, a TCP address of this (the test's) namespace,
// reachable at the same address inside n: the API server, which a node
// agent on the host network reaches at its own address.
func forwardInto(t *testing.T, n *netsim.NS, addr string) {
	t.Helper()
	l := n.Listen(t, addr)
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				in.Close()
				continue
			}
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				io.Copy(dst, src)
				dst.(*net.TCPConn).CloseWrite()
			}
			go pipe(out, in)
			go pipe(in, out)
			context.AfterFunc(t.Context(), func() { in.Close(); out.Close() })
		}
	}()
}

// cniNode is the node's CNI directories: the pod network's conflist
// (netsim's stand-in plugin) that vminit-node chains vminit-cni into.
type cniNode struct{ dir, confDir, binDir string }

func newCNINode(t *testing.T) *cniNode {
	t.Helper()
	dir := t.TempDir()
	n := &cniNode{dir: dir, confDir: filepath.Join(dir, "net.d"), binDir: filepath.Join(dir, "bin")}
	netsim.InstallPodNetwork(t, n.binDir)
	if err := os.MkdirAll(n.confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.confDir, "10-pod-network.conflist"), fmt.Appendf(nil,
		`{"cniVersion": "1.0.0", "name": "k8s-pod-network", "plugins": [{"type": %q}]}`, netsim.PodNetworkType), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// add runs the ADD of each guest's pod with the node's conflist (the
// first in the directory, as runtimes pick it; vminit-node has chained
// vminit-cni in it), through libcni as containerd and CRI-O do, and
// returns the pods' DEL.
func (n *cniNode) add(t *testing.T, ctx context.Context, guests []*kvGuest) (del func()) {
	t.Helper()
	files, err := libcni.ConfFiles(n.confDir, []string{".conf", ".conflist", ".json"})
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: %v %v", n.confDir, files, err)
	}
	slices.Sort(files)
	list, err := libcni.NetworkConfFromFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if types := listTypes(list); !slices.Equal(types, []string{netsim.PodNetworkType, "vminit-cni"}) {
		t.Fatalf("the node's conflist runs %v; want vminit-cni chained after the pod network", types)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.binDir}, filepath.Join(n.dir, "cache"), nil)
	var rts []*libcni.RuntimeConf
	for i, g := range guests {
		rt := &libcni.RuntimeConf{ContainerID: fmt.Sprintf("sandbox%d", i), NetNS: g.pod.NS.Path(), IfName: "eth0", Args: [][2]string{
			{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", g.pod.Name}}}
		g.pod.Result(t, n.binDir, rt.ContainerID)
		if _, err := cni.AddNetworkList(ctx, list, rt); err != nil {
			t.Fatalf("%s: ADD: %v", g.pod.Name, err)
		}
		rts = append(rts, rt)
	}
	return func() {
		for i, rt := range rts {
			if err := cni.DelNetworkList(ctx, list, rt); err != nil {
				t.Errorf("%s: DEL: %v", guests[i].pod.Name, err)
			}
		}
	}
}

// listTypes are the plugin types of a conflist, in order.
func listTypes(list *libcni.NetworkConfigList) []string {
	var out []string
	for _, p := range list.Plugins {
		out = append(out, p.Network.Type)
	}
	return out
}

// noDNS makes this machine's name servers unreachable from n at once:
// the simulation has no cluster DNS, and cloud-init's Ec2 datasource
// resolves names (util.is_resolvable_url's check for a redirecting
// resolver) before it reads the metadata service; a query lost beyond
// the node would cost it the resolver's timeouts, seconds each.
func noDNS(t *testing.T, n *netsim.NS) {
	t.Helper()
	conf, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return // no name server to wait for
	}
	for _, line := range strings.Split(string(conf), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if a, err := netip.ParseAddr(f[1]); err == nil && a.Is4() && !a.IsLoopback() {
			n.IP(t, "route", "add", "unreachable", a.String()+"/32")
		}
	}
}
