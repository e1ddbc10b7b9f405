package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// The hostile fleet: each guest posts 64 maximal events (names of
// 256 bytes, messages of 2 KiB, each unique) and a report of 20 errors of
// 2 KiB, every write accepted; an honest guest posts cloud-init's ≈40
// events and its report. The guests' handler is the real one, each guest
// calling from its own loopback address; the reads go through the admin
// API's handler.

// guestFleet is n instances, guest i calling from addr(i), and the
// guests' handler, its write rate unbounded (the attack is of what the
// writes leave, not of their rate).
type guestFleet struct {
	n     int
	store *memStore
	md    *mdserver.Handler
}

func guestAddr(i int) string { return fmt.Sprintf("127.1.%d.%d", i/250, i%250+1) }

func guestName(i int) string { return fmt.Sprintf("vm-%04d", i) }

func newGuestFleet(tb testing.TB, n int) *guestFleet {
	tb.Helper()
	g := &guestFleet{n: n, store: newMemStore()}
	for i := range n {
		doc := strings.NewReplacer("name: web", "name: "+guestName(i), "10.9.0.1", guestAddr(i)).Replace(webSpec)
		if _, err := g.store.Put(context.Background(), []byte(doc)); err != nil {
			tb.Fatal(err)
		}
	}
	g.md = mdserver.NewHandler(g.store, mdserver.Options{Logger: slog.New(slog.DiscardHandler), AllowLoopbackInstances: true,
		WriteRate: 1e9, WriteBurst: 1e9})
	return g
}

// post is guest i's POST of body to path, which must be accepted.
func (g *guestFleet) post(tb testing.TB, i int, path, body string) {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.RemoteAddr = guestAddr(i) + ":40000"
	w := httptest.NewRecorder()
	g.md.ServeHTTP(w, r)
	if w.Code != http.StatusNoContent {
		tb.Fatalf("%s %s: %d %s", guestName(i), path, w.Code, w.Body)
	}
}

// hostileEvent is guest i's maximal event k: a failure of a new module
// of one of 16 stages, its name and message unique.
func hostileEvent(i, k int) string {
	name := fmt.Sprintf("s%02d-%s/m%04d-%03d-", k%16, strings.Repeat("s", 100), i, k)
	name += strings.Repeat("m", firstboot.MaxName-len(name))
	desc := fmt.Sprintf("%s event %d: %s", guestName(i), k, strings.Repeat("d", firstboot.MaxMessage))[:firstboot.MaxMessage]
	return fmt.Sprintf(`{"name": %q, "event_type": "finish", "result": "FAIL", "description": %q}`, name, desc)
}

// hostile is guest i's attack: 64 maximal events, then a report of 20
// errors of 2 KiB.
func (g *guestFleet) hostile(tb testing.TB, i int) {
	for k := range firstboot.MaxEvents {
		g.post(tb, i, bootreport.EventsPath, hostileEvent(i, k))
	}
	var errs []string
	for k := range 20 {
		e := fmt.Sprintf("('mod-%02d', RuntimeError('%s %d: %s'))", k, guestName(i), k, strings.Repeat("e", 2048))
		errs = append(errs, e[:2048])
	}
	body, _ := json.Marshal(map[string]any{"agent": "cloud-init", "result": map[string]any{"v1": map[string]any{"errors": errs}}})
	g.post(tb, i, bootreport.ReportPath, string(body))
}

// honest is guest i's cloud-init boot: its events, and its report.
func (g *guestFleet) honest(tb testing.TB, i int) {
	for _, body := range mdbench.CloudInitEvents() {
		g.post(tb, i, bootreport.EventsPath, string(body))
	}
	g.post(tb, i, bootreport.ReportPath, `{"agent": "cloud-init", "status": {"v1": {"stage": null}}, "result": {"v1": {"errors": []}}}`)
}

// boot runs every guest's boot, and returns the heap it left, per guest.
func (g *guestFleet) boot(tb testing.TB, guest func(*guestFleet, testing.TB, int)) (perGuest int64) {
	before := liveHeap()
	for i := range g.n {
		guest(g, tb, i)
	}
	after := liveHeap()
	runtime.KeepAlive(g)
	return (after - before) / int64(g.n)
}

// liveHeap is the heap's live bytes after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// maxHeapPerGuest bounds what a guest, however hostile, makes the server
// hold: firstboot.MaxText of its text, and the records that carry it (64
// events of 136 bytes, the failures, the stages, the rate limiter's
// bucket), with room for the heap's rounding.
const maxHeapPerGuest = 40 << 10

// maxRowBytes bounds a row of GET /v1/boots as JSON: the instance's name
// and UID, its stage and module (256 bytes each at most), its times, and
// its first error, names and a message of firstboot.MaxBriefError bytes.
const maxRowBytes = 2 << 10

// TestHostileFleetBounded: 500 hostile guests leave at most
// maxHeapPerGuest each in the server, and one read of the fleet is at
// most maxRowBytes a row, carrying each row's first error clipped, not
// every error (19.4 MB before; 1 MB here at most).
func TestHostileFleetBounded(t *testing.T) {
	const guests = 500
	g := newGuestFleet(t, guests)
	per := g.boot(t, (*guestFleet).hostile)
	t.Logf("%d bytes of heap per hostile guest", per)
	if per > maxHeapPerGuest {
		t.Errorf("a hostile guest holds %d bytes of the server's heap, want at most %d", per, maxHeapPerGuest)
	}
	st, _ := g.md.Boot(guestName(7))
	if st.State != firstboot.Failed || !strings.HasPrefix(st.FirstError(), "s00-") || !strings.Contains(st.FirstError(), guestName(7)+" event 0:") {
		t.Errorf("the first failure is not kept: %s %.80q", st.State, st.FirstError())
	}

	srv := httptest.NewServer(NewHandler(g.store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler), Metadata: g.md}))
	defer srv.Close()
	code, body := call(t, srv, "GET", "/v1/boots", adminToken, "")
	t.Logf("GET /v1/boots: %d bytes", len(body))
	var sum firstboot.Summary
	if err := json.Unmarshal([]byte(body), &sum); code != 200 || err != nil {
		t.Fatalf("GET /v1/boots: %d %v", code, err)
	}
	if len(sum.Instances) != guests || sum.Counts[firstboot.Failed] != guests || len(body) > guests*maxRowBytes {
		t.Errorf("GET /v1/boots: %d rows, %d failed, %d bytes; want %d rows of at most %d bytes", len(sum.Instances), sum.Counts[firstboot.Failed], len(body), guests, maxRowBytes)
	}
	for _, row := range sum.Instances {
		if len(row.Errors) != 1 || len(row.Errors[0].Message) > firstboot.MaxBriefError || strings.Contains(row.Errors[0].Message, "\n") {
			t.Fatalf("%s: a row with %d errors, the first %d bytes", row.Name, len(row.Errors), len(row.FirstError()))
		}
	}
}

// TestWatchSendsChanges: after the fleet's summary, a watch of 500
// hostile guests sends what changed, the row of the guest that posted,
// not the fleet again.
func TestWatchSendsChanges(t *testing.T) {
	const guests = 500
	g := newGuestFleet(t, guests)
	g.boot(t, (*guestFleet).hostile)
	url := sseServer(t, NewHandler(g.store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler), Metadata: g.md}))
	req, _ := http.NewRequest("GET", url+"/v1/boots?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	type event struct {
		name string
		data []byte
	}
	events := make(chan event, 4)
	go func() {
		defer close(events)
		readEvents(resp.Body, 64<<20, func(name string, data []byte) error {
			events <- event{name, append([]byte(nil), data...)}
			return nil
		})
	}()
	first := <-events
	var sum firstboot.Summary
	if err := json.Unmarshal(first.data, &sum); err != nil || len(sum.Instances) != guests {
		t.Fatalf("the first event: %s, %d rows (%v)", first.name, len(sum.Instances), err)
	}
	g.post(t, 3, bootreport.EventsPath, hostileEvent(3, 1000))
	next, ok := <-events
	var ch firstboot.Summary
	if err := json.Unmarshal(next.data, &ch); !ok || err != nil || len(ch.Instances) != 1 || ch.Instances[0].Name != guestName(3) || ch.Counts[firstboot.Failed] != guests {
		t.Fatalf("after one guest's event: %q, %d rows, %d bytes (%v)", next.name, len(ch.Instances), len(next.data), err)
	}
	if next.name != "changes" || len(next.data) > maxRowBytes+256 {
		t.Errorf("a change of one row: %q of %d bytes", next.name, len(next.data))
	}
	// The client applies the changes to the summary it holds.
	sum.Apply(ch)
	if len(sum.Instances) != guests || sum.Instances[3].LastEvent.IsZero() || !sum.Instances[3].LastEvent.Equal(ch.Instances[0].LastEvent) {
		t.Errorf("applied: %d rows, %v", len(sum.Instances), sum.Instances[3].LastEvent)
	}
}

// TestBootsPaged: GET /v1/boots answers pages of limit rows (by default
// DefaultBootsPage), each with the whole selection's counts and a
// continue while rows follow; Client.Boots reads every page; a bad limit
// or continue, or either with a watch, is a 400 naming it.
func TestBootsPaged(t *testing.T) {
	const guests = 25
	g := newGuestFleet(t, guests)
	for i := range guests {
		if i%2 == 0 {
			g.honest(t, i)
		}
	}
	srv := httptest.NewServer(NewHandler(g.store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler), Metadata: g.md}))
	defer srv.Close()
	remote := &Client{URL: srv.URL, Token: adminToken, HTTP: srv.Client()}
	ctx := context.Background()

	var names []string
	cont, pages := "", 0
	for {
		page, err := remote.BootsPage(ctx, firstboot.Filter{}, 10, cont)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if page.Counts[firstboot.Done] != 13 || page.Counts[firstboot.Pending] != 12 || len(page.Instances) > 10 {
			t.Errorf("page %d: %d rows, counts %v", pages, len(page.Instances), page.Counts)
		}
		for _, row := range page.Instances {
			names = append(names, row.Name)
		}
		if page.Continue == "" {
			break
		}
		cont = page.Continue
	}
	if pages != 3 || len(names) != guests || names[0] != guestName(0) || names[guests-1] != guestName(guests-1) {
		t.Errorf("%d pages, %d rows: %v", pages, len(names), names)
	}
	if page, err := remote.BootsPage(ctx, firstboot.Filter{}, 0, ""); err != nil || len(page.Instances) != guests || page.Continue != "" {
		t.Errorf("the default page: %d rows, continue %q, %v", len(page.Instances), page.Continue, err)
	}

	old := clientBootsPage
	clientBootsPage = 4
	defer func() { clientBootsPage = old }()
	sum, err := remote.Boots(ctx, firstboot.Filter{States: []firstboot.State{firstboot.Done}})
	if err != nil || len(sum.Instances) != 13 || sum.Counts[firstboot.Done] != 13 || sum.Continue != "" {
		t.Errorf("Client.Boots over pages of 4: %+v %v", sum.Counts, err)
	}

	code, body := call(t, srv, "GET", "/v1/boots?limit=0&continue=!!", adminToken, "")
	for _, w := range []string{`limit=\"0\": want a number of rows from 1 to 1000`, `continue=\"!!\"`} {
		if code != 400 || !strings.Contains(body, w) {
			t.Errorf("bad page: want %s: %d %s", w, code, body)
		}
	}
	if code, body := call(t, srv, "GET", "/v1/boots?limit=1001", adminToken, ""); code != 400 || !strings.Contains(body, "limit") {
		t.Errorf("limit past the maximum: %d %s", code, body)
	}
	if code, body := call(t, srv, "GET", "/v1/boots?watch=true&limit=10", adminToken, ""); code != 400 || !strings.Contains(body, "a watch sends the whole selection") {
		t.Errorf("a paged watch: %d %s", code, body)
	}
}
