package cloudinit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/lib/systemd"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/reporttest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// pyReportConfig gives, for each user data, the final cloud-config first
// boot makes of it (cloud-init's UserDataProcessor and cloud-config
// handler) and what its write_files module writes.
const pyReportConfig = cloudinittest.FinalConfig + `
import json, sys
from cloudinit.config import cc_write_files as wf
out = []
for blob in json.load(sys.stdin):
    cfg, types = final_config(base64.b64decode(blob))
    files = {}
    for f in cfg.get("write_files") or []:
        data = wf.extract_contents(f.get("content", ""), wf.canonicalize_extraction(f.get("encoding")))
        files[f["path"]] = {"content": b64(data), "perms": wf.decode_perms(f.get("permissions"), 0o644)}
    out.append({"reporting": cfg.get("reporting"), "runcmd": cfg.get("runcmd"), "files": files, "types": types})
json.dump(out, sys.stdout)
`

type pyReport struct {
	Reporting map[string]map[string]any `json:"reporting"`
	Runcmd    []any                     `json:"runcmd"`
	Files     map[string]struct {
		Content []byte `json:"content"`
		Perms   int    `json:"perms"`
	} `json:"files"`
	Types []string `json:"types"`
}

// TestWithReport checks, with cloud-init's own user-data processing, that
// every kind of user data keeps what it did and gains the reporting
// webhook, the report script, its unit and the trigger; and that a single
// #cloud-config result passes cloud-init 22.4's schema (ours and
// `cloud-init schema`).
func TestWithReport(t *testing.T) {
	gen, err := CloudConfig(loadSpec(t, fullSpec, nil))
	if err != nil {
		t.Fatal(err)
	}
	const userFile = "/etc/user-file"
	cases := []struct {
		name, user string
		single     bool // one #cloud-config document
		runcmd     bool // the user's runcmd survives
		raw        bool // the user data as given (userDataOnly), not combined with the generated
	}{
		{name: "generated only", single: true},
		{name: "cloud-config replacing write_files and runcmd", user: "#cloud-config\nwrite_files: [{path: " + userFile + ", content: x}]\nruncmd: [echo user]\n", single: true, runcmd: true},
		{name: "cloud-config with its own reporting", user: "#cloud-config\nreporting: {mine: {type: log}}\nwrite_files: [{path: " + userFile + ", content: x}]\n", single: true},
		{name: "script", user: "#!/bin/sh\necho hi\n"},
		{name: "gzip script", user: gz("#!/bin/sh\necho hi\n")},
		{name: "jinja", user: "## template: jinja\n#cloud-config\nruncmd:\n  - echo {{ v1.local_hostname }}\n"},
		{name: "launch-index", user: "#cloud-config\nlaunch-index: 0\nwrite_files: [{path: " + userFile + ", content: x}]\n"},
		{name: "MIME replacing write_files", user: "Content-Type: multipart/mixed; boundary=\"XYZ\"\nMIME-Version: 1.0\n\n--XYZ\n" +
			"Content-Type: text/cloud-config\n\n#cloud-config\nwrite_files: [{path: " + userFile + ", content: x}]\nruncmd: [echo user]\n--XYZ--\n", runcmd: true},
		{name: "userDataOnly MIME", raw: true, user: "Content-Type: multipart/mixed; boundary=\"XYZ\"\nMIME-Version: 1.0\n\n--XYZ\n" +
			"Content-Type: text/cloud-config\n\n#cloud-config\nwrite_files: [{path: " + userFile + ", content: x}]\nruncmd: [echo user]\n--XYZ--\n", runcmd: true},
		{name: "userDataOnly cloud-config", raw: true, single: true, runcmd: true, user: "#cloud-config\nruncmd: [echo user]\n"},
		{name: "userDataOnly script", raw: true, user: "#!/bin/sh\necho hi\n"},
		{name: "userDataOnly empty", raw: true, single: true},
		{name: "userDataOnly that cloud-init ignores", raw: true, user: "just some text\n"},
	}
	const base = "http://192.0.2.7:8080/prefix"
	var blobs [][]byte
	for _, c := range cases {
		ud := []byte(c.user)
		if !c.raw {
			if ud, err = Combine(gen, ud); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		out, err := WithReport(ud, base+"/")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if again, _ := WithReport(ud, base); !bytes.Equal(out, again) {
			t.Errorf("%s: two renderings differ", c.name)
		}
		if isMultipart := strings.HasPrefix(string(out), "Content-Type: multipart/mixed"); isMultipart == c.single {
			t.Errorf("%s: multipart %v, want %v:\n%s", c.name, isMultipart, !c.single, out)
		}
		if !strings.Contains(string(out), base+bootreport.EventsPath) {
			t.Errorf("%s: the report is not readable as is:\n%s", c.name, out)
		}
		if c.single {
			if findings, err := CheckSchema(out); err != nil || len(findings) > 0 {
				t.Errorf("%s: schema: %v %v", c.name, findings, err)
			}
			if err := cloudinittest.Schema(t, out); err != nil {
				t.Errorf("%s: cloud-init schema: %v", c.name, err)
			}
		}
		blobs = append(blobs, out)
	}
	var res []pyReport
	cloudinittest.Run(t, pyReportConfig, blobs, &res)
	for i, c := range cases {
		r := res[i]
		hook := r.Reporting["vminit"]
		if hook["type"] != "webhook" || hook["endpoint"] != base+bootreport.EventsPath {
			t.Errorf("%s: reporting %v", c.name, r.Reporting)
		}
		if c.name == "cloud-config with its own reporting" && r.Reporting["mine"] == nil {
			t.Errorf("%s: the user's handler is lost: %v", c.name, r.Reporting)
		}
		if c.user != "" && strings.Contains(c.user, userFile) && c.name != "launch-index" {
			if _, ok := r.Files[userFile]; !ok {
				t.Errorf("%s: the user's file is lost: %v", c.name, slices.Sorted(maps.Keys(r.Files)))
			}
		}
		if c.runcmd && !strings.Contains(fmt.Sprint(r.Runcmd), "echo user") {
			t.Errorf("%s: runcmd %v", c.name, r.Runcmd)
		}
		script, unit, trigger := r.Files[ReportScript], r.Files[path.Join(systemd.UnitDir, bootreport.ReportUnit)], r.Files[ReportTrigger]
		if !bytes.Equal(script.Content, reportScript()) || script.Perms != 0o755 {
			t.Errorf("%s: %s is %o %.60q", c.name, ReportScript, script.Perms, script.Content)
		}
		if !strings.Contains(string(unit.Content), `Environment="VMINIT_REPORT_URL=`+base+bootreport.ReportPath+`"`) {
			t.Errorf("%s: unit:\n%s", c.name, unit.Content)
		}
		if trigger.Perms != 0o755 || !strings.Contains(string(trigger.Content), "systemctl start --no-block "+bootreport.ReportUnit) {
			t.Errorf("%s: trigger %o:\n%s", c.name, trigger.Perms, trigger.Content)
		}
	}
}

func TestWithReportRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "192.0.2.1:80", "ftp://h/", "http://u:p@h/", "http://h/?a=1", "http://h/#f", "/relative"} {
		if _, err := WithReport([]byte("#cloud-config\n"), u); err == nil {
			t.Errorf("%q: accepted", u)
		}
	}
}

// runReportScript runs report.py as its unit does, with /usr/bin/python3
// and its paths under root.
func runReportScript(t *testing.T, root, url string, env ...string) string {
	return cloudinittest.RunReportScript(t, reportScript(), root, url, env...)
}

func writeTree(t *testing.T, root string, files map[string]string) {
	cloudinittest.WriteTree(t, root, files)
}

// TestReportScriptPosts runs the report script with the guest's Python
// against a loopback server: what it posts decodes into a GuestReport with
// cloud-init's files and the log's last 4 KiB; it retries a server error,
// and once delivered it does not post again.
func TestReportScriptPosts(t *testing.T) {
	root := t.TempDir()
	status := `{"v1": {"datasource": "DataSourceNoCloud", "stage": null, "modules-final": {"errors": ["runcmd failed"]}}}`
	result := `{"v1": {"datasource": "DataSourceNoCloud", "errors": ["runcmd failed"], "recoverable_errors": {}}}`
	log := strings.Repeat("x", 5000) + strings.Repeat("\u00fc", 1000) + "J\u00fcrgen \u2603 \"quoted\" \\ the end\n"
	writeTree(t, root, map[string]string{
		"run/cloud-init/status.json":           status,
		"run/cloud-init/result.json":           result,
		"var/log/cloud-init-output.log":        log,
		"var/lib/cloud/instance/boot-finished": "",
	})
	srv := reporttest.NewServer(t, http.StatusServiceUnavailable)
	url := bootreport.ReportURL(srv.URL)
	runReportScript(t, root, url)
	if len(srv.Bodies()) != 2 {
		t.Fatalf("%d posts, want 2 (one retry after the 503)", len(srv.Bodies()))
	}
	var rep firstboot.GuestReport
	dec := json.NewDecoder(bytes.NewReader(srv.Bodies()[1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("%v: %s", err, srv.Bodies()[1])
	}
	if rep.Agent != "cloud-init" || !jsonEqual(t, rep.Status, status) || !jsonEqual(t, rep.Result, result) {
		t.Errorf("report %+v", rep)
	}
	if rep.Log != log[len(log)-4096:] {
		t.Errorf("log is %d bytes ending %q, want the last 4096", len(rep.Log), rep.Log[max(0, len(rep.Log)-20):])
	}
	if n := len(srv.Bodies()[1]); n > len(status)+len(result)+4096+100 {
		t.Errorf("the report is %d bytes: the log is escaped", n)
	}
	runReportScript(t, root, url)
	if len(srv.Bodies()) != 2 {
		t.Errorf("posted again after a delivered report")
	}
}

// TestReportScriptMissingFilesAndRefusal: without cloud-init's files (or
// with one too large) the report still goes (agent only); a 4xx is not
// retried, and the report is not tried again; neither fails the unit.
func TestReportScriptMissingFilesAndRefusal(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"var/lib/cloud/instance/boot-finished": "",
		"run/cloud-init/result.json":           `{"v1": {"errors": ["` + strings.Repeat("e", 20000) + `"]}}`,
	})
	srv := reporttest.NewServer(t, http.StatusForbidden)
	url := bootreport.ReportURL(srv.URL)
	if out := runReportScript(t, root, url); !strings.Contains(out, "HTTP 403") {
		t.Errorf("output %q does not name the refusal", out)
	}
	if len(srv.Bodies()) != 1 {
		t.Fatalf("%d posts after a 403, want 1", len(srv.Bodies()))
	}
	runReportScript(t, root, url)
	if len(srv.Bodies()) != 1 {
		t.Fatalf("a refused report was tried again")
	}
	var rep firstboot.GuestReport
	if err := json.Unmarshal(srv.Bodies()[0], &rep); err != nil || rep.Agent != "cloud-init" || rep.Status != nil || rep.Result != nil {
		t.Errorf("report %s: %v", srv.Bodies()[0], err)
	}
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// TestReportScriptUnits runs the report script with systemctl and
// journalctl stubbed: a boot cloud-init finished without errors but whose
// units failed posts the system's state and at most 16 failed units, each
// with the last 2 KiB of its journal (control characters but tab, CR and
// LF dropped, as ignition/report.sh sends them), and the server reads it
// as failed, naming the first unit. Without systemd (no
// /run/systemd/system: Alpine's OpenRC), the report carries cloud-init's
// word alone, and the script says nothing of it.
func TestReportScriptUnits(t *testing.T) {
	var units []reporttest.FailedUnit
	journal := strings.Repeat("filler line\n", 300) + "mount: /srv/data: wrong fs type \"x\" \\ J\u00fcrgen\x01\x1b[0m\r\n"
	for i := range 20 {
		units = append(units, reporttest.FailedUnit{Unit: fmt.Sprintf("unit-%02d.mount", i), Journal: journal})
	}
	root := t.TempDir()
	writeTree(t, root, cleanBoot)
	srv := reporttest.NewServer(t)
	runReportScript(t, root, bootreport.ReportURL(srv.URL), "PATH="+reporttest.Systemd(t, "degraded", units)+":/usr/bin:/bin")
	g := srv.Report(t)
	if g.SystemState != "degraded" || len(g.FailedUnits) != 16 {
		t.Fatalf("report: state %q, %d failed units", g.SystemState, len(g.FailedUnits))
	}
	// The stub's heredoc ends the journal with a newline.
	full := journal + "\n"
	wantLog := strings.NewReplacer("\x01", "", "\x1b", "").Replace(full[len(full)-2048:])
	for i, u := range g.FailedUnits {
		if u.Unit != units[i].Unit || u.Log != wantLog {
			t.Errorf("unit %d: %q with log %q, want %q with %q", i, u.Unit, u.Log[max(0, len(u.Log)-60):], units[i].Unit, wantLog[len(wantLog)-60:])
		}
	}
	r, err := g.Report()
	if err != nil || !r.Failed {
		t.Fatalf("the server's reading: %+v %v", r, err)
	}
	if st := (firstboot.Status{Errors: r.Errors}); st.FirstError() != `unit-00.mount: mount: /srv/data: wrong fs type "x" \ Jürgen[0m` {
		t.Errorf("first error %q", st.FirstError())
	}

	// No systemd, even with a systemctl on PATH: cloud-init's word alone,
	// and nothing printed (the kubevirt e2e guests run so).
	root = t.TempDir()
	noSystemd := maps.Clone(cleanBoot)
	delete(noSystemd, "run/systemd/system/.keep")
	writeTree(t, root, noSystemd)
	srv = reporttest.NewServer(t)
	if out := runReportScript(t, root, bootreport.ReportURL(srv.URL), "PATH="+reporttest.Systemd(t, "degraded", units)+":/usr/bin:/bin"); out != "" {
		t.Errorf("output %q, want none", out)
	}
	if len(srv.Bodies()) != 1 || bytes.Contains(srv.Bodies()[0], []byte("systemState")) || bytes.Contains(srv.Bodies()[0], []byte("failedUnits")) {
		t.Fatalf("posted %q", srv.Bodies())
	}
	if g, err := firstboot.ParseGuestReport(srv.Bodies()[0]); err != nil {
		t.Error(err)
	} else if r, err := g.Report(); err != nil || r.Failed {
		t.Errorf("the server's reading: %+v %v", r, err)
	}
}

// cleanBoot is a guest's tree after a systemd boot cloud-init finished
// without errors.
var cleanBoot = map[string]string{
	"run/cloud-init/status.json":   `{"v1": {"stage": null, "modules-final": {"errors": []}}}`,
	"run/cloud-init/result.json":   `{"v1": {"errors": []}}`,
	"run/systemd/system/.keep":     "",
	"var/lib/cloud/instance/.keep": "", // where the marker goes
}

// TestReportScriptInactiveMounts: a boot whose enabled mount failed only
// as a dependency, its device never there (reporttest.InactiveMounts), is
// reported with that unit, its journal and the reason last, which the
// server reads as the cause; an active, nofail or skipped mount is not
// (reporttest.CheckInactiveMounts).
func TestReportScriptInactiveMounts(t *testing.T) {
	reporttest.CheckInactiveMounts(t, reportRunning(t, reporttest.InactiveMounts()))
}

// reportRunning is what report.py posts after a systemd boot cloud-init
// finished without errors, in the running state, systemd's answers
// stubbed with units (reporttest.Systemd).
func reportRunning(t *testing.T, units []reporttest.FailedUnit) firstboot.GuestReport {
	root := t.TempDir()
	writeTree(t, root, cleanBoot)
	srv := reporttest.NewServer(t)
	runReportScript(t, root, bootreport.ReportURL(srv.URL), "PATH="+reporttest.Systemd(t, "running", units)+":/usr/bin:/bin")
	return srv.Report(t)
}

// TestReportScriptDependencyFailed: a unit whose start job failed because
// a unit it needs failed ends inactive, not failed, in a running system
// (reporttest.DependencyFailed); report.py finds it in the journal's
// record of the job and posts it with its journal and, last, which unit it
// needed failed and what failed first, which the server reads as the
// cause. The initrd's jobs, a unit started since, and a nofail mount are
// not posted (reporttest.CheckDependencyFailed).
func TestReportScriptDependencyFailed(t *testing.T) {
	reporttest.CheckDependencyFailed(t, reportRunning(t, reporttest.DependencyFailed()))
}

// TestServedScript: report.py has no multi-line string that
// scripttext.Served, dropping lines that begin with #, could cut (the
// report tests run the served copy), and the served copy keeps the
// opening block that says what it is.
func TestServedScript(t *testing.T) {
	if bytes.Contains(reportSource, []byte(`"""`)) || bytes.Contains(reportSource, []byte(`'''`)) {
		t.Fatal("report.py has a multi-line string: scripttext.Served may cut it")
	}
	if !bytes.HasPrefix(reportScript(), []byte("#!/usr/bin/python3\n# Generated by vminit: ")) || len(reportScript()) > len(reportSource)*3/4 {
		t.Errorf("served: %d of %d bytes, beginning %.80q", len(reportScript()), len(reportSource), reportScript())
	}
}

// TestReportTriggerWithoutSystemd: on a guest without systemd (Alpine's
// OpenRC) the per-instance trigger, run with sh, does not fail (a failing
// script would fail cloud-init's module) and starts report.py detached,
// which waits for cloud-init's result.json and posts cloud-init's word,
// with no system state.
func TestReportTriggerWithoutSystemd(t *testing.T) {
	cloudinittest.Require(t)
	sh := testtools.Require(t, "sh")
	srv := reporttest.NewServer(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"run/cloud-init/status.json":   `{"v1": {"stage": "modules-final", "modules-final": {"errors": []}}}`,
		"var/lib/cloud/instance/.keep": "",
		"var/log/.keep":                "",
		ReportScript[1:]:               string(reportScript()),
	})
	cmd := exec.Command(sh, "-c", reportTrigger(srv.URL))
	cmd.Env = []string{"PATH=/usr/bin:/bin", "VMINIT_REPORT_TEST_ROOT=" + root, "VMINIT_REPORT_TEST_DELAY=0"}
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("the trigger: %v\n%s", err, out)
	}
	writeTree(t, root, map[string]string{"run/cloud-init/result.json": `{"v1": {"errors": []}}`})
	// Detached: wait (bounded) for its post and its marker, which it
	// writes last.
	marker := filepath.Join(root, "var/lib/cloud/instance/vminit-first-boot-reported")
	for i := 0; i < 600 && !fileExists(marker); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(root, "var/log/vminit-first-boot-report.log"))
	if len(srv.Bodies()) != 1 || !fileExists(marker) {
		t.Fatalf("%d posts, marker %v; its log:\n%s", len(srv.Bodies()), fileExists(marker), log)
	}
	g, err := firstboot.ParseGuestReport(srv.Bodies()[0])
	if err != nil {
		t.Fatal(err)
	}
	if r, err := g.Report(); err != nil || r.Failed || g.SystemState != "" || g.FailedUnits != nil {
		t.Errorf("the server's reading %+v %v of %s", r, err, srv.Bodies()[0])
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
