package firstboot

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// statusScript runs a boot's four stages through cloud-init 22.4's own
// status_wrapper (the code that writes /run/cloud-init/status.json and
// result.json), in a temporary directory, with modules-final failing the
// way cc_scripts_user does, and prints the two files.
const statusScript = `
import argparse, json, sys
from cloudinit.cmd import main
cfg = json.load(sys.stdin)
d = cfg["dir"]
def init(name, args):
    return ("DataSourceNoCloud [seed=/dev/sr0][dsmode=net]", [])
def modules(name, args):
    if args.mode == "final" and cfg["fail"]:
        return [("scripts-user", RuntimeError("Runparts: 1 failures in 1 attempted commands"))]
    return []
for name, local, mode, f in [("init", True, None, init), ("init", False, None, init), ("modules", False, "config", modules), ("modules", False, "final", modules)]:
    main.status_wrapper(name, argparse.Namespace(action=(name, f), local=local, mode=mode), data_d=d + "/data", link_d=d + "/run")
out = {}
for k in ("status", "result"):
    with open(d + "/data/" + k + ".json") as fp:
        out[k] = json.load(fp)
json.dump(out, sys.stdout)
`

// cloudInitFiles returns status.json and result.json as cloud-init 22.4
// writes them after a boot (failed in scripts-user, or not).
func cloudInitFiles(t *testing.T, fail bool) (status, result json.RawMessage) {
	var out struct{ Status, Result json.RawMessage }
	cloudinittest.Run(t, statusScript, map[string]any{"dir": t.TempDir(), "fail": fail}, &out)
	return out.Status, out.Result
}

const outputLog = `Cloud-init v. 22.4 running 'modules:final' at Thu, 26 Nov 2026 12:00:00 +0000. Up 9.00 seconds.
/var/lib/cloud/instance/scripts/runcmd: line 2: /opt/missing: No such file or directory
2026-11-26 12:00:01,000 - cc_scripts_user.py[WARNING]: Failed to run module scripts-user (scripts in /var/lib/cloud/instance/scripts)
2026-11-26 12:00:01,000 - util.py[WARNING]: Running module scripts-user (<module 'cloudinit.config.cc_scripts_user'>) failed
Cloud-init v. 22.4 finished at Thu, 26 Nov 2026 12:00:01 +0000. Datasource DataSourceNoCloud.  Up 10.00 seconds
`

// TestCloudInitReport: cloud-init's own status.json and result.json of a
// boot whose command failed read as a failed report naming
// modules-final/config-scripts-user (as its reporting events name it),
// with the exception and the output log's tail; those of a good boot as
// done.
func TestCloudInitReport(t *testing.T) {
	status, result := cloudInitFiles(t, true)
	r, err := GuestReport{Agent: AgentCloudInit, Status: status, Result: result, Log: outputLog}.Report()
	if err != nil {
		t.Fatalf("%v\nstatus.json %s\nresult.json %s", err, status, result)
	}
	if !r.Failed || len(r.Errors) != 1 {
		t.Fatalf("report %+v, want one failure\nstatus.json %s", r, status)
	}
	f := r.Errors[0]
	if f.Where() != "modules-final/config-scripts-user" {
		t.Errorf("failure at %q, want modules-final/config-scripts-user", f.Where())
	}
	if !strings.HasPrefix(f.Message, "RuntimeError('Runparts: 1 failures in 1 attempted commands')\n") || !strings.Contains(f.Message, "/opt/missing: No such file") {
		t.Errorf("failure message %q: want the exception, then the log's tail", f.Message)
	}
	if r.Message != "cloud-init: 1 error" {
		t.Errorf("message %q", r.Message)
	}

	status, result = cloudInitFiles(t, false)
	r, err = GuestReport{Agent: AgentCloudInit, Status: status, Result: result}.Report()
	if err != nil || r.Failed || len(r.Errors) != 0 {
		t.Errorf("a good boot: %+v %v", r, err)
	}
	// result.json alone (status.json unreadable): the failure, without
	// its stage.
	_, result = cloudInitFiles(t, true)
	r, err = GuestReport{Agent: AgentCloudInit, Result: result}.Report()
	if err != nil || !r.Failed || len(r.Errors) != 1 || r.Errors[0].Where() != "config-scripts-user" {
		t.Errorf("result.json alone: %+v %v", r, err)
	}
}

// TestCloudInitUnfinished: without result.json (cloud-init writes it as
// its last stage ends), the report is a failure: of the stage status.json
// names, or of cloud-init, with the log's tail; as report.py posts it
// when cloud-init's files are missing.
func TestCloudInitUnfinished(t *testing.T) {
	for _, tc := range []struct {
		status, where, msg string
	}{
		{"", "", "cloud-init left no status.json or result.json"},
		{`{"v1": {"stage": null, "init": {"errors": []}}}`, "", "cloud-init wrote no result.json"},
		{`{"v1": {"stage": "init", "init": {"errors": ["('x', OSError())"]}}}`, "init-network", "cloud-init did not finish this stage"},
		{`{"v1": {"stage": "modules-config", "init": {"errors": []}}}`, "modules-config", "cloud-init did not finish this stage"},
	} {
		r, err := GuestReport{Agent: AgentCloudInit, Status: json.RawMessage(tc.status), Log: "Traceback: the end\n"}.Report()
		if err != nil || !r.Failed || len(r.Errors) == 0 {
			t.Fatalf("status %s: %+v %v", tc.status, r, err)
		}
		f := r.Errors[len(r.Errors)-1]
		if f.Where() != tc.where || !strings.HasPrefix(f.Message, tc.msg) {
			t.Errorf("status %s: the last failure %+v, want at %q %q", tc.status, f, tc.where, tc.msg)
		}
		if !strings.Contains(r.Errors[0].Message+r.Message, "Traceback: the end") {
			t.Errorf("status %s: the log is nowhere: %+v", tc.status, r)
		}
	}
}

// TestCloudInitReportLog: the log's tail goes to the failure it names;
// with several failures and none named, to the report's message; it is
// cut to MaxMessage from its end.
func TestCloudInitReportLog(t *testing.T) {
	status := json.RawMessage(`{"v1": {"stage": null, "init": {"errors": ["no datasource"], "start": 1.0, "finished": 2.0},
		"modules-final": {"errors": ["('scripts-user', RuntimeError('boom'))", "('runcmd', OSError('x'))"]}}}`)
	done := json.RawMessage(`{"v1": {"errors": []}}`)
	r, err := GuestReport{Agent: AgentCloudInit, Status: status, Result: done, Log: "runcmd said no\n"}.Report()
	if err != nil || len(r.Errors) != 3 {
		t.Fatalf("%+v %v", r, err)
	}
	if r.Errors[0].Where() != "init-network" || r.Errors[0].Message != "no datasource" {
		t.Errorf("init's error: %+v", r.Errors[0])
	}
	if r.Errors[2].Where() != "modules-final/config-runcmd" || r.Errors[2].Message != "OSError('x')\nruncmd said no" {
		t.Errorf("the log goes to the failure it names: %+v", r.Errors)
	}
	r, _ = GuestReport{Agent: AgentCloudInit, Status: status, Result: done, Log: "something else\n"}.Report()
	if r.Message != "cloud-init: 3 errors\nsomething else" {
		t.Errorf("a log naming none: message %q", r.Message)
	}
	long := strings.Repeat("é", MaxMessage) + "the last line"
	r, _ = GuestReport{Agent: AgentCloudInit, Status: json.RawMessage(`{"v1": {"init": {"errors": ["x"]}}}`), Result: done, Log: long}.Report()
	if m := r.Errors[0].Message; len(m) > MaxMessage || !strings.HasSuffix(m, "the last line") || !strings.HasPrefix(m, "x\n…é") {
		t.Errorf("a long log: %d bytes, %.20q…%q", len(m), m, m[max(0, len(m)-20):])
	}
}

// TestIgnitionGuestReport: running is done; degraded, or failed units, failed
// with a failure per unit.
func TestIgnitionGuestReport(t *testing.T) {
	r, err := GuestReport{Agent: AgentIgnition, SystemState: "running"}.Report()
	if err != nil || r.Failed || r.Message != "running" {
		t.Errorf("running: %+v %v", r, err)
	}
	r, err = GuestReport{Agent: AgentIgnition, SystemState: "degraded", FailedUnits: []UnitReport{
		{Unit: "app.service", Log: "app.service: Main process exited, code=exited, status=1/FAILURE"}, {Unit: "db.service"}}}.Report()
	if err != nil || !r.Failed || len(r.Errors) != 2 || r.Message != "degraded: 2 failed units" {
		t.Fatalf("degraded: %+v %v", r, err)
	}
	if r.Errors[0] != (Failure{Unit: "app.service", Message: "app.service: Main process exited, code=exited, status=1/FAILURE"}) || r.Errors[1].Where() != "db.service" {
		t.Errorf("failures %+v", r.Errors)
	}
	units := make([]UnitReport, 3*MaxFailures)
	for i := range units {
		units[i].Unit = "u.service"
	}
	r, err = GuestReport{Agent: AgentIgnition, SystemState: "starting", FailedUnits: units}.Report()
	if err != nil || !r.Failed || len(r.Errors) != MaxFailures || r.Message != "starting: 48 failed units" {
		t.Errorf("many units: %d failures, %q, %v", len(r.Errors), r.Message, err)
	}
}

// TestGuestReportRefuses: what no completion unit posts is an error
// wrapping ErrReport that says what is wrong.
func TestGuestReportRefuses(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"agent": "cloud-init"`, "unexpected EOF"},
		{`{"agent": "cloud-init", "extra": 1}`, `unknown field "extra"`},
		{`{"agent": "cloud-init"} {}`, "data after the JSON object"},
		{`"x"`, "want a JSON object"},
		{`{"agent": "windows"}`, `agent "windows"`},
		{`{"agent": "cloud-init", "status": {"v2": {}}}`, "want status.json"},
		{`{"agent": "cloud-init", "status": {"v1": {"init": {"errors": [1]}}}}`, "v1.init"},
		{`{"agent": "cloud-init", "result": [1]}`, "want result.json"},
		{`{"agent": "cloud-init", "result": {"v1": {"errors": []}}, "systemState": "fine"}`, `systemState "fine"`},
		{`{"agent": "cloud-init", "result": {"v1": {"errors": []}}, "failedUnits": [{"unit": "a.mount"}]}`, `systemState ""`},
		{`{"agent": "cloud-init", "result": {"v1": {"errors": []}}, "systemState": "degraded", "failedUnits": [{"log": "x"}]}`, "failedUnits[0]: unit is empty"},
		{`{"agent": "ignition", "systemState": "fine"}`, `systemState "fine"`},
		{`{"agent": "ignition", "systemState": "running", "result": {"v1": {}}}`, "a cloud-init report's"},
		{`{"agent": "ignition", "systemState": "degraded", "failedUnits": [{"log": "x"}]}`, "failedUnits[0]: unit is empty"},
		{`{"agent": "ignition", "log": "` + strings.Repeat("a", MaxReportBytes) + `"}`, "a report is at most"},
	} {
		g, err := ParseGuestReport([]byte(tc.body))
		if err == nil {
			_, err = g.Report()
		}
		if !errors.Is(err, ErrReport) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.70s: %v, want ErrReport saying %q", tc.body, err, tc.want)
		}
	}
}

// mountJournal is a spec mount's unit failing at first boot, as
// `journalctl -b -u UNIT` gives it (the report scripts' command).
const mountJournal = `Nov 29 03:40:01 debian systemd[1]: Mounting srv-data.mount - Mount tmpfs at /srv/data...
Nov 29 03:40:01 debian mount[812]: mount: /srv/data: wrong fs type, bad option, bad superblock on tmpfs, missing codepage or helper program, or other error.
Nov 29 03:40:01 debian systemd[1]: srv-data.mount: Mount process exited, code=exited, status=32/n/a
Nov 29 03:40:01 debian systemd[1]: srv-data.mount: Failed with result 'exit-code'.
Nov 29 03:40:01 debian systemd[1]: Failed to mount srv-data.mount - Mount tmpfs at /srv/data.
`

// TestCloudInitReportFailedUnits: a cloud-init report with the system's
// state and failed units (report.py's) is failed when a unit failed or the
// system is degraded, though cloud-init itself reports no error; the
// failure names the unit and carries its journal; cloud-init's own
// failures come first. A running system with none is done.
func TestCloudInitReportFailedUnits(t *testing.T) {
	good, goodResult := cloudInitFiles(t, false)
	bad, badResult := cloudInitFiles(t, true)
	mount := UnitReport{Unit: "srv-data.mount", Log: mountJournal}
	for _, tc := range []struct {
		name           string
		status, result json.RawMessage
		state          string
		units          []UnitReport
		failed         bool
		first, message string
	}{
		{"cloud-init done, a unit failed", good, goodResult, "degraded", []UnitReport{mount}, true,
			"srv-data.mount: mount: /srv/data: wrong fs type, bad option, bad superblock on tmpfs, missing codepage or helper program, or other error.",
			"cloud-init finished without errors; system degraded: 1 failed unit"},
		{"cloud-init failed, and a unit", bad, badResult, "degraded", []UnitReport{{Unit: "cloud-final.service"}, mount}, true,
			"modules-final/config-scripts-user: /var/lib/cloud/instance/scripts/runcmd: line 2: /opt/missing: No such file or directory",
			"cloud-init: 1 error; system degraded: 2 failed units"},
		{"maintenance", good, goodResult, "maintenance", nil, true, "", "cloud-init finished without errors; system maintenance"},
		{"running", good, goodResult, "running", nil, false, "", "cloud-init finished without errors; system running"},
		{"still starting", good, goodResult, "starting", nil, false, "", "cloud-init finished without errors; system starting"},
	} {
		r, err := GuestReport{Agent: AgentCloudInit, Status: tc.status, Result: tc.result, Log: outputLog, SystemState: tc.state, FailedUnits: tc.units}.Report()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		st := Status{Errors: r.Errors}
		if r.Failed != tc.failed || st.FirstError() != tc.first || !strings.HasPrefix(r.Message, tc.message) {
			t.Errorf("%s: failed %v, first error %q, message %q; want %v, %q, %q", tc.name, r.Failed, st.FirstError(), r.Message, tc.failed, tc.first, tc.message)
		}
		if want := len(tc.units); len(r.Errors) != want && len(r.Errors) != want+1 {
			t.Errorf("%s: %d failures, want one per unit after cloud-init's: %+v", tc.name, len(r.Errors), r.Errors)
		} else if want > 0 && r.Errors[len(r.Errors)-1] != (Failure{Unit: mount.Unit, Message: mountJournal}) {
			t.Errorf("%s: the last failure %+v, want the mount's with its journal", tc.name, r.Errors[len(r.Errors)-1])
		}
	}
	// An older guest's report (no systemState) reads as before.
	r, err := GuestReport{Agent: AgentCloudInit, Status: good, Result: goodResult}.Report()
	if err != nil || r.Failed || r.Message != "cloud-init finished without errors" {
		t.Errorf("a report without systemState: %+v %v", r, err)
	}
	// Failures past MaxFailures are dropped, cloud-init's kept.
	units := make([]UnitReport, 2*MaxFailures)
	for i := range units {
		units[i].Unit = "u.service"
	}
	r, err = GuestReport{Agent: AgentCloudInit, Status: bad, Result: badResult, SystemState: "degraded", FailedUnits: units}.Report()
	if err != nil || len(r.Errors) != MaxFailures || r.Errors[0].Module != "config-scripts-user" {
		t.Errorf("many units: %d failures, the first %+v, %v", len(r.Errors), r.Errors[0], err)
	}
}
