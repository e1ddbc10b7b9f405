package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/lib/httpserver"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// fleet is a store of three instances (web-1 and web-2 cloud-init, db an
// Ignition one) and a guests' handler whose tracker runs on a fixed
// clock, as `vminit serve` assembles them.
type fleet struct {
	store *memStore
	md    *mdserver.Handler
	boots *firstboot.Tracker
	clock *testtools.Clock
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{store: newMemStore(), clock: testtools.NewClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))}
	ctx := context.Background()
	for _, doc := range []string{
		strings.NewReplacer("name: web", "name: web-1", "10.9.0.1", "10.9.0.11").Replace(webSpec),
		strings.NewReplacer("name: web", "name: web-2", "10.9.0.1", "10.9.0.12").Replace(webSpec),
		ignitionDoc(`{"ignition":{"version":"3.4.0"}}`),
	} {
		if _, err := f.store.Put(ctx, []byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	f.boots = firstboot.New(firstboot.Options{Now: f.clock.Now})
	f.md = mdserver.NewHandler(f.store, mdserver.Options{Logger: slog.New(slog.DiscardHandler), Boots: f.boots, Now: f.clock.Now})
	return f
}

func (f *fleet) uid(t *testing.T, name string) string {
	rec, ok := f.store.Snapshot().ByName(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	return rec.UID
}

// boot takes web-1 to running in modules-final, and db to failed.
func (f *fleet) boot(t *testing.T) {
	web, db := f.uid(t, "web-1"), f.uid(t, "ign")
	f.boots.Fetch("web-1", web, "cloud-init", "nocloud", "/nocloud/meta-data")
	f.boots.Fetch("ign", db, "ignition", "ignition", "/config.ign")
	f.clock.Advance(30 * time.Second)
	for _, ev := range []firstboot.Event{
		{Kind: firstboot.KindStart, Name: "init-network"},
		{Kind: firstboot.KindFinish, Name: "init-network", Result: firstboot.ResultSuccess},
		{Kind: firstboot.KindStart, Name: "modules-final/config-scripts-user"},
	} {
		if err := f.boots.Record("web-1", web, "cloud-init", ev); err != nil {
			t.Fatal(err)
		}
	}
	f.boots.Report("ign", db, "ignition", firstboot.Report{Failed: true, Message: "degraded: 1 failed unit",
		Errors: []firstboot.Failure{{Unit: "app.service", Message: "exit status 3"}}})
	f.clock.Advance(15 * time.Second)
}

// TestBootsAPI: one instance's boot and the fleet's summary, filtered,
// over HTTP; the same as Local answers; bad filters are a 400 naming
// each parameter and value.
func TestBootsAPI(t *testing.T) {
	f := newFleet(t)
	f.boot(t)
	quiet := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(NewHandler(f.store, Options{Token: adminToken, Logger: quiet, Metadata: f.md}))
	defer srv.Close()

	code, body := call(t, srv, "GET", "/v1/instances/web-1/boot", adminToken, "")
	var st firstboot.Status
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("boot: %d %v %s", code, err, body)
	}
	if st.State != firstboot.Running || st.Stage != "modules-final" || st.Module != "config-scripts-user" ||
		len(st.Stages) != 2 || st.Events[0].Kind != firstboot.KindFetch || st.Events[len(st.Events)-1].Name != "modules-final/config-scripts-user" || st.Agent != "cloud-init" {
		t.Errorf("web-1: %s", body)
	}
	if code, body := call(t, srv, "GET", "/v1/instances/nope/boot", adminToken, ""); code != 404 || !strings.Contains(body, `instance \"nope\" not found`) {
		t.Errorf("unknown instance: %d %s", code, body)
	}
	if code, _ := call(t, srv, "GET", "/v1/boots", "", ""); code != 401 {
		t.Errorf("no token: %d", code)
	}

	code, body = call(t, srv, "GET", "/v1/boots", adminToken, "")
	var sum firstboot.Summary
	if err := json.Unmarshal([]byte(body), &sum); code != 200 || err != nil {
		t.Fatalf("boots: %d %v %s", code, err, body)
	}
	want := map[firstboot.State]int{firstboot.Pending: 1, firstboot.Fetched: 0, firstboot.Running: 1, firstboot.Stalled: 0, firstboot.Done: 0, firstboot.Failed: 1}
	if !reflect.DeepEqual(sum.Counts, want) || len(sum.Instances) != 3 || sum.Instances[0].Name != "ign" ||
		sum.Instances[0].Errors[0].Unit != "app.service" || sum.Instances[1].Events != nil {
		t.Errorf("summary: %s", body)
	}
	for query, names := range map[string]string{
		"?state=failed,stalled":         "ign",
		"?agent=cloud-init":             "web-1 web-2",
		"?name=web&state=pending":       "web-2",
		"?min-age=25s":                  "ign web-1", // first fetched 45s ago, ign finished in 30s; web-2 is 0
		"?min-age=40s":                  "web-1",
		"?max-age=10s&agent=cloud-init": "web-2",
		"?state=running&min-age=1h":     "",
		"?watch=false&agent=ignition":   "ign",
		"?state=pending,fetched,done":   "web-2",
		"?name=&state=failed%2Crunning": "ign web-1",
	} {
		code, body := call(t, srv, "GET", "/v1/boots"+query, adminToken, "")
		var sum firstboot.Summary
		json.Unmarshal([]byte(body), &sum)
		var got []string
		for _, st := range sum.Instances {
			got = append(got, st.Name)
		}
		if code != 200 || strings.Join(got, " ") != names {
			t.Errorf("%s: %d %v, want %s", query, code, got, names)
		}
	}

	code, body = call(t, srv, "GET", "/v1/boots?state=failed,bogus&min-age=5x&agent=windows&colour=red&watch=yes&minAge=1m", adminToken, "")
	for _, w := range []string{`state=\"bogus\"`, `min-age=\"5x\"`, `agent=\"windows\"`, `colour: unknown parameter`, `minAge: unknown parameter`, `watch=\"yes\"`} {
		if code != 400 || !strings.Contains(body, w) {
			t.Errorf("bad filter: want %s: %d %s", w, code, body)
		}
	}

	// Local answers the same as the handler, through Client.
	ctx := context.Background()
	local := NewLocal(f.store, Options{Logger: quiet, Metadata: f.md})
	remote := &Client{URL: srv.URL, Token: adminToken, HTTP: srv.Client()}
	filter := firstboot.Filter{States: []firstboot.State{firstboot.Running, firstboot.Failed}, MinAge: time.Second}
	for _, api := range []API{local, remote} {
		sum, err := api.Boots(ctx, filter)
		if err != nil || len(sum.Instances) != 2 || sum.Counts[firstboot.Failed] != 1 {
			t.Errorf("%T boots: %+v %v", api, sum, err)
		}
		st, err := api.Boot(ctx, "ign")
		if err != nil || st.State != firstboot.Failed || st.FirstError() != "app.service: exit status 3" {
			t.Errorf("%T boot: %+v %v", api, st, err)
		}
		if _, err := api.Boot(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `instance "nope" not found`) {
			t.Errorf("%T unknown: %v", api, err)
		}
	}
	var ce *Error
	if _, err := remote.Boots(ctx, firstboot.Filter{States: []firstboot.State{"bogus"}}); !errors.As(err, &ce) || ce.StatusCode != 400 {
		t.Errorf("client, bad filter: %v", err)
	}
}

// sseServer serves h on loopback with admin.NewServer's limits, but read
// and write timeouts of 300 ms: a watch must outlive them.
func sseServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.New(h, 300*time.Millisecond, 300*time.Millisecond)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestWatchBoots: the watch stream answers a summary at once and its
// changes at each change, on one connection that outlives the server's read and
// write timeouts; watchers beyond MaxWatchers are refused with 503; the
// Client hands each summary to its callback and stops on its error.
func TestWatchBoots(t *testing.T) {
	f := newFleet(t)
	url := sseServer(t, NewHandler(f.store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler), Metadata: f.md, MaxWatchers: 1}))

	req, _ := http.NewRequest("GET", url+"/v1/boots?watch=true&name=web-1", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("watch: %s %s", resp.Status, ct)
	}
	summaries := make(chan firstboot.Summary, 8)
	go func() {
		defer close(summaries) // the stream ended
		want := "summary"
		readEvents(resp.Body, 1<<20, func(event string, data []byte) error {
			var sum firstboot.Summary
			if event != want || json.Unmarshal(data, &sum) != nil {
				t.Errorf("event %q: %s", event, data)
			}
			want = "changes"
			summaries <- sum
			return nil
		})
	}()
	if sum := <-summaries; len(sum.Instances) != 1 || sum.Instances[0].State != firstboot.Pending {
		t.Fatalf("first summary: %+v", sum)
	}

	// One stream at a time here: the second is refused.
	code, body := getWith(t, url+"/v1/boots?watch=true")
	if code != 503 || !strings.Contains(body, "too many watches") {
		t.Errorf("second watcher: %d %s", code, body)
	}

	// Past the server's timeouts, a change still arrives on the stream.
	time.Sleep(600 * time.Millisecond)
	f.boots.Fetch("web-1", f.uid(t, "web-1"), "cloud-init", "nocloud", "/nocloud/meta-data")
	if sum, ok := <-summaries; !ok || sum.Instances[0].State != firstboot.Fetched || sum.Counts[firstboot.Fetched] != 1 {
		t.Fatalf("after a fetch (stream open: %v): %+v", ok, sum)
	}
	resp.Body.Close()

	// The Client: each summary to fn, until fn says stop.
	remote := &Client{URL: url, Token: adminToken, HTTP: &http.Client{Timeout: 200 * time.Millisecond}}
	stop := errors.New("seen it done")
	var states []firstboot.State
	var once sync.Once
	err = retryBusy(func() error {
		return remote.WatchBoots(context.Background(), firstboot.Filter{Name: "web-1"}, func(sum firstboot.Summary) error {
			states = append(states, sum.Instances[0].State)
			once.Do(func() { go f.boots.Report("web-1", f.uid(t, "web-1"), "cloud-init", firstboot.Report{}) })
			if sum.Instances[0].State == firstboot.Done {
				return stop
			}
			return nil
		})
	})
	if !errors.Is(err, stop) || states[0] != firstboot.Fetched || states[len(states)-1] != firstboot.Done {
		t.Errorf("client watch: %v %v", err, states)
	}
}

// retryBusy runs watch again while the server still holds the previous
// stream's slot (its handler ends after the client closed it).
func retryBusy(watch func() error) error {
	for {
		err := watch()
		var ce *Error
		if !errors.As(err, &ce) || ce.StatusCode != http.StatusServiceUnavailable {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func getWith(t *testing.T, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}

// TestReadEventsBounded: an event larger than the limit is an error, not
// an allocation.
func TestReadEventsBounded(t *testing.T) {
	big := "data: " + strings.Repeat("x", 2000) + "\n\n"
	err := readEvents(strings.NewReader(big), 1000, func(string, []byte) error { return nil })
	if !errors.Is(err, errStream) {
		t.Errorf("one long line: %v", err)
	}
	many := strings.Repeat("data: "+strings.Repeat("x", 100)+"\n", 20) + "\n"
	if err := readEvents(strings.NewReader(many), 1000, func(string, []byte) error { return nil }); !errors.Is(err, errStream) {
		t.Errorf("many data lines: %v", err)
	}
	var got []string
	readEvents(strings.NewReader(": keep-alive\n\nevent: summary\ndata: {}\n\n"), 1000, func(ev string, d []byte) error {
		got = append(got, ev+"="+string(d))
		return nil
	})
	if !reflect.DeepEqual(got, []string{"summary={}"}) {
		t.Errorf("events: %q", got)
	}
}

// sharedStore is a store shared between replicas (firstboot.Shared), as
// kubestore and etcdstore are: it holds statuses some server wrote, and
// hands later ones to FollowBoots; with ctx already ended, FollowBoots
// merges what is stored and returns.
type sharedStore struct {
	*memStore
	stored []firstboot.Status
	later  chan firstboot.Status
}

func (s *sharedStore) WriteBoot(context.Context, []firstboot.Status) error { return nil }

func (s *sharedStore) FollowBoots(ctx context.Context, t *firstboot.Tracker) error {
	for _, st := range s.stored {
		t.Merge(st)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case st := <-s.later:
			t.Merge(st)
		}
	}
}

// TestLocalFollowsSharedStore: a Local without a guests' handler (`vminit
// instances status --kubeconfig`) reads the statuses a shared store
// holds, at once, and watches what the servers write later; on a store
// that shares nothing, every boot is pending.
func TestLocalFollowsSharedStore(t *testing.T) {
	f := newFleet(t)
	web := f.uid(t, "web-1")
	store := &sharedStore{memStore: f.store, later: make(chan firstboot.Status),
		stored: []firstboot.Status{{Name: "web-1", UID: web, Agent: "cloud-init", State: firstboot.Running, Stage: "modules-config", FirstFetch: time.Now(), LastEvent: time.Now()}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	plain := NewLocal(f.store, Options{Logger: slog.New(slog.DiscardHandler)})
	if err := plain.FollowBoots(ctx); err != nil {
		t.Fatal(err)
	}
	if sum, _ := plain.Boots(ctx, firstboot.Filter{}); sum.Counts[firstboot.Pending] != 3 {
		t.Errorf("a store that shares nothing: %+v", sum.Counts)
	}

	local := NewLocal(store, Options{Logger: slog.New(slog.DiscardHandler)})
	if err := local.FollowBoots(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := local.Boot(ctx, "web-1"); err != nil || st.State != firstboot.Running || st.Stage != "modules-config" {
		t.Fatalf("loaded: %+v %v", st, err)
	}
	stop := errors.New("done")
	err := local.WatchBoots(ctx, firstboot.Filter{Name: "web-1"}, func(sum firstboot.Summary) error {
		switch sum.Instances[0].State {
		case firstboot.Running:
			go func() {
				done := store.stored[0]
				done.State, done.Finished, done.LastEvent = firstboot.Done, time.Now(), time.Now()
				store.later <- done
			}()
		case firstboot.Done:
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Errorf("watch: %v", err)
	}
}

// TestClientWatchReconnects: a stream the server ends is opened again,
// and fn hears only of changes: the summary a new stream starts with is
// not handed again when it is the one the last stream ended with.
func TestClientWatchReconnects(t *testing.T) {
	streams := []string{"pending", "pending", "done"}
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		state := streams[0]
		if len(streams) > 1 {
			streams = streams[1:]
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `: keep-alive

event: summary
data: {"counts":{"`+state+`":1},"instances":[{"name":"web","state":"`+state+`"}]}

`)
	}))
	defer srv.Close()
	stop := errors.New("done")
	var seen []firstboot.State
	err := (&Client{URL: srv.URL, Token: adminToken}).WatchBoots(context.Background(), firstboot.Filter{}, func(sum firstboot.Summary) error {
		seen = append(seen, sum.Instances[0].State)
		if sum.Instances[0].State == firstboot.Done {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !reflect.DeepEqual(seen, []firstboot.State{firstboot.Pending, firstboot.Done}) {
		t.Errorf("%v %v", err, seen)
	}
}

// TestWatchLifetimeAndKeepAlive: an idle stream carries keep-alive
// comments and ends by itself after its lifetime; Client.WatchBoots
// opens it again and hears of what changed after.
func TestWatchLifetimeAndKeepAlive(t *testing.T) {
	oldLife, oldRefresh, oldCoalesce := watchLifetime, watchRefresh, watchCoalesce
	watchLifetime, watchRefresh, watchCoalesce = 300*time.Millisecond, 50*time.Millisecond, 10*time.Millisecond
	defer func() { watchLifetime, watchRefresh, watchCoalesce = oldLife, oldRefresh, oldCoalesce }()
	f := newFleet(t)
	url := sseServer(t, NewHandler(f.store, Options{Token: adminToken, Logger: slog.New(slog.DiscardHandler), Metadata: f.md}))

	req, _ := http.NewRequest("GET", url+"/v1/boots?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(resp.Body) // to its end: the server ends it
	resp.Body.Close()
	if err != nil || strings.Count(string(stream), "event: summary\n") != 1 || !strings.Contains(string(stream), "\n: keep-alive\n\n") {
		t.Errorf("an idle stream (%v):\n%s", err, stream)
	}

	stop := errors.New("done")
	var seen []firstboot.State
	var once sync.Once
	err = (&Client{URL: url, Token: adminToken}).WatchBoots(context.Background(), firstboot.Filter{Name: "web-2"}, func(sum firstboot.Summary) error {
		seen = append(seen, sum.Instances[0].State)
		once.Do(func() {
			go func() {
				time.Sleep(2 * watchLifetime) // the first stream has ended
				f.boots.Fetch("web-2", f.uid(t, "web-2"), "cloud-init", "nocloud", "/nocloud/meta-data")
			}()
		})
		if sum.Instances[0].State == firstboot.Fetched {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !reflect.DeepEqual(seen, []firstboot.State{firstboot.Pending, firstboot.Fetched}) {
		t.Errorf("across streams: %v %v", err, seen)
	}
}
