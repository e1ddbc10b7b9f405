package etcdstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// follow runs s's Persist and FollowBoots with a tracker of its own, as
// `vminit serve` does, until the test ends; failures go to errs.
func follow(t *testing.T, s *Store, errs chan<- error) *firstboot.Tracker {
	t.Helper()
	tr := firstboot.New(firstboot.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	wg.Go(func() { tr.Persist(ctx, s, 20*time.Millisecond, report) })
	wg.Go(func() {
		if err := s.FollowBoots(ctx, tr); err != nil {
			report(err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return tr
}

// TestFirstBootShared: two replicas share their guests' first boots
// through a key per instance beside the specs (which their own watch
// never reads); Delete takes the status with the spec, and a status of a
// deleted or re-created instance is written nowhere.
func TestFirstBootShared(t *testing.T) {
	e := startEtcd(t)
	ctx := context.Background()
	a, logs := open(t, e, "")
	b, _ := open(t, e, "")
	rec, err := a.Put(ctx, []byte(doc("web", "10.4.0.1", "web")))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "b to serve web", func() bool { return hostname(b, "web") == "web" })
	errs := make(chan error, 8)
	ta, tb := follow(t, a, errs), follow(t, b, errs)

	// a answers the guest, b hears its events: each learns the other's.
	ta.Fetch("web", rec.UID, "cloud-init", "nocloud", "/meta-data")
	eventually(t, "b to learn of a's fetch", func() bool { return tb.Status("web", rec.UID, "").State == firstboot.Fetched })
	tb.Record("web", rec.UID, "cloud-init", firstboot.Event{Kind: firstboot.KindStart, Name: "modules-config/config-ssh"})
	eventually(t, "a to learn of b's event", func() bool {
		st := ta.Status("web", rec.UID, "")
		return st.State == firstboot.Running && st.Module == "config-ssh"
	})
	tb.Record("web", rec.UID, "cloud-init", firstboot.Event{Kind: firstboot.KindFinish, Name: "modules-final", Result: firstboot.ResultSuccess})
	eventually(t, "a to learn web is done", func() bool { return ta.Status("web", rec.UID, "").State == firstboot.Done })
	// The value is the Status, event log included, under the boot prefix.
	got, err := e.Client().Get(ctx, "/vminit/instances.boot/web")
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("the status key: %v %v", got, err)
	}
	stored, err := decodeBoot(got.Kvs[0].Value)
	if err != nil || stored.State != firstboot.Done || len(stored.Events) != 3 {
		t.Errorf("stored: %+v %v", stored, err)
	}
	// A one-shot reader (FollowBoots with an ended context) reads it.
	ended, cancel := context.WithCancel(ctx)
	cancel()
	once := firstboot.New(firstboot.Options{})
	if err := b.FollowBoots(ended, once); err != nil || once.Status("web", rec.UID, "").State != firstboot.Done {
		t.Errorf("read once: %+v %v", once.Status("web", rec.UID, ""), err)
	}

	// Deleted: the status goes with the spec, and is not written again.
	if err := b.Delete(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.Client().Get(ctx, "/vminit/instances.boot/web"); len(got.Kvs) != 0 {
		t.Errorf("the deleted instance's status stays: %s", got.Kvs[0].Value)
	}
	old := rec.UID
	ta.Fetch("web", old, "cloud-init", "nocloud", "/meta-data") // a late request of the old incarnation
	if err := a.WriteBoot(ctx, []firstboot.Status{ta.Status("web", old, "")}); err != nil {
		t.Fatal(err)
	}
	// Re-created: a new incarnation, whose key the old one's status never takes.
	rec, err = a.Put(ctx, []byte(doc("web", "10.4.0.1", "web")))
	if err != nil || rec.UID == old {
		t.Fatalf("re-created: %v %v", rec, err)
	}
	if err := a.WriteBoot(ctx, []firstboot.Status{{Name: "web", UID: old, State: firstboot.Failed}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.Client().Get(ctx, "/vminit/instances.boot/web"); len(got.Kvs) != 0 {
		t.Errorf("a former incarnation's status was written: %s", got.Kvs[0].Value)
	}
	select {
	case err := <-errs:
		t.Errorf("Persist or FollowBoots: %v", err)
	default:
	}
	if strings.Contains(logs.String(), "boot") {
		t.Errorf("the specs' watch read a status key: %s", logs.String())
	}
}

// TestFirstBootBatches: a batch of MaxBatch statuses, some with a full
// event log, is written in transactions etcd accepts (bounded in
// operations and bytes) and read back whole.
func TestFirstBootBatches(t *testing.T) {
	e := startEtcd(t)
	ctx := context.Background()
	s, _ := open(t, e, "")
	tr := firstboot.New(firstboot.Options{})
	var batch []firstboot.Status
	long := strings.Repeat("x", firstboot.MaxMessage)
	for i := range firstboot.MaxBatch {
		name := fmt.Sprintf("vm-%03d", i)
		rec, err := s.Put(ctx, []byte(doc(name, fmt.Sprintf("10.5.%d.%d", i/200, i%200+1), name)))
		if err != nil {
			t.Fatal(err)
		}
		tr.Fetch(name, rec.UID, "cloud-init", "nocloud", "/meta-data")
		for j := range firstboot.MaxEvents {
			tr.Record(name, rec.UID, "cloud-init", firstboot.Event{Kind: firstboot.KindStart, Name: fmt.Sprintf("init-network/m%d", j), Message: long})
		}
		batch = append(batch, tr.Status(name, rec.UID, ""))
	}
	if err := s.WriteBoot(ctx, batch); err != nil {
		t.Fatal(err)
	}
	read := firstboot.New(firstboot.Options{})
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.FollowBoots(ended, read); err != nil {
		t.Fatal(err)
	}
	for _, st := range batch {
		if got := read.Status(st.Name, st.UID, ""); got.State != firstboot.Running || len(got.Events) != firstboot.MaxEvents {
			t.Fatalf("%s read back: %s, %d events", st.Name, got.State, len(got.Events))
		}
	}
}

// TestBootPrefixApart: the statuses' prefix may be neither below the
// specs' (their list and watch would read the statuses) nor above it
// (FollowBoots would read the specs).
func TestBootPrefixApart(t *testing.T) {
	for _, c := range []struct{ prefix, boot string }{
		{"/vminit/instances/", "/vminit/instances/boot/"},
		{"/vminit/instances/", "/vminit/"},
		{"/vminit/instances/", "/vminit/instances"},
	} {
		_, err := Open(context.Background(), Config{Endpoints: []string{"http://127.0.0.1:1"}, Prefix: c.prefix, BootPrefix: c.boot})
		if err == nil || !strings.Contains(err.Error(), "first-boot prefix") {
			t.Errorf("prefix %q, boot prefix %q: %v", c.prefix, c.boot, err)
		}
	}
}

// TestFollowBootsEndsWithStore: FollowBoots returns when its store is
// closed, not only when its context ends.
func TestFollowBootsEndsWithStore(t *testing.T) {
	e := startEtcd(t)
	s, err := Open(context.Background(), Config{Endpoints: []string{e.ClientURL}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.FollowBoots(context.Background(), firstboot.New(firstboot.Options{})) }()
	s.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("FollowBoots: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("FollowBoots still runs after Close")
	}
}
