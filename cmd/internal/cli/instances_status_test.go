package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/dirstore"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// statusFleet is a real admin server on loopback over a directory store
// of four instances (web-1, web-2 and web-3 cloud-init, db Ignition),
// with the guests' handler and its first-boot tracker on a fixed clock,
// as `vminit serve` assembles them.
type statusFleet struct {
	boots *firstboot.Tracker
	uids  map[string]string
	flags []string // --server and --token-file
	clock *testtools.Clock
}

func newStatusFleet(t *testing.T) *statusFleet {
	t.Helper()
	return newStatusFleetOf(t, []string{"web-1", "web-2", "web-3", "db"})
}

// newStatusFleetOf is a statusFleet of the instances names (db, if one
// of them, Ignition; win-*, cloudbase-init).
func newStatusFleetOf(t *testing.T, names []string) *statusFleet {
	t.Helper()
	dir, work := t.TempDir(), t.TempDir()
	for i, name := range names {
		agent := "cloud-init"
		switch {
		case name == "db":
			agent = "ignition"
		case strings.HasPrefix(name, "win-"):
			agent = "cloudbase-init"
		}
		doc := fmt.Sprintf("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: %s}\nspec:\n  agent: %s\n  metadataServer: {addresses: [10.8.%d.%d]}\n", name, agent, i/250, i%250+1)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	store, err := dirstore.Open(dir, dirstore.Options{NoWatch: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	f := &statusFleet{clock: testtools.NewClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)), uids: map[string]string{}}
	f.boots = mdserver.NewTracker(firstboot.Options{Now: f.clock.Now})
	md := mdserver.NewHandler(store, mdserver.Options{Logger: quiet, Boots: f.boots, Now: f.clock.Now})
	const token = "status-test-token-0123456789"
	srv := httptest.NewServer(admin.NewHandler(store, admin.Options{Token: token, Logger: quiet, Metadata: md}))
	t.Cleanup(srv.Close)
	for _, name := range store.Snapshot().Names() {
		rec, _ := store.Snapshot().ByName(name)
		f.uids[name] = rec.UID
	}
	tokenFile := filepath.Join(work, "token")
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	f.flags = []string{"--server", srv.URL, "--token-file", tokenFile}
	old := statusClock
	statusClock = f.clock.Now
	t.Cleanup(func() { statusClock = old })
	t.Setenv("VMINIT_ADMIN_URL", "")
	t.Setenv("VMINIT_ADMIN_TOKEN", "")
	return f
}

func (f *statusFleet) record(t *testing.T, name, kind, event, result, msg string) {
	t.Helper()
	if err := f.boots.Record(name, f.uids[name], "cloud-init", firstboot.Event{Kind: kind, Name: event, Result: result, Message: msg}); err != nil {
		t.Fatal(err)
	}
}

// boot takes web-1 to done in 3m12s, web-2 to failed (its scripts-user
// module, with an escape sequence in the message that must not reach a
// terminal), and web-3 to running; db is never fetched.
func (f *statusFleet) boot(t *testing.T) {
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		f.boots.Fetch(n, f.uids[n], "cloud-init", "nocloud", "/nocloud/meta-data")
		f.boots.Fetch(n, f.uids[n], "cloud-init", "nocloud", "/nocloud/user-data")
	}
	f.clock.Advance(20 * time.Second)
	for _, n := range []string{"web-1", "web-2", "web-3"} {
		f.record(t, n, "start", "init-network", "", "")
		f.record(t, n, "finish", "init-network", "SUCCESS", "")
	}
	f.clock.Advance(70 * time.Second)
	f.record(t, "web-3", "start", "modules-config/config-apt-configure", "", "")
	f.record(t, "web-2", "start", "modules-final", "", "")
	f.record(t, "web-2", "finish", "modules-final/config-scripts-user", "FAIL", "running module scripts-user failed:\n\x1b[2Jbash: /opt/setup.sh: No such file or directory, and a very long tail to cut")
	f.record(t, "web-2", "finish", "modules-final", "FAIL", "")
	f.clock.Advance(102 * time.Second)
	f.record(t, "web-1", "start", "modules-final", "", "")
	f.record(t, "web-1", "finish", "modules-final", "SUCCESS", "")
	f.clock.Advance(33 * time.Second)
}

func (f *statusFleet) run(t *testing.T, args ...string) (int, string, string) {
	return run(t, append(append([]string{"instances", "status"}, args...), f.flags...)...)
}

// TestInstancesStatusAllPages: a fleet larger than the admin API's
// largest page is shown whole: the client follows GET /v1/boots's pages.
func TestInstancesStatusAllPages(t *testing.T) {
	names := make([]string, admin.MaxBootsPage+1)
	for i := range names {
		names[i] = fmt.Sprintf("vm-%04d", i)
	}
	f := newStatusFleetOf(t, names)
	code, stdout, stderr := f.run(t, "--json")
	var sum firstboot.Summary
	if err := json.Unmarshal([]byte(stdout), &sum); code != ExitOK || err != nil {
		t.Fatalf("exit %d %v %s", code, err, stderr)
	}
	if len(sum.Instances) != len(names) || sum.Counts[firstboot.Pending] != len(names) || sum.Instances[len(names)-1].Name != names[len(names)-1] || sum.Continue != "" {
		t.Errorf("%d rows, counts %v, continue %q; want %d", len(sum.Instances), sum.Counts, sum.Continue, len(names))
	}
}

// TestInstancesStatus: the table, one instance's detail and --json, from
// a real admin server; bad flags are usage errors naming each problem.
func TestInstancesStatus(t *testing.T) {
	f := newStatusFleet(t)
	f.boot(t)

	code, stdout, stderr := f.run(t)
	const table = `NAME   AGENT       STATE    STAGE                                ELAPSED  ERROR
db     ignition    pending                                       -
web-1  cloud-init  done                                          3m12s
web-2  cloud-init  failed   modules-final/config-scripts-user    1m30s    modules-final/config-scripts-user: bash: /opt/setup.sh: No …
web-3  cloud-init  running  modules-config/config-apt-configure  3m45s
1 done, 1 failed, 1 running, 1 pending
`
	if code != ExitOK || stdout != table {
		t.Errorf("table: exit %d %s\n%s\nwant\n%s", code, stderr, stdout, table)
	}
	if code, stdout, _ := f.run(t, "--state", "failed,pending", "--agent", "cloud-init"); code != ExitOK ||
		!strings.Contains(stdout, "web-2") || strings.Contains(stdout, "web-1") || !strings.HasSuffix(stdout, "\n1 failed\n") {
		t.Errorf("filtered: %d\n%s", code, stdout)
	}
	if code, stdout, _ := f.run(t, "web-3", "db"); code != ExitOK || !strings.HasSuffix(stdout, "\n1 running, 1 pending\n") || strings.Contains(stdout, "web-1") {
		t.Errorf("named: %d\n%s", code, stdout)
	}

	code, stdout, _ = f.run(t, "web-2")
	for _, want := range []string{
		"State:        failed (modules-final/config-scripts-user)\n",
		"First fetch:  2026-11-26T12:00:00Z\n",
		"Took:         1m30s\n",
		"  STAGE          STARTED  DURATION  RESULT\n  init-network   +20s     0s        SUCCESS\n  modules-final  +1m30s   0s        FAIL\n",
		"Errors:\n  modules-final/config-scripts-user\n    running module scripts-user failed:\n    bash: /opt/setup.sh: No such file or directory, and a very long tail to cut\n",
		"Events (the last 5):\n  TIME    KIND    NAME                                      TOOK  RESULT   MESSAGE\n  +0s     fetch   /nocloud/meta-data (nocloud, 2 requests)  0s\n  +20s    finish  init-network                              0s    SUCCESS\n",
	} {
		if code != ExitOK || !strings.Contains(stdout, want) {
			t.Errorf("detail: want %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "\x1b") {
		t.Errorf("an escape sequence from the guest reached the output:\n%q", stdout)
	}

	code, stdout, _ = f.run(t, "--json")
	var sum firstboot.Summary
	if err := json.Unmarshal([]byte(stdout), &sum); code != ExitOK || err != nil || len(sum.Instances) != 4 ||
		sum.Counts[firstboot.Failed] != 1 || sum.Instances[2].Errors[0].Module != "config-scripts-user" {
		t.Errorf("--json: %d %v\n%s", code, err, stdout)
	}
	// Every row has the same keys: uid too, empty or not.
	var rows struct{ Instances []map[string]any }
	json.Unmarshal([]byte(stdout), &rows)
	for _, row := range rows.Instances {
		if _, ok := row["uid"]; !ok {
			t.Errorf("--json: a row without uid: %v", row)
		}
	}
	code, stdout, _ = f.run(t, "web-3", "--json")
	var st firstboot.Status
	if err := json.Unmarshal([]byte(stdout), &st); code != ExitOK || err != nil || st.State != firstboot.Running || st.Stage != "modules-config" || len(st.Events) == 0 {
		t.Errorf("--json NAME: %d %v\n%s", code, err, stdout)
	}

	if code, _, stderr := f.run(t, "nope"); code != ExitInvalid || !strings.Contains(stderr, `instance "nope" not found`) {
		t.Errorf("unknown NAME: %d %s", code, stderr)
	}
	if code, _, stderr := f.run(t, "--state", "failed,brokn", "--agent", "windows"); code != ExitUsage ||
		!strings.Contains(stderr, `--state="brokn": want one of`) || !strings.Contains(stderr, `; --agent="windows": want one of cloud-init, ignition, cloudbase-init`) {
		t.Errorf("bad filters: %d %s", code, stderr)
	}
	if code, _, stderr := f.run(t, "--timeout", "5m"); code != ExitUsage || !strings.Contains(stderr, "--timeout") {
		t.Errorf("--timeout without --wait: %d %s", code, stderr)
	}

	// A single fetch is "1 request".
	f.boots.Fetch("db", f.uids["db"], "ignition", "ignition", "/ignition/config")
	if code, stdout, _ := f.run(t, "db"); code != ExitOK || !strings.Contains(stdout, "/ignition/config (ignition, 1 request)") {
		t.Errorf("one fetch: %d\n%s", code, stdout)
	}
}

// timeoutExit finds, in a help text, each exit code it gives for
// --timeout: "exit N" after --timeout on a line, and "N when --timeout"
// or "N on --timeout".
var timeoutExit = regexp.MustCompile(`(?:--timeout[^\n]*\bexit (\d)\b|(\d)\s+(?:when|on) --timeout)`)

// TestInstancesStatusHelpExitCodes: every exit code the help gives for
// --wait's --timeout is ExitStillGoing's, as the docs say; 2 is a usage
// error's (the help once said 2, in three places).
func TestInstancesStatusHelpExitCodes(t *testing.T) {
	code, stdout, _ := run(t, "instances", "status", "--help")
	ms := timeoutExit.FindAllStringSubmatch(stdout, -1)
	if code != ExitOK || len(ms) < 3 {
		t.Fatalf("exit %d, %d statements of --timeout's exit code, want 3:\n%s", code, len(ms), stdout)
	}
	for _, m := range ms {
		if got := m[1] + m[2]; got != strconv.Itoa(ExitStillGoing) {
			t.Errorf("help says %q: --timeout exits %d", m[0], ExitStillGoing)
		}
	}
}

// TestInstancesStatusWait: --wait exits 0 when every selected instance
// is done, 1 as soon as all have finished and one failed (naming it),
// and ExitStillGoing at --timeout naming those still going.
func TestInstancesStatusWait(t *testing.T) {
	f := newStatusFleet(t)
	f.boot(t)

	if code, stdout, stderr := f.run(t, "web-1", "--wait"); code != ExitOK || !strings.HasSuffix(stdout, "\n1 done\n") {
		t.Errorf("wait for a done instance: %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr := f.run(t, "web-1", "web-2", "--wait")
	if code != ExitInvalid || !strings.HasSuffix(stdout, "\n1 done, 1 failed\n") || stderr != "web-2: first boot failed: modules-final/config-scripts-user: bash: /opt/setup.sh: No such file or directory, and a very long tail to cut\n" {
		t.Errorf("wait with a failure: %d %s %q", code, stdout, stderr)
	}
	code, stdout, _ = f.run(t, "web-1", "web-2", "--wait", "--watch", "--json")
	var sum firstboot.Summary
	if err := json.Unmarshal([]byte(stdout), &sum); code != ExitInvalid || err != nil || strings.Count(stdout, "\n") != 1 || len(sum.Instances) != 2 {
		t.Errorf("--watch --json: one document a line: %d %v %q", code, err, stdout)
	}
	code, stdout, stderr = f.run(t, "--wait", "--timeout", "1s", "--agent", "cloud-init")
	if code != ExitStillGoing || !strings.Contains(stderr, "timed out after 1s: still going: web-3 (running)") || !strings.Contains(stdout, "web-3") {
		t.Errorf("wait past --timeout: %d %s %s", code, stdout, stderr)
	}
}

// TestInstancesStatusUnreported: in a mixed fleet, a Windows instance
// (cloudbase-init sends no first-boot report) fetched an hour ago is
// fetched, not stalled, and the table's STAGE, the detail and the JSON
// say why; --wait does not wait for it and names it once on stderr, and
// with only such instances selected has nothing to wait for (exit 2, at
// once, not at --timeout). Before, it read stalled and --wait waited for
// it until the timeout (exit 3).
func TestInstancesStatusUnreported(t *testing.T) {
	f := newStatusFleetOf(t, []string{"web-1", "web-2", "web-3", "db", "win-1"})
	f.boots.Fetch("win-1", f.uids["win-1"], "cloudbase-init", "openstack", "/openstack/latest/meta_data.json")
	f.boot(t)
	f.clock.Advance(time.Hour)

	code, stdout, stderr := f.run(t, "win-1", "web-3")
	const table = `NAME   AGENT           STATE    STAGE                                      ELAPSED  ERROR
win-1  cloudbase-init  fetched  cloudbase-init sends no first-boot report  1h3m
web-3  cloud-init      stalled  modules-config/config-apt-configure        1h3m
1 stalled, 1 fetched
`
	if code != ExitOK || stdout != table {
		t.Errorf("table: exit %d %s\n%s", code, stderr, stdout)
	}
	if code, stdout, _ := f.run(t, "win-1"); code != ExitOK || !strings.Contains(stdout, "State:        fetched (cloudbase-init sends no first-boot report)\n") {
		t.Errorf("detail: %d\n%s", code, stdout)
	}
	code, stdout, _ = f.run(t, "--json", "--agent", "cloudbase-init")
	var rows struct{ Instances []map[string]any }
	if err := json.Unmarshal([]byte(stdout), &rows); code != ExitOK || err != nil || len(rows.Instances) != 1 || rows.Instances[0]["noReport"] != true {
		t.Errorf("--json: %d %v\n%s", code, err, stdout)
	}

	const told = "win-1: cloudbase-init sends no first-boot report: not waited for\n"
	if code, stdout, stderr := f.run(t, "web-1", "win-1", "--wait", "--timeout", "2s"); code != ExitOK || stderr != told || !strings.HasSuffix(stdout, "\n1 done, 1 fetched\n") {
		t.Errorf("wait for web-1 beside win-1: %d %q %q", code, stdout, stderr)
	}
	if code, _, stderr := f.run(t, "--wait", "--timeout", "1s"); code != ExitStillGoing || strings.Count(stderr, told) != 1 ||
		!strings.Contains(stderr, "still going: db (pending), web-3 (stalled)\n") {
		t.Errorf("wait for the fleet: %d %q", code, stderr)
	}
	for _, args := range [][]string{{"win-1"}, {"--agent", "cloudbase-init"}} {
		code, _, stderr := f.run(t, append(args, "--wait", "--timeout", "2s")...) // at once: the timeout only bounds a failure
		if code != ExitUsage || !strings.HasPrefix(stderr, told) || !strings.Contains(stderr, "nothing to wait for") {
			t.Errorf("wait for %v alone: %d %q", args, code, stderr)
		}
	}
}

// TestInstancesStatusWatch: --watch on a pipe prints the table again at
// each change, after a blank line; with --wait it ends when the boots do.
func TestInstancesStatusWatch(t *testing.T) {
	f := newStatusFleet(t)
	f.boot(t)
	var out, errb testtools.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(append([]string{"instances", "status", "web-3", "--watch", "--wait"}, f.flags...), &out, &errb)
	}()
	for !strings.Contains(out.String(), "1 running") {
		time.Sleep(10 * time.Millisecond)
	}
	f.record(t, "web-3", "finish", "modules-config/config-apt-configure", "SUCCESS", "")
	f.clock.Advance(5 * time.Second)
	f.record(t, "web-3", "start", "modules-final", "", "")
	f.record(t, "web-3", "finish", "modules-final", "SUCCESS", "")
	if code := <-done; code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	frames := strings.Split(out.String(), "\n\n")
	first, last := frames[0], frames[len(frames)-1]
	if !strings.Contains(first, "web-3  cloud-init  running  modules-config/config-apt-configure  3m45s") ||
		last != "NAME   AGENT       STATE  STAGE  ELAPSED  ERROR\nweb-3  cloud-init  done          3m50s\n1 done\n" || strings.Contains(out.String(), "\x1b") {
		t.Errorf("frames:\n%s", out.String())
	}
}

// TestStatusRedrawsInPlace: on a terminal, a watch's next table goes up
// over the last one and clears below it, instead of following it.
func TestStatusRedrawsInPlace(t *testing.T) {
	var b strings.Builder
	out := &statusOutput{w: &b, terminal: true}
	sum := firstboot.Summary{Counts: map[firstboot.State]int{firstboot.Pending: 1}, Instances: []firstboot.Status{{Name: "a", State: firstboot.Pending}}}
	out.summary(sum, true)
	first := b.String()
	out.summary(sum, true)
	if want := first + "\x1b[3A\x1b[J" + first; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 45 * time.Second: "45s", 3*time.Minute + 12*time.Second + 900*time.Millisecond: "3m12s",
		4 * time.Minute: "4m", 42*time.Minute + 30*time.Second: "42m", 2*time.Hour + 5*time.Minute: "2h5m",
		31 * time.Hour: "31h", 76 * time.Hour: "3d4h", 12 * 24 * time.Hour: "12d",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("%v: %s, want %s", d, got, want)
		}
	}
}
