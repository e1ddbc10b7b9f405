package mdserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// The guests' write path under attack: a VM writes its own instance's
// first boot and nothing else, a flood costs only the flooder's writes,
// and no number of events grows the tracker beyond its bounds.

// TestWritesOnlyOwnRecord: whatever a VM sends (another VM's address in
// X-Forwarded-For, another instance's signed header, another VM's name
// in the body), its writes land in its own record; through a trusted
// proxy, a forged, expired or predecessor's header writes nothing.
func TestWritesOnlyOwnRecord(t *testing.T) {
	key := []byte("proxy-secret-0123456789")
	now := time.Unix(1_700_000_000, 0)
	store := newIndexStore()
	store.put(t, instanceDoc("vm-a", []string{"127.0.0.2"}, ""))
	store.put(t, instanceDoc("vm-bb", []string{"127.0.0.3"}, ""))
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), HMACKey: key,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32")}, Now: func() time.Time { return now }})
	srv, _ := serve(t, h)
	a, proxy := clientFrom("127.0.0.2"), clientFrom("127.0.0.5")
	events := srv.URL + bootreport.EventsPath
	bbRec, _ := store.Snapshot().ByName("vm-bb")
	forB := SignInstance(key, "vm-bb", bbRec.UID, now.Add(time.Minute))

	for _, hdr := range []map[string]string{
		{"X-Forwarded-For": "127.0.0.3"},
		{HeaderInstance: forB},
	} {
		if r := do(t, a, "POST", events, hdr, evStartFinal); r.status != 204 {
			t.Errorf("A with %v: %d %q", hdr, r.status, r.body)
		}
	}
	body := `{"name": "vm-bb", "event_type": "start", "description": "instance vm-bb"}`
	if r := do(t, a, "POST", events, nil, body); r.status != 204 {
		t.Errorf("an event naming vm-bb: %d %q", r.status, r.body)
	}
	if r := do(t, a, "POST", srv.URL+bootreport.ReportPath, nil, `{"agent": "cloud-init", "name": "vm-bb", "result": {"v1": {"errors": []}}}`); r.status != 400 || !strings.Contains(r.body, `unknown field "name"`) {
		t.Errorf("a report naming vm-bb: %d %q", r.status, r.body)
	}
	if st, _ := h.Boot("vm-a"); len(st.Events) != 3 {
		t.Errorf("A's own record: %d events, want its 3", len(st.Events))
	}
	if st, _ := h.Boot("vm-bb"); st.State != firstboot.Pending || len(st.Events) != 0 {
		t.Fatalf("A wrote B's record: %s %+v", st.State, st.Events)
	}

	forged := strings.Replace(forB, ";vm-bb;", ";vm-a;", 1)
	expired := SignInstance(key, "vm-bb", bbRec.UID, now.Add(-time.Minute))
	for name, hdr := range map[string]map[string]string{
		"forged":       {HeaderInstance: forged},
		"expired":      {HeaderInstance: expired},
		"unsigned XFF": {"X-Forwarded-For": "127.0.0.3"},
		"none":         nil,
	} {
		if r := do(t, proxy, "POST", events, hdr, evStartFinal); r.status != 403 && r.status != 404 {
			t.Errorf("through the proxy, %s header: %d, want 403 or 404", name, r.status)
		}
	}
	store.delete("vm-bb")
	store.put(t, instanceDoc("vm-bb", []string{"127.0.0.3"}, "")) // a successor
	if r := do(t, proxy, "POST", events, map[string]string{HeaderInstance: forB}, evStartFinal); r.status != 403 {
		t.Errorf("the predecessor's header replayed: %d, want 403", r.status)
	}
	if st, _ := h.Boot("vm-bb"); st.State != firstboot.Pending {
		t.Fatalf("B's record written through the proxy: %s %+v", st.State, st.Events)
	}
	succ, _ := store.Snapshot().ByName("vm-bb")
	if r := do(t, proxy, "POST", events, map[string]string{HeaderInstance: SignInstance(key, "vm-bb", succ.UID, now.Add(time.Minute))}, evStartFinal); r.status != 204 {
		t.Errorf("B's own header through the proxy: %d %q", r.status, r.body)
	}
	if st, _ := h.Boot("vm-bb"); st.State != firstboot.Running || len(st.Events) != 1 {
		t.Errorf("B through the proxy: %s %+v", st.State, st.Events)
	}
}

// TestWriteFlood: a VM posting events beyond its bucket is refused 429,
// while another VM's events and its own metadata requests pass (the
// clock stands still: no bucket refills).
func TestWriteFlood(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	store := twoInstances(t, "")
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger(), Rate: 1, Burst: 20, Now: func() time.Time { return now }})
	srv, _ := serve(t, h)
	a, bb := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	events := srv.URL + bootreport.EventsPath
	accepted, refused := 0, 0
	for i := range 250 {
		r := do(t, a, "POST", events, nil, fmt.Sprintf(`{"name": "init-network/m%d", "event_type": "start"}`, i))
		switch {
		case r.status == 204:
			accepted++
		case r.status == 429 && r.header.Get("Retry-After") == "1" && r.body == "":
			refused++
		default:
			t.Fatalf("event %d: %d %q", i, r.status, r.body)
		}
	}
	if accepted != 200 || refused != 50 {
		t.Errorf("%d accepted, %d refused; want the burst of 200, then 429s", accepted, refused)
	}
	for range 20 {
		if r := get(t, a, srv.URL+"/latest/meta-data/instance-id"); r.status != 200 {
			t.Fatalf("A's metadata after its flood: %d", r.status)
		}
	}
	for range 20 {
		if r := do(t, bb, "POST", events, nil, evStartFinal); r.status != 204 {
			t.Fatalf("B's events after A's flood: %d", r.status)
		}
	}
	if r := get(t, bb, srv.URL+"/latest/meta-data/instance-id"); r.status != 200 {
		t.Errorf("B's metadata: %d", r.status)
	}
}

// TestEventStormBounded: 100,000 events from one VM (past any rate
// limit), every one a failure of a new stage or module, some with
// long messages, leave one boot in the tracker, within its limits.
func TestEventStormBounded(t *testing.T) {
	store := twoInstances(t, "")
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: slog.New(slog.DiscardHandler), WriteRate: 1e9, WriteBurst: 1e9})
	long := strings.Repeat("é", firstboot.MaxMessage)
	for i := range 100_000 {
		desc := "x"
		if i%1000 < 10 {
			desc = long
		}
		body := fmt.Sprintf(`{"name": "s%d/m%d", "event_type": "finish", "result": "FAIL", "description": %q}`, i%1000, i, desc)
		if i%100 == 0 {
			body = fmt.Sprintf(`{"name": "stage-%d", "event_type": "start", "description": %q}`, i, desc)
		}
		if w := serveRecorded(h, guestRequest(t, "127.0.0.2", "POST", bootreport.EventsPath, body)); w.Code != 204 {
			t.Fatalf("event %d: %d %s", i, w.Code, w.Body)
		}
	}
	if n := h.Boots().Len(); n != 1 {
		t.Errorf("%d boots tracked, want 1", n)
	}
	st, _ := h.Boot("vm-a")
	if len(st.Events) != firstboot.MaxEvents || len(st.Errors) != firstboot.MaxFailures || len(st.Stages) != firstboot.MaxStages {
		t.Errorf("events %d, failures %d, stages %d", len(st.Events), len(st.Errors), len(st.Stages))
	}
	for _, e := range st.Events {
		if len(e.Message) > firstboot.MaxMessage || len(e.Name) > firstboot.MaxName {
			t.Fatalf("an event of %d/%d bytes", len(e.Name), len(e.Message))
		}
	}
}

// TestWritesOfAnotherAgent: an Ignition instance's guest cannot post
// cloud-init events or report, nor a cloud-init instance's an Ignition
// report; each its own.
func TestWritesOfAnotherAgent(t *testing.T) {
	store := testStore(t,
		testRecord(t, instanceDoc("vm-a", []string{"127.0.0.2"}, ""), "1"),
		testRecord(t, instanceDoc("vm-fc", []string{"127.0.0.4"}, "  agent: ignition\n"), "1"))
	h := NewHandler(store, Options{AllowLoopbackInstances: true, Logger: quietLogger()})
	srv, _ := serve(t, h)
	a, fc := clientFrom("127.0.0.2"), clientFrom("127.0.0.4")
	ignitionReport := `{"agent": "ignition", "systemState": "degraded", "failedUnits": [{"unit": "app.service", "log": "exit 1"}]}`
	for _, tc := range []struct {
		c          *http.Client
		path, body string
		status     int
		reply      string
	}{
		{fc, bootreport.EventsPath, evStartFinal, 400, "vminit: instance vm-fc: its spec.agent is ignition: events are cloud-init's"},
		{fc, bootreport.ReportPath, reportFailed, 400, "a report of cloud-init, and its spec.agent is ignition"},
		{a, bootreport.ReportPath, ignitionReport, 400, "a report of ignition, and its spec.agent is cloud-init"},
		{fc, bootreport.ReportPath, ignitionReport, 204, ""},
	} {
		if r := do(t, tc.c, "POST", srv.URL+tc.path, nil, tc.body); r.status != tc.status || !strings.Contains(r.body, tc.reply) {
			t.Errorf("POST %s %.40s: %d %q, want %d %q", tc.path, tc.body, r.status, r.body, tc.status, tc.reply)
		}
	}
	if st, _ := h.Boot("vm-a"); st.State != firstboot.Pending {
		t.Errorf("vm-a: %s", st.State)
	}
	if st, _ := h.Boot("vm-fc"); st.State != firstboot.Failed || st.FirstError() != "app.service: exit 1" {
		t.Errorf("vm-fc: %s %q", st.State, st.FirstError())
	}
}
