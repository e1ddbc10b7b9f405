package webui

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// The live pages follow /ui/stream with an EventSource: the fleet page
// with its own query (filter, sort, page), an instance page with
// ?instance=NAME. The stream sends the part of the page that changes,
// re-rendered, as one "render" event: at once (what changed between the
// page and the stream is not lost), then on every change of the tracker,
// paced by what each costs, as every watcher of the tracker is
// (firstboot.WatchPause: at most every minInterval, and less often as a
// render takes longer or sends more bytes; the pause follows a send, so
// the first change after a quiet spell goes out at once), and every Options.Refresh
// without a change. It sends a page, never the fleet: Options.PageSize
// rows, each with its first error clipped (firstboot.Tracker.Brief). A stream ends after streamFor; the browser
// reconnects by itself.
const (
	minInterval = 500 * time.Millisecond
	streamFor   = 10 * time.Minute
	writeWithin = 10 * time.Second
	// busyRetry is when a page turned away (Options.MaxStreams followed
	// already) asks again.
	busyRetry = 30 * time.Second
)

func (u *UI) stream(w http.ResponseWriter, r *http.Request) {
	render, err := u.fragment(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	select {
	case u.streams <- struct{}{}:
		defer func() { <-u.streams }()
	default:
		// An EventSource gives up for good on an error status; an empty
		// stream that ends makes it try again, after busyRetry.
		fmt.Fprintf(w, "retry: %d\n\n", busyRetry.Milliseconds())
		return
	}
	rc := http.NewResponseController(w)
	// The listener's read timeout would end the stream (a GET has no
	// body to wait for); each write has its own deadline instead.
	rc.SetReadDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	end := time.NewTimer(streamFor)
	defer end.Stop()
	tick := time.NewTicker(u.opts.Refresh)
	defer tick.Stop()
	fmt.Fprint(w, "retry: 2000\n\n")
	var last []byte
	ticked := false
	for {
		changes := u.src.Boots().Changes()
		var b bytes.Buffer
		began := time.Now()
		if err := render(&b); err != nil {
			u.opts.Logger.Error("webui: rendering the stream", "err", err)
			return
		}
		cost := time.Since(began)
		// A refresh that changed nothing is not sent: replacing the
		// page's part would lose what the reader selected, or a click on
		// its way (a comment keeps the connection known to be alive).
		msg := []byte(": unchanged\n\n")
		if !ticked || !bytes.Equal(b.Bytes(), last) {
			msg, last = event("render", b.String()), b.Bytes()
		}
		rc.SetWriteDeadline(time.Now().Add(writeWithin))
		if _, err := w.Write(msg); err != nil || rc.Flush() != nil {
			return
		}
		// The pause is paid after a send, by what the render and the send
		// cost, as the admin API's watch pays it: what comes meanwhile is
		// coalesced into the next render, and a change after a quiet
		// spell is sent at once. (Paid after the wake instead, and measured
		// from before the wait, it charged the page four times its idle
		// time: a change after 3 s of quiet showed 12 s late.)
		select {
		case <-time.After(firstboot.WatchPause(minInterval, len(msg), cost)):
		case <-ctx.Done():
			return
		}
		ticked = false
		select {
		case <-changes:
		case <-tick.C:
			ticked = true
		case <-end.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// fragment returns what the stream of r renders: an instance's part of
// its page, or the fleet's.
func (u *UI) fragment(r *http.Request) (func(*bytes.Buffer) error, error) {
	q := r.URL.Query()
	if q.Has("instance") {
		name := q.Get("instance")
		return func(b *bytes.Buffer) error { return u.pages.ExecuteTemplate(b, "instance-live", u.instanceView(name)) }, nil
	}
	fq, err := parseFleetQuery(q)
	if err != nil {
		return nil, err
	}
	return func(b *bytes.Buffer) error { return u.pages.ExecuteTemplate(b, "fleet-live", u.fleetView(fq)) }, nil
}

// event is one server-sent event: every line of data on a data: line of
// its own (the browser joins them with newlines again). A CR ends a line
// too, for the stream as for HTML, which reads it as a newline: left in
// a data line, a guest's message could start a field of its own.
var newlines = strings.NewReplacer("\r\n", "\n", "\r", "\n")

func event(name, data string) []byte {
	var b bytes.Buffer
	b.WriteString("event: " + name + "\n")
	for line := range strings.SplitSeq(newlines.Replace(data), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return b.Bytes()
}
