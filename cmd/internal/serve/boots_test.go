package serve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/registry"
)

// sharedStore is a store that shares first-boot statuses, as etcdstore
// and kubestore do: it hands the test what the server writes, and plays
// another replica that finished vm-2's boot. Its first FollowBoots fails,
// as a broken watch does.
type sharedStore struct {
	*registry.StaticStore
	wrote    chan []firstboot.Status
	follows  atomic.Int32
	followed chan struct{} // closed once the other replica's status is merged
	stopped  chan struct{} // closed when FollowBoots returned for the end of the server
}

func (s *sharedStore) WriteBoot(ctx context.Context, statuses []firstboot.Status) error {
	select {
	case s.wrote <- statuses:
	case <-ctx.Done():
	}
	return nil
}

func (s *sharedStore) FollowBoots(ctx context.Context, t *firstboot.Tracker) error {
	if s.follows.Add(1) == 1 {
		return errors.New("watch closed")
	}
	t.Merge(firstboot.Status{Name: "vm-2", Agent: "cloud-init", State: firstboot.Done, Stage: "modules-final",
		FirstFetch: time.Unix(1_700_000_000, 0), LastEvent: time.Unix(1_700_000_060, 0), Finished: time.Unix(1_700_000_060, 0)})
	close(s.followed)
	<-ctx.Done()
	close(s.stopped)
	return ctx.Err()
}

func newSharedStore(t *testing.T) *sharedStore {
	var recs []*registry.Record
	for i := 1; i <= 2; i++ {
		rec, err := registry.DecodeDocument([]byte(doc(i, 0)), "")
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	st, err := registry.NewStaticStore(recs)
	if err != nil {
		t.Fatal(err)
	}
	return &sharedStore{StaticStore: st, wrote: make(chan []firstboot.Status, 16), followed: make(chan struct{}), stopped: make(chan struct{})}
}

// TestSharedBoots: with a store that shares first-boot statuses, the
// server follows the other replicas' (again after the watch failed),
// writes its own guest's first boot to the store, observes its end in the
// metrics, and stops both when it stops.
func TestSharedBoots(t *testing.T) {
	followRetry = time.Millisecond
	defer func() { followRetry = 5 * time.Second }()
	store := newSharedStore(t)
	srv, err := New(context.Background(), Options{
		Store:   StoreConfig{Open: func(context.Context, registry.Checks, *slog.Logger) (Store, error) { return store, nil }},
		Handler: mdserver.Options{AllowLoopbackInstances: true},
		Listen:  []string{"127.0.0.1:0"}, MetricsListen: "127.0.0.1:0",
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := map[string]string{}
	for _, l := range srv.Listeners {
		addr[l.Name] = "http://" + l.Listener.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, nil, 0) }()

	waitFor(t, store.followed, "the other replica's status merged")
	if st, _ := srv.Handler.Boot("vm-2"); st.State != firstboot.Done {
		t.Errorf("vm-2, done on another replica: %s", st.State)
	}
	c := client(1, false)
	if resp, err := c.Get(addr["metadata"] + "/latest/meta-data/hostname"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	for _, ev := range []string{
		`{"name": "modules-final", "event_type": "start", "description": "running modules for final"}`,
		`{"name": "modules-final", "event_type": "finish", "result": "SUCCESS", "description": "running modules for final"}`,
	} {
		resp, err := c.Post(addr["metadata"]+bootreport.EventsPath, "application/json", strings.NewReader(ev))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST an event: %s", resp.Status)
		}
	}
	for written := false; !written; {
		select {
		case statuses := <-store.wrote:
			for _, st := range statuses {
				written = written || st.Name == "vm-1" && st.State == firstboot.Done
			}
		case <-time.After(30 * time.Second):
			t.Fatal("vm-1's first boot was never written to the store")
		}
	}
	resp, err := http.Get(addr["metrics"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`vminit_first_boot_duration_seconds_count{agent="cloud-init",outcome="done"} 1`, `vminit_first_boots{state="done"} 2`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	select {
	case <-store.stopped:
	default:
		t.Error("FollowBoots still runs after Run returned")
	}
	if n := store.follows.Load(); n != 2 {
		t.Errorf("FollowBoots called %d times, want 2 (once more after it failed)", n)
	}
}

// waitFor fails the test when ch is not closed within a generous bound
// (a hang, not a measure).
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("waited 30 s for %s", what)
	}
}

// TestSharedBootsFlushedOnStop: what a guest posted after the server's
// last periodic write is written as the server stops.
func TestSharedBootsFlushedOnStop(t *testing.T) {
	persistEvery, followRetry = time.Hour, time.Millisecond
	defer func() { persistEvery, followRetry = time.Second, 5*time.Second }()
	store := newSharedStore(t)
	srv, err := New(context.Background(), Options{
		Store:   StoreConfig{Open: func(context.Context, registry.Checks, *slog.Logger) (Store, error) { return store, nil }},
		Handler: mdserver.Options{AllowLoopbackInstances: true},
		Listen:  []string{"127.0.0.1:0"}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, nil, 0) }()
	waitFor(t, store.followed, "the other replica's status merged")
	resp, err := client(1, false).Post("http://"+srv.Listeners[0].Listener.Addr().String()+bootreport.EventsPath, "",
		strings.NewReader(`{"name": "init-network/config-ssh", "event_type": "start"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(store.wrote) != 0 {
		t.Fatalf("written before the hour")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	select {
	case statuses := <-store.wrote:
		if len(statuses) != 1 || statuses[0].Name != "vm-1" || statuses[0].State != firstboot.Running {
			t.Errorf("flushed %+v", statuses)
		}
	default:
		t.Error("nothing written as the server stopped")
	}
}
