package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/spec"
)

// A watch stream's bounds. It ends after watchLifetime (the client
// reconnects; Client.WatchBoots does), so that no connection is held
// forever and a token's change reaches every watcher; a client that
// stops reading is dropped after watchWriteWithin; DefaultMaxWatchers
// streams at once, each holding a connection and a goroutine, and
// reading the fleet at each change.
const DefaultMaxWatchers = 64

var (
	watchLifetime    = 10 * time.Minute
	watchWriteWithin = 10 * time.Second
)

// The events of a watch stream.
const (
	eventSummary = "summary"
	eventChanges = "changes"
)

func (a *admin) boot(w http.ResponseWriter, r *http.Request) {
	st, err := a.ops.Boot(r.Context(), r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (a *admin) boots(w http.ResponseWriter, r *http.Request) {
	bq, problems := parseBootsQuery(r.URL.Query())
	if len(problems) > 0 {
		body := ErrorBody{}
		for _, p := range problems {
			body.Errors = append(body.Errors, &spec.FieldError{Message: p})
		}
		writeJSON(w, http.StatusBadRequest, body)
		return
	}
	if bq.watch {
		a.watchBoots(w, r, bq.filter)
		return
	}
	sum, _ := a.ops.Boots(r.Context(), bq.filter)
	page := sum.Page(bq.after, bq.limit)
	page.Continue = continueToken(page.Continue)
	writeJSON(w, http.StatusOK, page)
}

// watchBoots answers a watch as server-sent events, each one line of
// JSON: a "summary" event (firstboot.Summary, the whole selection) at
// once, then a "changes" event (firstboot.Summary.Changes: the rows that
// changed, the names of those that left, the counts) at each change, a
// keep-alive comment when nothing changed for a while, for at most
// watchLifetime. What a change costs the server is the rows that changed,
// paced by bytes (firstboot.WatchPause), and one event is written at a
// time, each within watchWriteWithin: a reader that does not keep up
// holds at most one event, and is dropped.
func (a *admin) watchBoots(w http.ResponseWriter, r *http.Request, f firstboot.Filter) {
	select {
	case a.watchers <- struct{}{}:
		defer func() { <-a.watchers }()
	default:
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "too many watches (%d): try again later, or read GET /v1/boots", cap(a.watchers))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), watchLifetime)
	defer cancel()
	// The server's read and write timeouts bound a request; a watch is
	// bounded by its lifetime, and each write by watchWriteWithin,
	// instead. The read deadline matters too: when it passes, net/http's
	// background read fails and cancels the request's context.
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(watchLifetime+watchWriteWithin)) != nil {
		writeError(w, http.StatusInternalServerError, "this connection cannot hold a watch")
		return
	}
	write := func(format string, args ...any) error {
		rc.SetWriteDeadline(time.Now().Add(watchWriteWithin))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no") // a proxy in front must not hold events back
	w.WriteHeader(http.StatusOK)
	send := func(sum, changes firstboot.Summary, first bool) (int, error) {
		event, v := eventChanges, changes
		if first {
			event, v = eventSummary, sum
		}
		data, err := json.Marshal(v) // one line: JSON escapes every newline
		if err != nil {
			return 0, err
		}
		return len(data), write("event: %s\ndata: %s\n\n", event, data)
	}
	keepAlive := func() error { return write(": keep-alive\n\n") }
	a.ops.watch(ctx, f, send, keepAlive)
}
