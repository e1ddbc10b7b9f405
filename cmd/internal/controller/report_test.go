package controller_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/cmd/internal/controller"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/lib/systemd"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/kubestore"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// pyGuestView is what cloud-init makes of a user data on first boot (its
// user-data processing and cloud-config merge): the reporting handlers,
// and the files write_files writes, decoded.
const pyGuestView = cloudinittest.FinalConfig + `
import json, sys
from cloudinit.config import cc_write_files as wf
cfg, _ = final_config(base64.b64decode(json.load(sys.stdin)))
files = {}
for f in cfg.get("write_files") or []:
    files[f["path"]] = b64(wf.extract_contents(f.get("content", ""), wf.canonicalize_extraction(f.get("encoding"))))
json.dump({"reporting": cfg.get("reporting"), "files": files}, sys.stdout)
`

type guestView struct {
	Reporting map[string]map[string]any `json:"reporting"`
	Files     map[string][]byte         `json:"files"`
}

// viewOf runs pyGuestView on userData.
func viewOf(t *testing.T, userData []byte) guestView {
	t.Helper()
	var v guestView
	cloudinittest.Run(t, pyGuestView, userData, &v)
	return v
}

// reportUnitURL is the report URL a report unit hands its script.
func reportUnitURL(unit []byte) string { return ignitiontest.ReportURL(unit) }

var cloudInitUnit = path.Join(systemd.UnitDir, bootreport.ReportUnit)

// checkCloudInitReport checks, with cloud-init's own code, that user
// data reports to base: the webhook posts the events there, the unit
// the report (its script as cloudinit renders it); and that it passes
// cloud-init's schema, ours and `cloud-init schema`'s.
func checkCloudInitReport(t *testing.T, userData []byte, base string) guestView {
	t.Helper()
	if findings, err := cloudinit.CheckSchema(userData); err != nil || len(findings) > 0 {
		t.Errorf("schema: %v %v", findings, err)
	}
	if err := cloudinittest.Schema(t, userData); err != nil {
		t.Errorf("cloud-init schema: %v", err)
	}
	v := viewOf(t, userData)
	if hook := v.Reporting["vminit"]; hook["type"] != "webhook" || hook["endpoint"] != bootreport.EventsURL(base) {
		t.Errorf("reporting %v, want a webhook to %s", v.Reporting, bootreport.EventsURL(base))
	}
	if got := reportUnitURL(v.Files[cloudInitUnit]); got != bootreport.ReportURL(base) {
		t.Errorf("the report unit posts to %q, want %q:\n%s", got, bootreport.ReportURL(base), v.Files[cloudInitUnit])
	}
	if len(v.Files[cloudinit.ReportScript]) == 0 || len(v.Files[cloudinit.ReportTrigger]) == 0 {
		t.Errorf("no report script or trigger among %d files", len(v.Files))
	}
	return v
}

// TestSecretsReport: the Secret of a VM naming a cloud-init Instance
// carries cloud-init's reporting webhook and the report unit, pointed at
// the node agent's 169.254.169.254; that of a VM naming an Ignition
// Instance the completion unit, which ignition-validate accepts and the
// real ignition writes. The bytes are those `vminit build --report-to`
// renders, and reconciles leave them as they are. A VM with cloud-init
// data of its own and no Instance reports nowhere: no server knows it.
func TestSecretsReport(t *testing.T) {
	e := setup(t, true)
	c := e.run(t, controller.Config{Namespaces: []string{"default"}, KubeVirt: true})
	const webSpec, coreosSpec = "hostname: web\ncommands: [\"true\"]\n", "agent: ignition\nhostname: coreos\n"
	e.create(t, "default", "web", webSpec)
	e.create(t, "default", "coreos", coreosSpec)
	e.vm(t, "vm-ci", map[string]string{v1alpha1.AnnotationInstance: "web"})
	e.vm(t, "vm-ign", map[string]string{v1alpha1.AnnotationInstance: "coreos"})
	e.vm(t, "vm-own", nil, map[string]any{"name": "ci", "cloudInitNoCloud": map[string]any{"userData": "#cloud-config\nruncmd: [echo own]\n"}})
	exists := func(*corev1.Secret) bool { return true }
	ci, ign, own := e.waitSecret(t, "vm-ci-vminit", exists), e.waitSecret(t, "vm-ign-vminit", exists), e.waitSecret(t, "vm-own-vminit", exists)

	const base = controller.DefaultReportURL
	ud := ci.Data["userdata"]
	sd, err := seed.Build(parse(t, "web", webSpec), seed.NoCloud, seed.Options{ReportTo: base})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := sd.Lookup("user-data"); !bytes.Equal(ud, want) {
		t.Errorf("vm-ci's user data is not what `vminit build --report-to %s` renders:\n%s", base, ud)
	}
	checkCloudInitReport(t, ud, base)

	cfg := ign.Data["userdata"]
	res, err := ignition.Render(parse(t, "coreos", coreosSpec), ignition.Options{ReportTo: base})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cfg, res.Config) {
		t.Errorf("vm-ign's config is not what `vminit build --report-to %s` renders:\n%s", base, cfg)
	}
	checkIgnitionReport(t, cfg, base)

	if own := own.Data["userdata"]; !bytes.Contains(own, []byte("echo own")) || bytes.Contains(own, []byte(bootreport.EventsPath)) || bytes.Contains(own, []byte(bootreport.ReportUnit)) {
		t.Errorf("a VM naming no Instance reports:\n%s", own)
	}

	// Reconciles (a label on each VM) write nothing: the same bytes.
	waitFor(t, "the queue drained", func() bool { return metric(t, c, "vminit_controller_queue_depth") == "0" })
	writes := metric(t, c, `vminit_controller_writes_total{object="secret"}`)
	for _, n := range []string{"vm-ci", "vm-ign"} {
		vm, _ := e.dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default").Get(e.ctx, n, metav1.GetOptions{})
		vm.SetLabels(map[string]string{"touched": "yes"})
		if _, err := e.dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace("default").Update(e.ctx, vm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the relabelled VMs reconciled", func() bool { return metric(t, c, "vminit_controller_queue_depth") == "0" })
	time.Sleep(200 * time.Millisecond)
	if got := metric(t, c, `vminit_controller_writes_total{object="secret"}`); got != writes {
		t.Errorf("Secret writes %s → %s without a change", writes, got)
	}
	for _, s := range []*corev1.Secret{ci, ign} {
		if now, _ := e.secret(s.Name); now.ResourceVersion != s.ResourceVersion {
			t.Errorf("%s rewritten without a change", s.Name)
		}
	}
}

// checkIgnitionReport: the config carries the completion unit posting to
// base, which ignition-validate accepts and the real ignition writes.
func checkIgnitionReport(t *testing.T, cfg []byte, base string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "config.ign")
	if err := os.WriteFile(f, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(testtools.Require(t, "ignition-validate"), f).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("ignition-validate: %v\n%s", err, out)
	}
	root := ignitiontest.Apply(t, cfg)
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system", bootreport.ReportUnit))
	if err != nil || reportUnitURL(unit) != bootreport.ReportURL(base) {
		t.Errorf("the completion unit as ignition wrote it (%v), want it posting to %s:\n%s", err, bootreport.ReportURL(base), unit)
	}
	if st, err := os.Stat(filepath.Join(root, ignition.ReportScript)); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("%s: %v", ignition.ReportScript, err)
	}
	return root
}

func parse(t *testing.T, name, specYAML string) *spec.Instance {
	t.Helper()
	doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: " + name + "}\nspec:\n  " +
		strings.ReplaceAll(strings.TrimSpace(specYAML), "\n", "\n  ") + "\n"
	inst, err := spec.Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestSecretsReportFlags: Config.ReportURL points the report at another
// server; NoBootReports leaves it out; and a controller started again
// with the other setting rewrites the Secret (as a restart with a changed
// --boot-reports or --report-url does).
func TestSecretsReportFlags(t *testing.T) {
	e := setup(t, true)
	const base = "http://192.0.2.7:8080"
	_, stop := e.start(t, controller.Config{Namespaces: []string{"default"}, KubeVirt: true, ReportURL: base + "/"})
	e.create(t, "default", "web", "hostname: web\n")
	e.create(t, "default", "coreos", "agent: ignition\nhostname: coreos\n")
	e.vm(t, "vm-ci", map[string]string{v1alpha1.AnnotationInstance: "web"})
	e.vm(t, "vm-ign", map[string]string{v1alpha1.AnnotationInstance: "coreos"})
	reports := func(s *corev1.Secret) bool { return bytes.Contains(s.Data["userdata"], []byte(bootreport.ReportUnit)) }
	ci := e.waitSecret(t, "vm-ci-vminit", reports)
	checkCloudInitReport(t, ci.Data["userdata"], base)
	ign := e.waitSecret(t, "vm-ign-vminit", reports)
	if !bytes.Contains(ign.Data["userdata"], []byte(bootreport.ReportURL(base))) {
		t.Errorf("vm-ign's config does not report to %s:\n%s", base, ign.Data["userdata"])
	}
	stop()

	// Off: the Secrets are rewritten without the report.
	_, stop = e.start(t, controller.Config{Namespaces: []string{"default"}, KubeVirt: true, NoBootReports: true})
	silent := func(s *corev1.Secret) bool {
		ud := s.Data["userdata"]
		return !bytes.Contains(ud, []byte(bootreport.ReportUnit)) && !bytes.Contains(ud, []byte(bootreport.EventsPath))
	}
	ci = e.waitSecret(t, "vm-ci-vminit", silent)
	if v := viewOf(t, ci.Data["userdata"]); v.Reporting != nil || v.Files[cloudInitUnit] != nil {
		t.Errorf("with reports off, cloud-init reads reporting %v and files %v", v.Reporting, v.Files)
	}
	e.waitSecret(t, "vm-ign-vminit", silent)
	stop()

	// On again, at the default: the node agent's address.
	e.run(t, controller.Config{Namespaces: []string{"default"}, KubeVirt: true})
	ci = e.waitSecret(t, "vm-ci-vminit", reports)
	checkCloudInitReport(t, ci.Data["userdata"], controller.DefaultReportURL)
}

// TestReportURLRefused: a ReportURL the guests could not use is refused
// by New, naming it.
func TestReportURLRefused(t *testing.T) {
	for _, u := range []string{"169.254.169.254", "ftp://h/", "http://u:p@h/", "http://h/?q=1"} {
		_, err := controller.New(controller.Config{REST: &rest.Config{Host: "http://127.0.0.1:1"}, ReportURL: u})
		if err == nil || !strings.Contains(err.Error(), "ReportURL") {
			t.Errorf("%q: %v", u, err)
		}
	}
}

// TestFirstBootReported, without KubeVirt: the metadata server as `vminit
// serve --kubernetes` composes it (kubestore, the handler, its tracker
// persisting to the Instances' status) answers on loopback, where the
// VMIs' pod-network addresses are 127.0.0.x, the addresses a guest's
// packets leave its virt-launcher pod with (KubeVirt's masquerade). The
// controller, told that server's URL (--report-url), writes each VM's
// Secret; what the guests run is taken from those Secrets as cloud-init
// and the real ignition write it: cloud-init's webhook event posted to
// the endpoint of its reporting config, and the report scripts run by
// python3 and bash from their guest's address to the URL of their unit.
// The Instances' status.firstBoot becomes done for a clean boot, failed
// with the module and its error for a failing one, done for an Ignition
// boot whose system is running.
func TestFirstBootReported(t *testing.T) {
	cloudinittest.Require(t)
	testtools.Require(t, "curl")
	e := setup(t, true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	discard := quiet()
	opts := mdserver.Options{AllowLoopbackInstances: true, Logger: discard, Boots: firstboot.New(firstboot.Options{})}
	st, err := kubestore.Open(e.ctx, kubestore.Config{REST: e.s.Config(), Namespaces: []string{"default"}, KubeVirt: true,
		Checks: mdserver.StoreChecks(opts), Logger: discard, BootWriteEvery: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mdserver.NewHandler(st, opts), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	ctx, cancel := context.WithCancel(e.ctx)
	persisted := make(chan struct{})
	go func() { opts.Boots.Persist(ctx, st, 20*time.Millisecond, nil); close(persisted) }()
	t.Cleanup(func() { cancel(); <-persisted; srv.Close(); st.Close() })

	e.run(t, controller.Config{Namespaces: []string{"default"}, KubeVirt: true, ReportURL: base})
	guests := map[string]struct{ instance, spec, addr string }{
		"vm-good":   {"good", "hostname: good\ncommands: [\"true\"]\n", "127.0.0.1"},
		"vm-bad":    {"bad", "hostname: bad\ncommands: [/opt/missing]\n", "127.0.0.2"},
		"vm-coreos": {"coreos", "agent: ignition\nhostname: coreos\n", "127.0.0.3"},
	}
	for vm, g := range guests {
		e.create(t, "default", g.instance, g.spec)
		e.vm(t, vm, map[string]string{v1alpha1.AnnotationInstance: g.instance})
		// KubeVirt names the VMI after its VM and copies the template's
		// annotations; its pod network reports the pod's IP.
		e.vmi(t, "default", vm, g.instance, []any{kubetest.VMIInterface("default", kubetest.InfoSourceAll, g.addr)})
	}
	userData := func(vm string) []byte {
		return e.waitSecret(t, vm+"-vminit", func(s *corev1.Secret) bool { return len(s.Data["userdata"]) > 0 }).Data["userdata"]
	}

	// The clean cloud-init boot: an event from its webhook, then the report.
	good := checkCloudInitReport(t, userData("vm-good"), base)
	post(t, "127.0.0.1", good.Reporting["vminit"]["endpoint"].(string), `{"name": "init-network/config-ssh", "event_type": "start", "origin": "cloudinit", "description": "running config-ssh", "timestamp": 1700000000.0}`)
	fb := e.firstBoot(t, "good", func(f *v1alpha1.FirstBoot) bool { return f.State == string(firstboot.Running) })
	if fb.Module != "config-ssh" {
		t.Errorf("good after its event: %+v", fb)
	}
	runCloudInitReport(t, good, "127.0.0.1", map[string]string{
		"run/cloud-init/status.json":    `{"v1": {"datasource": "DataSourceNoCloud", "stage": null, "init": {"errors": []}, "modules-final": {"errors": []}}}`,
		"run/cloud-init/result.json":    `{"v1": {"datasource": "DataSourceNoCloud", "errors": []}}`,
		"var/log/cloud-init-output.log": "Cloud-init v. 22.4.2 finished\n",
	})
	e.firstBoot(t, "good", func(f *v1alpha1.FirstBoot) bool { return f.State == string(firstboot.Done) })

	// The failing one: its runcmd script is missing.
	failed := `('scripts-user', RuntimeError('Runparts: 1 failures in 1 attempted commands'))`
	runCloudInitReport(t, checkCloudInitReport(t, userData("vm-bad"), base), "127.0.0.2", map[string]string{
		"run/cloud-init/status.json":    `{"v1": {"datasource": "DataSourceNoCloud", "stage": null, "modules-final": {"errors": ["` + failed + `"]}}}`,
		"run/cloud-init/result.json":    `{"v1": {"datasource": "DataSourceNoCloud", "errors": ["` + failed + `"]}}`,
		"var/log/cloud-init-output.log": "/var/lib/cloud/instance/scripts/runcmd: 2: /opt/missing: not found\nFailed to run module scripts-user\n",
	})
	fb = e.firstBoot(t, "bad", func(f *v1alpha1.FirstBoot) bool { return f.State == string(firstboot.Failed) })
	if len(fb.Errors) == 0 || fb.Errors[0].Module != "config-scripts-user" || !strings.Contains(fb.Errors[0].Message, "Runparts") || !strings.Contains(fb.Errors[0].Message, "/opt/missing") {
		t.Errorf("bad's first boot: %+v", fb)
	}
	// Each report went to its own Instance only.
	if fb := e.firstBoot(t, "good", func(*v1alpha1.FirstBoot) bool { return true }); fb.State != string(firstboot.Done) || len(fb.Errors) > 0 {
		t.Errorf("good after bad's report: %+v", fb)
	}

	// The Ignition boot: the completion unit as ignition wrote it, its
	// script run with bash, systemd stubbed to say the system runs.
	root := checkIgnitionReport(t, userData("vm-coreos"), base)
	runIgnitionReport(t, root, "127.0.0.3")
	e.firstBoot(t, "coreos", func(f *v1alpha1.FirstBoot) bool { return f.State == string(firstboot.Done) && f.Agent == "ignition" })
}

// firstBoot waits until the Instance's status.firstBoot satisfies cond.
func (e *env) firstBoot(t *testing.T, name string, cond func(*v1alpha1.FirstBoot) bool) *v1alpha1.FirstBoot {
	t.Helper()
	st := e.status(t, "default", name, func(st *v1alpha1.InstanceStatus) bool { return st.FirstBoot != nil && cond(st.FirstBoot) })
	return st.FirstBoot
}

// post posts body to url from the source address src, as cloud-init's
// webhook handler does from the guest.
func post(t *testing.T, src, url, body string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 10 * time.Second}
	res, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		t.Fatalf("POST %s from %s: %s", url, src, res.Status)
	}
}

// pyFrom runs a script with its connections made from the address
// argv[1], the guest's (the pod's, after the masquerade).
const pyFrom = `
import runpy, socket, sys
src, script = sys.argv[1], sys.argv[2]
create = socket.create_connection
def from_src(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, source_address=None, **kw):
    return create(address, timeout, (src, 0), **kw)
socket.create_connection = from_src
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
`

// runCloudInitReport runs the report script of v as its unit does (its
// URL from the unit), cloud-init's files under a root of files, from src.
func runCloudInitReport(t *testing.T, v guestView, src string, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "report.py")
	if err := os.WriteFile(script, v.Files[cloudinit.ReportScript], 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	for p, data := range files {
		f := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(cloudinittest.Python, "-c", pyFrom, src, script)
	cmd.Env = []string{bootreport.ReportURLEnv + "=" + reportUnitURL(v.Files[cloudInitUnit]),
		"VMINIT_REPORT_TEST_ROOT=" + root, "VMINIT_REPORT_TEST_DELAY=0"}
	if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "HTTP") {
		t.Fatalf("report.py from %s: %v\n%s", src, err, out)
	}
}

// runIgnitionReport runs the completion unit's script that ignition wrote
// under root from src (curl --interface), systemctl saying the system
// runs.
func runIgnitionReport(t *testing.T, root, src string) {
	t.Helper()
	ignitiontest.RunReport(t, root, ignitiontest.Boot{State: "running", CurlArgs: []string{"--interface", src}})
}

// quiet is a logger that drops everything.
func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }
