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

func (a *admin) boot(w http.ResponseWriter, r *http.Request) {
	st, err := a.ops.Boot(r.Context(), r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (a *admin) boots(w http.ResponseWriter, r *http.Request) {
	f, watch, problems := parseBootsQuery(r.URL.Query())
	if len(problems) > 0 {
		body := ErrorBody{}
		for _, p := range problems {
			body.Errors = append(body.Errors, &spec.FieldError{Message: p})
		}
		writeJSON(w, http.StatusBadRequest, body)
		return
	}
	if watch {
		a.watchBoots(w, r, f)
		return
	}
	sum, _ := a.ops.Boots(r.Context(), f)
	writeJSON(w, http.StatusOK, sum)
}

// watchBoots answers a watch as server-sent events: an "summary" event
// (one line of JSON) at once and at each change, a keep-alive comment
// when nothing changed for a while, for at most watchLifetime.
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
	send := func(sum firstboot.Summary) error {
		data, err := json.Marshal(sum) // one line: JSON escapes every newline
		if err != nil {
			return err
		}
		return write("event: summary\ndata: %s\n\n", data)
	}
	keepAlive := func() error { return write(": keep-alive\n\n") }
	a.ops.watch(ctx, f, send, keepAlive)
}
