package firstboot

import (
	"errors"
	"github.com/vminit/vminit/bootreport"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// webhookScript is a cloud-init boot's modules-final stage as cloud-init
// 22.4 reports it, through its own reporting module and webhook handler
// (the one a cloud-config's `reporting:` key configures): a module that
// succeeds, one whose command fails (raising as cc_scripts_user does), and
// a finish event that posts a file.
const webhookScript = `
import json, sys
from cloudinit import reporting
from cloudinit.reporting import events
cfg = json.load(sys.stdin)
reporting.update_configuration({"vminit": {"type": "webhook", "endpoint": cfg["url"], "timeout": 5, "retries": 0}})
with events.ReportEventStack("modules-final", "running modules for final") as stage:
    with events.ReportEventStack("config-write-files", "running config-write-files with frequency once-per-instance", parent=stage) as m:
        m.message = "config-write-files ran successfully"
    try:
        with events.ReportEventStack("config-scripts-user", "running config-scripts-user with frequency once-per-instance", parent=stage):
            raise RuntimeError("Runparts: 1 failures in 1 attempted commands")
    except RuntimeError:
        pass
    with events.ReportEventStack("config-final-message", "running config-final-message with frequency always", parent=stage, post_files=[cfg["file"]]):
        pass
reporting.flush_events()
`

// postedEvents runs webhookScript against a loopback listener and returns
// the bodies cloud-init posted, in order, and their content types.
func postedEvents(t *testing.T) (bodies [][]byte, ctypes []string) {
	cloudinittest.Require(t)
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		if r.Method == http.MethodPost && r.URL.Path == bootreport.EventsPath {
			bodies, ctypes = append(bodies, b), append(ctypes, r.Header.Get("Content-Type"))
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "final.log")
	if err := os.WriteFile(file, []byte("Cloud-init v. 22.4 finished\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cloudinittest.Run(t, webhookScript, map[string]string{"url": srv.URL + bootreport.EventsPath, "file": file}, nil)
	mu.Lock()
	defer mu.Unlock()
	return bodies, ctypes
}

// TestParseCloudInitWebhook: what cloud-init 22.4's own webhook handler
// posts parses, event by event, into the boot cloud-init ran: failed in
// modules-final/config-scripts-user.
func TestParseCloudInitWebhook(t *testing.T) {
	bodies, ctypes := postedEvents(t)
	if len(bodies) != 8 {
		t.Fatalf("cloud-init posted %d events, want 8 (4 starts, 4 finishes):\n%s", len(bodies), joinBodies(bodies))
	}
	c := newClock()
	tr := New(Options{Now: c.now})
	for i, b := range bodies {
		ev, err := ParseCloudInitEvent(b)
		if err != nil {
			t.Fatalf("event %d (Content-Type %q): %v\n%s", i, ctypes[i], err, b)
		}
		if err := tr.Record("vm", "u1", "cloud-init", ev); err != nil {
			t.Fatalf("event %d: Record: %v", i, err)
		}
	}
	st := tr.Status("vm", "u1", "cloud-init")
	if st.State != Failed || len(st.Errors) != 1 || st.Errors[0].Where() != "modules-final/config-scripts-user" {
		t.Fatalf("after cloud-init's events: %s %+v", st.State, st.Errors)
	}
	if got := st.Errors[0].Message; got != "running config-scripts-user with frequency once-per-instance" {
		t.Errorf("failure message %q: want the module's description, as cloud-init posts it", got)
	}
	first, _ := ParseCloudInitEvent(bodies[0])
	if first != (Event{Kind: KindStart, Name: "modules-final", Message: "running modules for final"}) {
		t.Errorf("first event %+v", first)
	}
	ok, _ := ParseCloudInitEvent(bodies[2])
	if ok.Kind != KindFinish || ok.Result != ResultSuccess || ok.Message != "config-write-files ran successfully" {
		t.Errorf("a module's finish: %+v", ok)
	}
	if !strings.Contains(string(bodies[6]), `"files"`) {
		t.Errorf("the finish with post_files carries no files: %s", bodies[6])
	}
}

func joinBodies(bodies [][]byte) string {
	var s []string
	for _, b := range bodies {
		s = append(s, string(b))
	}
	return strings.Join(s, "\n")
}

// TestParseCloudInitEventRefuses: what no cloud-init posts is an error
// wrapping ErrEvent that says what is wrong.
func TestParseCloudInitEventRefuses(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{``, "want a JSON object"},
		{`[1]`, "want a JSON object"},
		{`{"name": "x", "event_type": "start"} trailing`, "invalid character"},
		{`{"name": 3, "event_type": "start"}`, "cannot unmarshal number"},
		{`{"name": "init-network", "event_type": "progress"}`, `event_type "progress"`},
		{`{"name": "", "event_type": "start"}`, `name ""`},
		{`{"name": "/etc/passwd", "event_type": "start"}`, `name "/etc/passwd"`},
		{`{"name": "init-network", "event_type": "finish", "result": "MAYBE"}`, `result "MAYBE"`},
		{`{"name": "init-network", "event_type": "start", "result": "FAIL"}`, "a start event carries no result"},
		{`{"name": "x", "event_type": "start", "description": "` + strings.Repeat("a", MaxEventBytes) + `"}`, "an event is at most"},
	} {
		_, err := ParseCloudInitEvent([]byte(tc.body))
		if !errors.Is(err, ErrEvent) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60q: %v, want ErrEvent saying %q", tc.body, err, tc.want)
		}
	}
}

// TestParseCloudInitEventClips: a long name or description is cut to the
// tracker's limits.
func TestParseCloudInitEventClips(t *testing.T) {
	ev, err := ParseCloudInitEvent([]byte(`{"name": "` + strings.Repeat("n", 2*MaxName) + `", "event_type": "finish", "result": "WARN", "description": "` +
		strings.Repeat("d", 2*MaxMessage) + `", "origin": "cloudinit", "timestamp": 1764158400.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Name) > MaxName || len(ev.Message) > MaxMessage || ev.Result != ResultWarn {
		t.Errorf("name %d bytes, message %d bytes, result %q", len(ev.Name), len(ev.Message), ev.Result)
	}
}
