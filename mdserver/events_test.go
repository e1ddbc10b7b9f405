package mdserver

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/testing/cbitest"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// A cloud-init boot's events, as its webhook handler posts them (the
// parser's test proves the shape against cloud-init's own code).
const (
	evStartFinal  = `{"name": "modules-final", "description": "running modules for final", "event_type": "start", "origin": "cloudinit", "timestamp": 1764158400.25}`
	evFailScripts = `{"name": "modules-final/config-scripts-user", "description": "running config-scripts-user with frequency once-per-instance", "event_type": "finish", "origin": "cloudinit", "timestamp": 1764158401.5, "result": "FAIL"}`
	evFinishFinal = `{"name": "modules-final", "description": "running modules for final", "event_type": "finish", "origin": "cloudinit", "timestamp": 1764158402.0, "result": "FAIL"}`
	reportFailed  = `{"agent": "cloud-init", "result": {"v1": {"datasource": "DataSourceNoCloud", "errors": ["('scripts-user', RuntimeError('Runparts: 1 failures in 1 attempted commands'))"]}}, "log": "runcmd: /opt/missing: No such file or directory\n"}`
)

// TestGuestWrites: over real HTTP on loopback, a guest's events and
// report move its own instance's first boot to failed, naming the module;
// every answer of the write path is the one documented; the audit lines
// say "write" and never carry the payload; the metrics count the writes.
func TestGuestWrites(t *testing.T) {
	var audit bytes.Buffer
	m := NewMetrics()
	store := testStore(t,
		testRecord(t, instanceDoc("vm-a", []string{"127.0.0.2"}, ""), "1"),
		// Served the write path though it lists only EC2 and requires
		// IMDSv2 tokens: the write path hands out no data.
		testRecord(t, instanceDoc("vm-bb", []string{"127.0.0.3"}, "    imdsv2: required\n    dialects: [ec2]\n"), "1"))
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Metrics: m, Logger: slog.New(slog.NewTextHandler(&audit, nil))})
	srv, _ := serve(t, h)
	a, bb := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	events := srv.URL + bootreport.EventsPath

	for _, ev := range []string{evStartFinal, evFailScripts, evFinishFinal} {
		if r := do(t, a, "POST", events, nil, ev); r.status != 204 || r.body != "" {
			t.Fatalf("POST an event: %d %q", r.status, r.body)
		}
	}
	json := map[string]string{"Content-Type": "application/json; charset=utf-8"}
	if r := do(t, a, "POST", srv.URL+bootreport.ReportPath, json, reportFailed); r.status != 204 {
		t.Fatalf("POST the report: %d %q", r.status, r.body)
	}
	st, _ := h.Boot("vm-a")
	if st.State != firstboot.Failed || len(st.Errors) != 1 || st.FirstError() != "modules-final/config-scripts-user: runcmd: /opt/missing: No such file or directory" ||
		st.Errors[0].Message != "RuntimeError('Runparts: 1 failures in 1 attempted commands')\nruncmd: /opt/missing: No such file or directory" {
		t.Errorf("vm-a after its events and report: %s %+v", st.State, st.Errors)
	}
	if r := do(t, bb, "POST", events, nil, evStartFinal); r.status != 204 {
		t.Errorf("an instance served EC2 only, IMDSv2 required: %d %q", r.status, r.body)
	}

	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		body               string
		status             int
		reply              string // a substring of the body; "" for an empty one
	}{
		{"malformed", "POST", bootreport.EventsPath, nil, `{"name": "x"`, 400, "vminit: instance vm-a: bad event: unexpected end of JSON input\n"},
		{"not an event", "POST", bootreport.EventsPath, nil, `{"name": "x", "event_type": "progress"}`, 400, `event_type "progress"`},
		{"another agent's report", "POST", bootreport.ReportPath, nil, `{"agent": "ignition", "systemState": "running"}`, 400, "a report of ignition, and its spec.agent is cloud-init"},
		{"a form", "POST", bootreport.EventsPath, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, evStartFinal, 415, ""},
		{"too large, said", "POST", bootreport.EventsPath, nil, `{"name": "` + strings.Repeat("x", firstboot.MaxEventBytes) + `"}`, 413, ""},
		{"a report too large", "POST", bootreport.ReportPath, nil, strings.Repeat(" ", firstboot.MaxReportBytes+1), 413, ""},
		{"GET", "GET", bootreport.EventsPath, nil, "", 405, ""},
		{"PUT", "PUT", bootreport.ReportPath, nil, "{}", 405, ""},
		{"another path", "GET", "/vminit/v1/other", nil, "", 404, ""},
	} {
		r := do(t, a, tc.method, srv.URL+tc.path, tc.hdr, tc.body)
		if r.status != tc.status || (tc.reply == "") != (r.body == "") || !strings.Contains(r.body, tc.reply) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.body, tc.status, tc.reply)
		}
		if tc.method == "GET" && tc.status == 405 && r.header.Get("Allow") != "POST" {
			t.Errorf("%s: Allow %q", tc.name, r.header.Get("Allow"))
		}
	}
	// Streamed, without a length: cut at the bound.
	big := strings.NewReader(strings.Repeat(" ", 2*firstboot.MaxEventBytes))
	req := newRequest(t, "POST", events, struct{ *strings.Reader }{big})
	if res, err := a.Do(req); err != nil || res.StatusCode != 413 {
		t.Errorf("a chunked body beyond the bound: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	if r := do(t, clientFrom("127.0.0.9"), "POST", events, nil, evStartFinal); r.status != 404 || r.body != refusedNoOwner.message(netip.MustParseAddr("127.0.0.9")) {
		t.Errorf("from an address nobody owns: %d %q, want a 404 that says why", r.status, r.body)
	}

	if strings.Contains(audit.String(), "scripts-user") || strings.Contains(audit.String(), "Runparts") {
		t.Errorf("the audit log carries a payload:\n%s", audit.String())
	}
	if n := strings.Count(audit.String(), `msg=write`); n != 16 {
		t.Errorf("%d write audit lines, want 16:\n%s", n, audit.String())
	}
	var sb strings.Builder
	m.WriteTo(&sb)
	for _, want := range []string{
		`vminit_first_boot_writes_total{kind="event",result="accepted"} 4`,
		`vminit_first_boot_writes_total{kind="event",result="refused"} 7`,
		`vminit_first_boot_writes_total{kind="report",result="accepted"} 1`,
		`vminit_first_boot_writes_total{kind="report",result="refused"} 3`,
		`vminit_mdserver_requests_total{dialect="firstboot",code="204"} 5`,
		`vminit_mdserver_requests_total{dialect="firstboot",code="415"} 1`,
		`vminit_first_boots{state="failed"} 1`, `vminit_first_boots{state="running"} 1`, `vminit_first_boots{state="pending"} 0`,
	} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, sb.String())
		}
	}
}

// TestFetchEvents: every request answered with data is a fetch of the
// instance's first boot; one refused, or answered 404, is not.
func TestFetchEvents(t *testing.T) {
	store := twoInstances(t, "")
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	srv, _ := serve(t, h)
	a := clientFrom("127.0.0.2")
	if r := get(t, a, srv.URL+"/nocloud/nothing"); r.status != 404 {
		t.Fatalf("an unknown path: %d", r.status)
	}
	if st, _ := h.Boot("vm-a"); st.State != firstboot.Pending {
		t.Errorf("after a 404: %s", st.State)
	}
	for _, p := range []string{"/nocloud/meta-data", "/nocloud/user-data", "/latest/meta-data/instance-id"} {
		if r := get(t, a, srv.URL+p); r.status != 200 {
			t.Fatalf("GET %s: %d", p, r.status)
		}
	}
	st, _ := h.Boot("vm-a")
	if st.State != firstboot.Fetched || st.Agent != "cloud-init" || len(st.Events) != 2 ||
		st.Events[0].Dialect != "nocloud" || st.Events[0].Count != 2 || st.Events[0].Name != "/nocloud/meta-data" || st.Events[1].Dialect != "ec2" {
		t.Errorf("after three fetches: %s %+v", st.State, st.Events)
	}
	if st, _ := h.Boot("vm-bb"); st.State != firstboot.Pending {
		t.Errorf("vm-bb, never heard of: %s", st.State)
	}
}

// TestSweepDropsBoots: the first boots of instances deleted, or of
// incarnations re-created, are dropped with the rest of their state.
func TestSweepDropsBoots(t *testing.T) {
	s := newIndexStore()
	s.put(t, instanceDoc("vm-a", []string{"127.0.0.2"}, ""))
	s.put(t, instanceDoc("vm-bb", []string{"127.0.0.3"}, ""))
	h := NewHandler(s, Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		h.ServeHTTP(newRecorder(), guestRequest(t, src, "GET", "/nocloud/meta-data", ""))
	}
	if n := h.Boots().Len(); n != 2 {
		t.Fatalf("%d boots tracked, want 2", n)
	}
	s.delete("vm-a")
	s.delete("vm-bb")
	s.put(t, instanceDoc("vm-bb", []string{"127.0.0.3"}, "")) // another incarnation
	h.sweep(s.Snapshot())
	if n := h.Boots().Len(); n != 0 {
		t.Errorf("%d boots tracked after vm-a's deletion and vm-bb's re-creation, want 0", n)
	}
}

// TestBootMetrics: a boot's time from its first fetch to its end goes to
// the histogram of its agent and outcome, through the tracker's OnFinish.
func TestBootMetrics(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	m := NewMetrics()
	boots := firstboot.New(firstboot.Options{Now: clock, OnFinish: m.ObserveBoot})
	store := twoInstances(t, "")
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), Metrics: m, Boots: boots, Now: clock})
	h.ServeHTTP(newRecorder(), guestRequest(t, "127.0.0.2", "GET", "/nocloud/meta-data", ""))
	now = now.Add(42 * time.Second)
	for _, ev := range []string{evStartFinal, evFailScripts, evFinishFinal} {
		if w := serveRecorded(h, guestRequest(t, "127.0.0.2", "POST", bootreport.EventsPath, ev)); w.Code != 204 {
			t.Fatalf("POST an event: %d %s", w.Code, w.Body)
		}
	}
	var sb strings.Builder
	m.WriteTo(&sb)
	for _, want := range []string{
		`vminit_first_boot_duration_seconds_bucket{agent="cloud-init",outcome="failed",le="30"} 0`,
		`vminit_first_boot_duration_seconds_bucket{agent="cloud-init",outcome="failed",le="45"} 1`,
		`vminit_first_boot_duration_seconds_sum{agent="cloud-init",outcome="failed"} 42`,
		`vminit_first_boot_duration_seconds_count{agent="cloud-init",outcome="done"} 0`,
		`vminit_first_boot_duration_seconds_count{agent="ignition",outcome="failed"} 0`,
		`vminit_first_boots{state="failed"} 1`, `vminit_first_boots{state="pending"} 1`,
	} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, sb.String())
		}
	}
}

// TestUnreportedBoot: a Windows guest (cloudbase-init, which posts no
// first-boot report) fetches its data and is heard of no more: on a
// tracker made by NewTracker it stays fetched however long it is silent,
// marked NoReport, and the metrics count it fetched, never stalled, while
// a silent cloud-init guest beside it stalls. Before, both were stalled
// after --stall-after: a false alarm for every Windows VM.
func TestUnreportedBoot(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	m := NewMetrics()
	win := testRecord(t, cbitest.WinSpec("  metadataServer: {addresses: [127.0.0.4]}\n"), "1")
	linux := testRecord(t, instanceDoc("linux", []string{"127.0.0.2"}, ""), "1")
	h := NewHandler(testStore(t, win, linux), Options{AllowLoopbackInstances: true, Logger: quietLogger(), Metrics: m, Now: clock,
		Boots: NewTracker(firstboot.Options{Now: clock, StallAfter: time.Minute})})
	for src, path := range map[string]string{"127.0.0.4": "/openstack/latest/meta_data.json", "127.0.0.2": "/nocloud/meta-data"} {
		if w := serveRecorded(h, guestRequest(t, src, "GET", path, "")); w.Code != 200 {
			t.Fatalf("GET %s from %s: %d %s", path, src, w.Code, w.Body)
		}
	}
	now = now.Add(time.Hour)
	if st, _ := h.Boot("win-1"); st.State != firstboot.Fetched || !st.NoReport || st.Where() != "cloudbase-init sends no first-boot report" {
		t.Errorf("win-1, silent for an hour: %s, NoReport %v, where %q", st.State, st.NoReport, st.Where())
	}
	if st, _ := h.Boot("linux"); st.State != firstboot.Stalled || st.NoReport {
		t.Errorf("linux, silent for an hour: %s, NoReport %v", st.State, st.NoReport)
	}
	var sb strings.Builder
	m.WriteTo(&sb)
	for _, want := range []string{`vminit_first_boots{state="fetched"} 1`, `vminit_first_boots{state="stalled"} 1`} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, sb.String())
		}
	}
}

// guestRequest is a request from src, for the handler in process.
func guestRequest(t testing.TB, src, method, path, body string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = src + ":40000"
	return r
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

// serveRecorded serves r in process and returns the answer.
func serveRecorded(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// newRequest is a client request with body as is (a reader of unknown
// length is sent chunked).
func newRequest(t testing.TB, method, url string, body io.Reader) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
