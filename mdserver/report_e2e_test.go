package mdserver

import (
	"os"
	"strings"
	"testing"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/reporttest"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// TestReportScriptToHandler: the report script the served cloud-config
// installs (cloudinit/report.py), run with the guest's Python against
// the real handler on loopback, moves its instance's first boot to
// failed, naming the module and carrying the log; run again without
// cloud-init's files (a cloud-init that never finished), it is taken as
// a failure too, not refused.
func TestReportScriptToHandler(t *testing.T) {
	cloudinittest.Require(t)
	store := newIndexStore()
	store.put(t, instanceDoc("vm-a", []string{"127.0.0.1"}, ""))
	store.put(t, instanceDoc("vm-bb", []string{"127.0.0.3"}, ""))
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	srv, _ := serve(t, h)
	run := func(files map[string]string) string { return runReportScript(t, srv.URL, files) }
	failed := `('scripts-user', RuntimeError('Runparts: 1 failures in 1 attempted commands'))`
	out := run(map[string]string{
		"run/cloud-init/status.json":    `{"v1": {"datasource": "DataSourceNoCloud", "stage": null, "init": {"errors": [], "start": 1.0, "finished": 2.0}, "modules-final": {"errors": ["` + failed + `"], "start": 3.0, "finished": 4.0}}}`,
		"run/cloud-init/result.json":    `{"v1": {"datasource": "DataSourceNoCloud", "errors": ["` + failed + `"]}}`,
		"var/log/cloud-init-output.log": "runcmd: /opt/missing: No such file or directory\n2026-11-29 03:40:01,123 - cc_scripts_user.py[WARNING]: Failed to run module scripts-user (scripts in /var/lib/cloud/instance/scripts)\n",
	})
	st, _ := h.Boot("vm-a")
	if st.State != firstboot.Failed || st.FirstError() != "modules-final/config-scripts-user: runcmd: /opt/missing: No such file or directory" {
		t.Fatalf("after report.py: %s %q (script said %q)", st.State, st.FirstError(), out)
	}

	store.delete("vm-a")
	store.put(t, instanceDoc("vm-a", []string{"127.0.0.1"}, "")) // a new incarnation, reporting afresh
	if out := run(map[string]string{"var/log/cloud-init-output.log": "Traceback (most recent call last):\n"}); strings.Contains(out, "HTTP") {
		t.Errorf("report.py without cloud-init's files was refused: %s", out)
	}
	st, _ = h.Boot("vm-a")
	if st.State != firstboot.Failed || !strings.Contains(st.FirstError(), "cloud-init left no status.json or result.json") || !strings.Contains(st.Errors[0].Message, "Traceback") {
		t.Errorf("without cloud-init's files: %s %q", st.State, st.FirstError())
	}
	if st, _ := h.Boot("vm-bb"); st.State != firstboot.Pending {
		t.Errorf("vm-bb: %s", st.State)
	}
}

// TestReportScriptUnitsToHandler: a cloud-init that finished without an
// error, on a system where a spec mount's unit failed, as report.py posts
// it (systemctl and journalctl stubbed) to the real handler: the boot is
// failed, and the one line the row and the instance show is the unit's
// own (mount's) words. Then, in a running system with no failed unit, a
// spec mount whose device never appeared (its unit inactive: it failed
// as a dependency): failed too, the row naming the unit and its device;
// and a service that never started because the device it needs timed
// out (its start job's failure in the journal), the row naming it.
func TestReportScriptUnitsToHandler(t *testing.T) {
	cloudinittest.Require(t)
	store := newIndexStore()
	store.put(t, instanceDoc("vm-a", []string{"127.0.0.1"}, ""))
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	srv, _ := serve(t, h)
	cause := "mount: /srv/data: wrong fs type, bad option, bad superblock on tmpfs, missing codepage or helper program, or other error."
	journal := "Nov 29 03:40:01 debian systemd[1]: Mounting srv-data.mount - Mount tmpfs at /srv/data...\n" +
		"Nov 29 03:40:01 debian mount[812]: " + cause + "\n" +
		"Nov 29 03:40:01 debian systemd[1]: srv-data.mount: Mount process exited, code=exited, status=32/n/a\n" +
		"Nov 29 03:40:01 debian systemd[1]: srv-data.mount: Failed with result 'exit-code'.\n" +
		"Nov 29 03:40:01 debian systemd[1]: Failed to mount srv-data.mount - Mount tmpfs at /srv/data."
	stubs := reporttest.Systemd(t, "degraded", []reporttest.FailedUnit{{Unit: "srv-data.mount", Journal: journal}})
	clean := map[string]string{
		"run/cloud-init/status.json": `{"v1": {"datasource": "DataSourceNoCloud", "stage": null, "modules-final": {"errors": [], "start": 3.0, "finished": 4.0}}}`,
		"run/cloud-init/result.json": `{"v1": {"datasource": "DataSourceNoCloud", "errors": []}}`,
		"run/systemd/system/.keep":   "", // a systemd boot
	}
	check := func(stubs, want string) {
		t.Helper()
		out := runReportScript(t, srv.URL, clean, "PATH="+stubs+":/usr/bin:/bin")
		st, _ := h.Boot("vm-a")
		if st.State != firstboot.Failed || st.FirstError() != want {
			t.Fatalf("after report.py: %s %q, want failed %q (script said %q)", st.State, st.FirstError(), want, out)
		}
		if row := h.opts.Boots.Brief("vm-a", st.UID, firstboot.AgentCloudInit); row.FirstError() != want {
			t.Errorf("the fleet's row %q, want %q", row.FirstError(), want)
		}
	}
	check(stubs, "srv-data.mount: "+cause)

	store.delete("vm-a")
	store.put(t, instanceDoc("vm-a", []string{"127.0.0.1"}, "")) // a new incarnation, reporting afresh
	const device = "/dev/disk/by-label/vminit-test-no-such-label"
	journal = "Nov 29 03:41:31 debian systemd[1]: Dependency failed for srv-data.mount - Mount LABEL=vminit-test-no-such-label at /srv/data."
	stubs = reporttest.Systemd(t, "running", []reporttest.FailedUnit{{Unit: "srv-data.mount", Journal: journal, ActiveState: "inactive", What: device}})
	check(stubs, "srv-data.mount: enabled but not active once the boot settled: its device "+device+" was not found")

	// A running system with no failed unit and no inactive mount, whose
	// journal says a service's start job failed because the device it
	// needs timed out (reporttest.DependencyFailed): failed, the row
	// naming the service and what it needed.
	store.delete("vm-a")
	store.put(t, instanceDoc("vm-a", []string{"127.0.0.1"}, ""))
	check(reporttest.Systemd(t, "running", reporttest.DependencyFailed()),
		`app.service: never started: a unit it needs failed: Timed out waiting for device dev-disk-by\x2dlabel-vminit\x2dtest\x2dno\x2dsuch\x2dlabel.device - `+device+".")
}

// runReportScript runs the report script the served cloud-config
// installs (cloudinit/report.py) with the guest's Python, against the
// server at base, on a root holding files (cloud-init's status.json,
// result.json, output log), and returns what it printed.
func runReportScript(t *testing.T, base string, files map[string]string, env ...string) string {
	t.Helper()
	script, err := os.ReadFile("../cloudinit/report.py")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cloudinittest.WriteTree(t, root, files)
	return cloudinittest.RunReportScript(t, script, root, bootreport.ReportURL(base), env...)
}
