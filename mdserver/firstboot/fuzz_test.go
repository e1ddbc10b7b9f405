package firstboot

import (
	"testing"
)

// FuzzParseCloudInitEvent: whatever a guest posts to bootreport.EventsPath, the
// parser does not panic, and what it accepts the tracker records, within
// its limits.
func FuzzParseCloudInitEvent(f *testing.F) {
	for _, s := range []string{
		`{"name": "modules-final", "description": "running modules for final", "event_type": "start", "origin": "cloudinit", "timestamp": 1764158400.25}`,
		`{"name": "modules-final/config-scripts-user", "description": "running config-scripts-user with frequency once-per-instance", "event_type": "finish", "origin": "cloudinit", "timestamp": 1764158401.5, "result": "FAIL"}`,
		`{"name": "modules-final/config-final-message", "description": "running config-final-message with frequency always", "event_type": "finish", "origin": "cloudinit", "timestamp": 1764158402.0, "result": "SUCCESS", "files": [{"path": "/var/log/x", "content": "eA==", "encoding": "base64"}]}`,
		`{"name": "init-network/config-ssh", "event_type": "finish", "result": "WARN", "timestamp": "yesterday"}`,
		`{"name": "a/b/c", "event_type": "start", "result": null}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := ParseCloudInitEvent(body)
		if err != nil {
			return
		}
		if len(ev.Name) > MaxName || len(ev.Message) > MaxMessage {
			t.Fatalf("beyond the limits: name %d bytes, message %d", len(ev.Name), len(ev.Message))
		}
		tr := New(Options{})
		if err := tr.Record("vm", "u", AgentCloudInit, ev); err != nil {
			t.Fatalf("parsed %+v, and Record refused it: %v", ev, err)
		}
	})
}

// FuzzGuestReport: whatever a guest posts to bootreport.ReportPath, decoding and
// reading it do not panic, and an accepted report is within the
// tracker's limits.
func FuzzGuestReport(f *testing.F) {
	for _, s := range []string{
		`{"agent": "cloud-init", "status": {"v1": {"datasource": "DataSourceNoCloud [seed=/dev/sr0][dsmode=net]", "init": {"errors": [], "finished": 1764158400.5, "start": 1764158400.1}, "init-local": {"errors": [], "finished": 1.0, "start": 0.5}, "modules-config": {"errors": [], "finished": 2.0, "start": 1.5}, "modules-final": {"errors": ["('scripts-user', RuntimeError('Runparts: 1 failures in 1 attempted commands'))"], "finished": 3.0, "start": 2.5}, "modules-init": {"errors": [], "finished": null, "start": null}, "stage": null}}, "result": {"v1": {"datasource": "DataSourceNoCloud [seed=/dev/sr0][dsmode=net]", "errors": ["('scripts-user', RuntimeError('Runparts: 1 failures in 1 attempted commands'))"]}}, "log": "Failed to run module scripts-user\n"}`,
		`{"agent": "cloud-init", "result": {"v1": {"errors": ["('', x)", "('a', )"]}}}`,
		`{"agent": "ignition", "systemState": "degraded", "failedUnits": [{"unit": "app.service", "log": "exited"}], "log": "é"}`,
		`{"agent": "ignition", "systemState": "running"}`,
		`{"agent": "cloud-init", "status": null, "result": null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		g, err := ParseGuestReport(body)
		if err != nil {
			return
		}
		r, err := g.Report()
		if err != nil {
			return
		}
		if len(r.Errors) > MaxFailures || len(r.Message) > MaxMessage {
			t.Fatalf("%d failures, message %d bytes", len(r.Errors), len(r.Message))
		}
		for _, e := range r.Errors {
			if len(e.Message) > MaxMessage || len(e.Stage) > MaxName || len(e.Module) > MaxName || len(e.Unit) > MaxName {
				t.Fatalf("a failure beyond the limits: %d %d %d %d", len(e.Message), len(e.Stage), len(e.Module), len(e.Unit))
			}
		}
		if r.Failed != (len(r.Errors) > 0) && g.Agent == AgentCloudInit {
			t.Fatalf("cloud-init: failed %v with %d failures", r.Failed, len(r.Errors))
		}
		New(Options{}).Report("vm", "u", g.Agent, r)
	})
}
