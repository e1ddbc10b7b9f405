package run

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// servedGuest is a Guest as Start leaves it with Serve, without QEMU: the
// relay (its handler and tracker) is real, the console has already given
// the verdict, and the test plays the guest's agent on the tracker.
func servedGuest(t *testing.T, verdict Result, progress io.Writer) (*Guest, *firstboot.Tracker) {
	t.Helper()
	return servedGuestWith(t, &verdict, Options{Progress: progress})
}

// servedGuestWith is servedGuest with more options; a nil verdict is a
// console that never says the agent finished.
func servedGuestWith(t *testing.T, verdict *Result, o Options) (*Guest, *firstboot.Tracker) {
	t.Helper()
	o.Instance, o.Image, o.Serve = loadSpec(t, "../../../examples/dev-vm.yaml"), "x", true
	c, err := configure(o)
	if err != nil {
		t.Fatal(err)
	}
	boots := c.tracker()
	r, err := startRelay(c.servedInstance(), relaySocket(t.TempDir()), boots)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	g := &Guest{c: c, relay: r, start: time.Now(), console: ring{max: MaxConsole},
		watch: &watcher{agent: c.agent}, result: verdict,
		agentCh: make(chan struct{}), readDone: make(chan struct{}), exited: make(chan struct{})}
	if verdict != nil {
		close(g.agentCh)
	}
	return g, boots
}

// waitLine is a progress writer that says when a line holding want was
// written.
type waitLine struct {
	want string
	once sync.Once
	seen chan struct{}
}

func newWaitLine(want string) *waitLine { return &waitLine{want: want, seen: make(chan struct{})} }

func (w *waitLine) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// bootedUpTo plays a cloud-init boot on the tracker up to the finish of
// modules-final, with scripts-user failing.
func bootedUpTo(t *testing.T, boots *firstboot.Tracker, failing bool) {
	t.Helper()
	boots.Fetch("dev", "", "cloud-init", "ec2", "/latest/meta-data/instance-id")
	result := firstboot.ResultSuccess
	if failing {
		result = firstboot.ResultFail
	}
	for _, ev := range []firstboot.Event{
		{Kind: firstboot.KindStart, Name: "modules-final"},
		{Kind: firstboot.KindStart, Name: "modules-final/config-scripts-user"},
		{Kind: firstboot.KindFinish, Name: "modules-final/config-scripts-user", Result: result, Message: "running config-scripts-user"},
		{Kind: firstboot.KindFinish, Name: "modules-final", Result: result},
	} {
		if err := boots.Record("dev", "", "cloud-init", ev); err != nil {
			t.Fatal(err)
		}
	}
}

// logTail is 20 lines of a guest's log, the last six saying what failed.
var logTail = strings.Repeat("randomart\n", 14) + "vminit-boom\n" + strings.Repeat("WARNING: scripts-user failed\n", 4) + "Cloud-init v. 22.4.2 finished"

// TestWaitFirstBootWaitsForTheServersReport: the console said cloud-init
// finished without an error, but the report that reaches the metadata
// server afterwards says scripts-user failed: WaitFirstBoot waits for it,
// and the run is failed, naming the module and carrying the report's
// words (made printable: they are the guest's).
func TestWaitFirstBootWaitsForTheServersReport(t *testing.T) {
	waiting := newWaitLine("waiting for the guest's first-boot report")
	g, boots := servedGuest(t, Result{Agent: "cloud-init", OK: true}, waiting)
	bootedUpTo(t, boots, true)
	go func() {
		<-waiting.seen
		boots.Report("dev", "", "cloud-init", firstboot.Report{Failed: true, Message: "1 error",
			Errors: []firstboot.Failure{{Stage: "modules-final", Module: "config-scripts-user", Message: "vminit-boom\n\x1b]0;title\x07exit 3"},
				{Stage: "modules-final", Module: "config-final-message", Message: "RuntimeError('Runparts')\n" + logTail}}})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // against a hang, not a measure
	defer cancel()
	res, err := g.WaitFirstBoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := res.FirstBoot
	if st == nil || st.State != firstboot.Failed || st.Stage != "modules-final" || !reported(st) {
		t.Fatalf("FirstBoot %+v; want failed at modules-final, with the report", st)
	}
	if res.OK {
		t.Error("OK: a boot the server saw fail is a failed run")
	}
	want := "metadata server: modules-final/config-scripts-user: vminit-boom\nexit 3"
	found := false
	for _, e := range res.Errors {
		found = found || e == want
		if strings.Contains(e, "\x1b") {
			t.Errorf("an error carries the guest's escape sequence: %q", e)
		}
	}
	if !found {
		t.Errorf("Errors %q; want %q", res.Errors, want)
	}
	// A log's tail is cut to its last lines in Errors, kept whole in FirstBoot.
	if e := res.Errors[len(res.Errors)-1]; e != "metadata server: modules-final/config-final-message: RuntimeError('Runparts')\n…\n"+strings.Join(strings.Split(logTail, "\n")[14:], "\n") {
		t.Errorf("the log tail's error is %q", e)
	}
	if f := st.Errors[len(st.Errors)-1]; !strings.HasSuffix(f.Message, logTail) {
		t.Errorf("FirstBoot's error is %q", f.Message)
	}
	if len(res.Warnings) > 0 {
		t.Errorf("Warnings %q; the report came", res.Warnings)
	}
}

// TestWaitFirstBootWithoutTheReport: a report that never comes ends the
// wait at ReportWait, or at once when QEMU has exited; the server's
// status is what it saw (done: the run stays OK) and a warning says the
// report is missing.
func TestWaitFirstBootWithoutTheReport(t *testing.T) {
	for _, exited := range []bool{false, true} {
		wait := time.Hour
		if !exited {
			wait = 50 * time.Millisecond
		}
		var progress testtools.SyncBuffer
		g, boots := servedGuestWith(t, &Result{Agent: "cloud-init", OK: true}, Options{Progress: &progress, ReportWait: wait})
		if exited {
			close(g.exited)
		}
		bootedUpTo(t, boots, false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // against a hang, not a measure
		res, err := g.WaitFirstBoot(ctx)
		if err != nil || ctx.Err() != nil {
			t.Fatalf("QEMU exited %v: %v, %v", exited, err, ctx.Err())
		}
		cancel()
		if !res.OK || res.FirstBoot == nil || res.FirstBoot.State != firstboot.Done {
			t.Errorf("QEMU exited %v: OK %v, FirstBoot %+v; want OK and done", exited, res.OK, res.FirstBoot)
		}
		if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "first-boot report did not reach the metadata server") ||
			!strings.Contains(progress.String(), res.Warnings[0]) {
			t.Errorf("QEMU exited %v: Warnings %q, progress:\n%s", exited, res.Warnings, progress.String())
		}
	}
}

// TestWaitFirstBootOfAGuestNeverHeardOf: a guest that never fetched (its
// kernel panicked) is pending, and nothing is waited for; without Serve
// there is no server's view at all.
func TestWaitFirstBootOfAGuestNeverHeardOf(t *testing.T) {
	waiting := newWaitLine("waiting for")
	g, _ := servedGuestWith(t, &Result{Agent: "cloud-init", Errors: []string{"kernel panic: VFS"}, Panic: "VFS"},
		Options{Progress: waiting, ReportWait: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // against a hang, not a measure
	defer cancel()
	res, _ := g.WaitFirstBoot(ctx)
	if ctx.Err() != nil {
		t.Fatal("WaitFirstBoot waited for a guest that never fetched")
	}
	if res.FirstBoot == nil || res.FirstBoot.State != firstboot.Pending || res.OK || len(res.Errors) != 1 || len(res.Warnings) > 0 {
		t.Errorf("Result %+v, FirstBoot %+v; want the panic and pending", res, res.FirstBoot)
	}
	select {
	case <-waiting.seen:
		t.Error("said it waits for a report")
	default:
	}

	g.relay = nil
	if res, _ := g.WaitFirstBoot(ctx); res.FirstBoot != nil {
		t.Errorf("without Serve: FirstBoot %+v", res.FirstBoot)
	}
	if _, ok := g.FirstBoot(); ok {
		t.Error("without Serve: Guest.FirstBoot is there")
	}
}

// TestServedGuestStalls: a guest whose agent went silent past the run's
// StallAfter reads stalled, and a run that times out says where the
// server last saw it.
func TestServedGuestStalls(t *testing.T) {
	g, boots := servedGuestWith(t, nil, Options{StallAfter: time.Nanosecond, Timeout: time.Nanosecond})
	boots.Fetch("dev", "", "cloud-init", "ec2", "/latest/meta-data/instance-id")
	if err := boots.Record("dev", "", "cloud-init", firstboot.Event{Kind: firstboot.KindStart, Name: "init-network/config-bootcmd"}); err != nil {
		t.Fatal(err)
	}
	if st, ok := g.FirstBoot(); !ok || st.State != firstboot.Stalled || st.Module != "config-bootcmd" {
		t.Errorf("FirstBoot %+v, %v; want stalled in config-bootcmd", st, ok)
	}
	res, err := g.WaitFirstBoot(context.Background())
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "the metadata server saw the boot stalled at init-network/config-bootcmd") {
		t.Errorf("timeout: %v", err)
	}
	if res.FirstBoot == nil || res.FirstBoot.State != firstboot.Stalled {
		t.Errorf("FirstBoot %+v; want stalled", res.FirstBoot)
	}
	_, err = configure(Options{Instance: g.c.Instance, Image: "x", Serve: true, StallAfter: -time.Second, ReportWait: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "stall after -1s: want a positive duration; report wait -1s: want a positive duration") {
		t.Errorf("a negative StallAfter and ReportWait: %v", err)
	}
}

// webhookBoot posts a cloud-init boot's events with cloud-init's own
// reporting code (its WebHookHandler, from its posting thread): init-
// network's and modules-config's modules succeed, modules-final's
// scripts-user fails. Input: endpoint.
const webhookBoot = `
import json, sys
from cloudinit import reporting
from cloudinit.reporting import events
inp = json.load(sys.stdin)
reporting.update_configuration({"vminit": {"type": "webhook", "endpoint": inp["endpoint"], "timeout": 5, "retries": 1}})
for stage, modules in (("init-network", ["config-bootcmd"]), ("modules-config", ["config-locale"]), ("modules-final", ["config-scripts-user", "config-final-message"])):
    with events.ReportEventStack(stage, "running " + stage, reporting_enabled=True) as s:
        for m in modules:
            with events.ReportEventStack(m, "running " + m, parent=s) as ms:
                if m == "config-scripts-user":
                    ms.result = events.status.FAIL
reporting.flush_events()
json.dump({}, sys.stdout)
`

// TestRelayCarriesTheGuestsFirstBoot: what a served guest posts of its
// first boot reaches the run's tracker through the relay, over the one
// stream QEMU carries: cloud-init's own webhook handler posts its events,
// and the report script the served data installs posts its report. The
// boot is failed, naming the module and carrying the log's words.
func TestRelayCarriesTheGuestsFirstBoot(t *testing.T) {
	cloudinittest.Require(t)
	base, r := viaNewRelay(t, loadSpec(t, "../../../examples/dev-vm.yaml"))
	cloudinittest.Run(t, webhookBoot, map[string]any{"endpoint": bootreport.EventsURL(base)}, &struct{}{})
	st := r.firstBoot()
	if st.State != firstboot.Failed || len(st.Stages) != 3 || !strings.HasPrefix(st.FirstError(), "modules-final/config-scripts-user") {
		t.Fatalf("after the webhook's events: %s %+v %q", st.State, st.Stages, st.FirstError())
	}

	root := t.TempDir()
	result := `{"v1": {"datasource": "DataSourceEc2Local", "errors": ["('scripts-user', RuntimeError('Runparts: 1 failures (runcmd) in 1 attempted commands'))"], "recoverable_errors": {}}}`
	for p, data := range map[string]string{
		"run/cloud-init/status.json": `{"v1": {"datasource": "DataSourceEc2Local", "stage": null}}`, "run/cloud-init/result.json": result,
		"var/log/cloud-init-output.log": "vminit-boom\n", "var/lib/cloud/instance/boot-finished": "",
	} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The script as the served data carries it (package cloudinit embeds
	// this file).
	cmd := exec.Command(cloudinittest.Python, "../../../cloudinit/report.py")
	cmd.Env = []string{bootreport.ReportURLEnv + "=" + bootreport.ReportURL(base), "VMINIT_REPORT_TEST_ROOT=" + root, "VMINIT_REPORT_TEST_DELAY=0"}
	if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "POST") {
		t.Fatalf("report.py: %v\n%s", err, out)
	}
	st = r.firstBoot()
	if !reported(&st) || !slices.ContainsFunc(st.Errors, func(f firstboot.Failure) bool { return strings.Contains(f.Message, "vminit-boom") }) {
		t.Errorf("after the report: %s, reported %v, errors %+v", st.State, reported(&st), st.Errors)
	}
}

// TestRelayTakesTheLargestReport: a report as large as the handler takes
// (firstboot.MaxReportBytes) passes the relay, whose bound is on the
// header and body together (it was 64 KiB: the report was refused 400
// by the relay, not the handler); one byte more is the handler's 413.
func TestRelayTakesTheLargestReport(t *testing.T) {
	base, r := viaNewRelay(t, loadSpec(t, "../../../examples/dev-vm.yaml"))
	report := func(size int) int {
		head := `{"agent": "cloud-init", "result": {"v1": {"errors": []}}, "log": "`
		body := head + strings.Repeat("x", size-len(head)-2) + `"}`
		resp, err := http.Post(bootreport.ReportURL(base), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := report(firstboot.MaxReportBytes); code != http.StatusNoContent {
		t.Errorf("a report of %d bytes: %d, want 204", firstboot.MaxReportBytes, code)
	}
	if st := r.firstBoot(); !reported(&st) {
		t.Errorf("the tracker has no report: %s, %d events", st.State, len(st.Events))
	}
	if code := report(firstboot.MaxReportBytes + 1); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a report of %d bytes: %d, want 413", firstboot.MaxReportBytes+1, code)
	}
}
