package mdserver

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/registry"
)

// The guests' write path: what a guest's agent posts of its first boot
// (bootreport.EventsPath, bootreport.ReportPath), into the handler's
// first-boot tracker (Handler.Boots).
//
//	POST /vminit/v1/events   one cloud-init reporting event, as its webhook handler posts it
//	POST /vminit/v1/report   a firstboot.GuestReport: the agent's final word
//
// A write is identified as every request is (the source address, or a
// trusted proxy's signed header), and writes the record of the instance
// it is identified as, only: nothing in the body names an instance. It is
// served whatever spec.metadataServer's dialects are (it hands out no
// data), under a token bucket of its own per instance (Options.WriteRate),
// with a body of at most firstboot.MaxEventBytes (an event) or
// firstboot.MaxReportBytes (a report). Answers: 204 taken; 400 with a
// short plain-text reason for a body that is not what the agent posts;
// 413 for a body too large, 415 for a body that says it is not JSON, 429
// beyond the rate, 405 for another method, and the empty 404 of every
// request from a source nobody owns. The audit line is "write", never
// the payload.

// DialectFirstBoot names the guests' write path in metrics and audit
// lines. It is not a spec dialect: every instance is served it.
const DialectFirstBoot = "firstboot"

func init() {
	register(&dialect{
		name: DialectFirstBoot,
		owns: func(path string) bool { return strings.HasPrefix(path, "/vminit/") },
		configure: func(h *Handler, mux *http.ServeMux) guard {
			mux.HandleFunc("POST "+bootreport.EventsPath, h.postEvent)
			mux.HandleFunc("POST "+bootreport.ReportPath, h.postReport)
			// Else EC2's GET / would answer.
			mux.HandleFunc("GET /vminit/", func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == bootreport.EventsPath || r.URL.Path == bootreport.ReportPath {
					w.Header()["Allow"] = hdrPost
					methodNotAllowed(w, r)
					return
				}
				emptyStatus(w, http.StatusNotFound)
			})
			return nil
		},
		guestWrites: true,
		maxBody:     max(firstboot.MaxEventBytes, firstboot.MaxReportBytes),
	})
}

var hdrPost = []string{http.MethodPost}

// postEvent takes one cloud-init event of the instance's guest.
func (h *Handler) postEvent(w http.ResponseWriter, r *http.Request) {
	rec := recordOf(w)
	body, ok := readWrite(w, r, firstboot.MaxEventBytes)
	if !ok {
		return
	}
	if agent := rec.Instance().Spec.Agent; agent != firstboot.AgentCloudInit {
		badWrite(w, rec, fmt.Errorf("its spec.agent is %s: events are cloud-init's (%s takes %s's report)", agent, bootreport.ReportPath, agent))
		return
	}
	ev, err := firstboot.ParseCloudInitEvent(body)
	if err == nil {
		err = h.boots.Record(rec.Name, rec.UID, firstboot.AgentCloudInit, ev)
	}
	if err != nil {
		badWrite(w, rec, err)
		return
	}
	emptyStatus(w, http.StatusNoContent)
}

// postReport takes the final report of the instance's guest.
func (h *Handler) postReport(w http.ResponseWriter, r *http.Request) {
	rec := recordOf(w)
	body, ok := readWrite(w, r, firstboot.MaxReportBytes)
	if !ok {
		return
	}
	g, err := firstboot.ParseGuestReport(body)
	var rep firstboot.Report
	if err == nil {
		rep, err = g.Report()
	}
	if agent := rec.Instance().Spec.Agent; err == nil && g.Agent != agent {
		err = fmt.Errorf("a report of %s, and its spec.agent is %s", g.Agent, agent)
	}
	if err != nil {
		badWrite(w, rec, err)
		return
	}
	h.boots.Report(rec.Name, rec.UID, g.Agent, rep)
	emptyStatus(w, http.StatusNoContent)
}

// readWrite reads a write's body, at most limit bytes of JSON, or answers
// why not: 415 for a Content-Type that is not JSON (cloud-init's webhook
// sends none), 413 beyond limit (before reading, when the length says
// so), and closes the connection on either, unread.
func readWrite(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			refuse(w, http.StatusUnsupportedMediaType)
			return nil, false
		}
	}
	if r.ContentLength > limit {
		refuse(w, http.StatusRequestEntityTooLarge)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		status := http.StatusBadRequest // the body ended early
		if errors.As(err, new(*http.MaxBytesError)) {
			status = http.StatusRequestEntityTooLarge
		}
		refuse(w, status)
		return nil, false
	}
	return body, true
}

// maxReason bounds the reason a 400 gives: a JSON error may quote the
// guest's own bytes back.
const maxReason = 512

// badWrite answers 400 to a write whose body is not what the agent
// posts, saying why in plain text (read by whoever debugs the guest's
// agent).
func badWrite(w http.ResponseWriter, rec *registry.Record, err error) {
	why := err.Error()
	if len(why) > maxReason {
		why = strings.ToValidUTF8(why[:maxReason], "") + "…"
	}
	serveStatus(w, http.StatusBadRequest, fmt.Sprintf("vminit: instance %s: %s\n", rec.Name, why))
}

// observeBoot tells the first-boot tracker that the server answered a
// request of an instance's guest (rec is nil for a request not
// identified, or refused before a dialect saw it), and counts a write.
// Only answers with data count: 4xx and 5xx say nothing of the guest's
// progress.
func (h *Handler) observeBoot(rec *registry.Record, d *dialect, r *http.Request, status int) {
	if d.guestWrites {
		if h.metrics != nil {
			h.metrics.observeWrite(r.URL.Path, status)
		}
		return
	}
	if rec != nil && status < http.StatusBadRequest {
		h.boots.Fetch(rec.Name, rec.UID, rec.Instance().Spec.Agent, d.name, r.URL.Path)
	}
}
