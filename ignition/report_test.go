package ignition

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/internal/testing/reporttest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/spec"
)

const reportSpec = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: reporter\nspec:\n  agent: ignition\n  commands: [\"true\"]\n"

func parseSpec(t *testing.T, doc string) *spec.Instance {
	t.Helper()
	inst, err := spec.Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestBootReport: Options.ReportTo adds the report script and its enabled
// unit, which the real ignition-validate accepts and the real ignition
// writes; without it the config is what it was.
func TestBootReport(t *testing.T) {
	inst := parseSpec(t, reportSpec)
	plain, err := Render(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Config, []byte(bootreport.ReportUnit)) {
		t.Errorf("a config without ReportTo has the report unit")
	}
	const base = "https://192.0.2.7:8443/mds"
	res, err := Render(inst, Options{ReportTo: base + "/"})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Render(inst, Options{ReportTo: base}); !bytes.Equal(res.Config, again.Config) {
		t.Errorf("two renderings differ")
	}
	cfg := filepath.Join(t.TempDir(), "config.ign")
	if err := os.WriteFile(cfg, res.Config, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(testtools.Require(t, "ignition-validate"), cfg).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("ignition-validate: %v\n%s", err, out)
	}
	root := ignitiontest.Apply(t, res.Config)
	script, err := os.ReadFile(filepath.Join(root, ReportScript))
	if err != nil || !bytes.Equal(script, reportScript()) {
		t.Errorf("%s: %v %.80q", ReportScript, err, script)
	}
	if st, err := os.Stat(filepath.Join(root, ReportScript)); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("%s: %v %v", ReportScript, st.Mode(), err)
	}
	if !bytes.Contains(script, []byte(ReportMarker)) {
		t.Errorf("the script does not use the marker %s of the unit's condition", ReportMarker)
	}
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system", bootreport.ReportUnit))
	if err != nil || !strings.Contains(string(unit), `Environment="VMINIT_REPORT_URL=`+base+bootreport.ReportPath+`"`) ||
		!strings.Contains(string(unit), "ConditionPathExists=!"+ReportMarker) {
		t.Errorf("unit: %v\n%s", err, unit)
	}
	preset, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system-preset/20-ignition.preset"))
	if !strings.Contains(string(preset), "enable "+bootreport.ReportUnit) {
		t.Errorf("the unit is not enabled; presets:\n%s", preset)
	}
}

func TestBootReportErrors(t *testing.T) {
	inst := parseSpec(t, reportSpec)
	for _, u := range []string{"ftp://h/", "http://user:pw@h/", "http://h/?q", "h:80"} {
		if _, err := Render(inst, Options{ReportTo: u}); err == nil || !strings.Contains(err.Error(), "report URL") {
			t.Errorf("%q: %v", u, err)
		}
	}
	clash := parseSpec(t, reportSpec+"  files:\n    - path: "+ReportScript+"\n      content: mine\n")
	_, err := Render(clash, Options{ReportTo: "http://192.0.2.7"})
	if err == nil || !strings.Contains(err.Error(), "spec.files[0].path") || !strings.Contains(err.Error(), "--report-to") {
		t.Errorf("a spec file at the script's path: %v", err)
	}
}

// stubs writes systemctl and journalctl stand-ins: the system is
// degraded, with units failed units, each of whose journal is journal.
func stubs(t *testing.T, units []string, journal string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	list := ""
	for _, u := range units {
		list += u + " loaded failed failed Some unit\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "failed"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "journal"), []byte(journal), 0o644); err != nil {
		t.Fatal(err)
	}
	write("systemctl", `case "$*" in
"is-system-running --wait") echo degraded; exit 1 ;;
"list-units --failed --plain --no-legend --no-pager --full") cat "`+dir+`/failed" ;;
*) echo "unexpected systemctl $*" >&2; exit 2 ;;
esac
`)
	write("journalctl", `[ "$1 $2 $3" = "-b -u $3" ] || { echo "unexpected journalctl $*" >&2; exit 2; }
cat "`+dir+`/journal"
`)
	return dir
}

func runReport(t *testing.T, stubDir, root, url string) {
	t.Helper()
	cmd := exec.Command(testtools.Require(t, "bash"), "-c", string(reportScript()))
	cmd.Env = []string{"PATH=" + stubDir + ":/usr/bin:/bin", bootreport.ReportURLEnv + "=" + url,
		"VMINIT_REPORT_TEST_ROOT=" + root, "VMINIT_REPORT_TEST_DELAY=0"}
	testtools.Require(t, "curl")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("report.sh: %v\n%s", err, out)
	}
}

// TestReportScriptPosts runs the report script with bash against a
// loopback server, systemctl and journalctl stubbed: what it posts decodes
// into a GuestReport naming the state and at most 16 failed units, each
// with the last 2 KiB of its journal exactly (quotes, backslashes, tabs
// and non-ASCII intact, other control characters dropped); a server error
// is retried, and a delivered report is not posted again.
func TestReportScriptPosts(t *testing.T) {
	var units []string
	for i := range 20 {
		units = append(units, "unit-"+string(rune('a'+i))+".service")
	}
	journal := strings.Repeat("filler line\n", 300) + "a \"quoted\" \\back\\slash\ttab\x01\x1b[0m ctl J\u00fcrgen \u2603\r\nexit status 1\n"
	root := t.TempDir()
	srv := reporttest.NewServer(t, http.StatusBadGateway)
	url := bootreport.ReportURL(srv.URL)
	runReport(t, stubs(t, units, journal), root, url)
	if len(srv.Bodies()) != 2 {
		t.Fatalf("%d posts, want 2 (one retry after the 502)", len(srv.Bodies()))
	}
	var rep firstboot.GuestReport
	dec := json.NewDecoder(bytes.NewReader(srv.Bodies()[1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("%v: %s", err, srv.Bodies()[1])
	}
	if rep.Agent != "ignition" || rep.SystemState != "degraded" || len(rep.FailedUnits) != 16 {
		t.Fatalf("report: agent %q, state %q, %d failed units", rep.Agent, rep.SystemState, len(rep.FailedUnits))
	}
	wantLog := strings.NewReplacer("\x01", "", "\x1b", "").Replace(journal[len(journal)-2048:])
	for i, u := range rep.FailedUnits {
		if u.Unit != units[i] || u.Log != wantLog {
			t.Errorf("unit %d: %q with log %q, want %q with %q", i, u.Unit, u.Log[max(0, len(u.Log)-80):], units[i], wantLog[len(wantLog)-80:])
		}
	}
	if _, err := os.Stat(filepath.Join(root, ReportMarker)); err != nil {
		t.Errorf("no marker: %v", err)
	}
	runReport(t, stubs(t, units, journal), root, url)
	if len(srv.Bodies()) != 2 {
		t.Errorf("posted again after a delivered report")
	}
}

// TestReportScriptNoFailures: a running system posts an empty list.
func TestReportScriptNoFailures(t *testing.T) {
	srv := reporttest.NewServer(t)
	dir := stubs(t, nil, "")
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte("#!/bin/bash\n[ \"$1\" = is-system-running ] && echo running\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runReport(t, dir, t.TempDir(), bootreport.ReportURL(srv.URL))
	var rep firstboot.GuestReport
	if len(srv.Bodies()) != 1 || json.Unmarshal(srv.Bodies()[0], &rep) != nil || rep.SystemState != "running" || rep.FailedUnits == nil && !bytes.Contains(srv.Bodies()[0], []byte(`"failedUnits":[]`)) {
		t.Errorf("posted %q", srv.Bodies())
	}
}

// TestReportScriptInactiveMounts: as cloud-init's report.py, report.sh
// posts an enabled mount that failed only as a dependency, its device
// never there (reporttest.InactiveMounts), with its journal and the
// reason last, in a running system with no failed unit; an active,
// nofail or skipped mount is not posted.
func TestReportScriptInactiveMounts(t *testing.T) {
	srv := reporttest.NewServer(t)
	runReport(t, reporttest.Systemd(t, "running", reporttest.InactiveMounts()), t.TempDir(), bootreport.ReportURL(srv.URL))
	reporttest.CheckInactiveMounts(t, srv.Report(t))
}

// TestReportScriptDependencyFailed: as cloud-init's report.py, report.sh
// posts the units that never started because a unit they need failed,
// found in the journal's record of their start jobs
// (reporttest.DependencyFailed), each with its journal and which unit it
// needed failed last; the initrd's jobs, a unit started since, and a
// nofail mount are not posted (reporttest.CheckDependencyFailed).
func TestReportScriptDependencyFailed(t *testing.T) {
	srv := reporttest.NewServer(t)
	runReport(t, reporttest.Systemd(t, "running", reporttest.DependencyFailed()), t.TempDir(), bootreport.ReportURL(srv.URL))
	reporttest.CheckDependencyFailed(t, srv.Report(t))
}

// TestServedScript: report.sh has no here-document whose lines
// scripttext.Served, dropping lines that begin with #, could cut (the
// tests above run the served copy), and the served copy keeps the
// opening block that says what it is.
func TestServedScript(t *testing.T) {
	if bytes.Contains(bytes.ReplaceAll(reportSource, []byte("<<<"), nil), []byte("<<")) {
		t.Fatal("report.sh has a here-document: scripttext.Served may cut it")
	}
	if !bytes.HasPrefix(reportScript(), []byte("#!/bin/bash\n# Generated by vminit: ")) || len(reportScript()) > len(reportSource)*3/4 {
		t.Errorf("served: %d of %d bytes, beginning %.80q", len(reportScript()), len(reportSource), reportScript())
	}
}
