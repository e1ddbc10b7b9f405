package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vminit/vminit/internal/testing/etcdtest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

func startEtcd(t *testing.T) *etcdtest.Server { return etcdtest.Start(t, nil) }

type syncBuf = testtools.SyncBuffer

func open(t *testing.T, e *etcdtest.Server, prefix string) (*Store, *syncBuf) {
	t.Helper()
	return openChecked(t, e, prefix, registry.Checks{})
}

func openChecked(t *testing.T, e *etcdtest.Server, prefix string, checks registry.Checks) (*Store, *syncBuf) {
	t.Helper()
	logs := &syncBuf{}
	s, err := Open(context.Background(), Config{Endpoints: []string{e.ClientURL}, Prefix: prefix,
		DialTimeout: 2 * time.Second, RequestTimeout: 3 * time.Second, MaxBackoff: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Checks: checks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

func doc(name, addr, host string) string {
	return fmt.Sprintf("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: %s}\nspec:\n  hostname: %s\n  metadataServer: {addresses: [%q]}\n", name, host, addr)
}

func hostname(s *Store, name string) string {
	if r, ok := s.Snapshot().ByName(name); ok {
		return r.Instance().Spec.Hostname
	}
	return ""
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStore(t *testing.T) {
	e := startEtcd(t)
	cli := e.Client()
	ctx := context.Background()
	// A document written before Open is in the initial list.
	if _, err := cli.Put(ctx, DefaultPrefix+"pre", doc("pre", "10.1.0.1", "pre")); err != nil {
		t.Fatal(err)
	}
	a, logsA := open(t, e, "")
	b, _ := open(t, e, "")
	if hostname(a, "pre") != "pre" {
		t.Fatalf("initial list: %v", a.Snapshot().Names())
	}

	// Put through one replica is visible there on return and reaches the other by watch.
	rec, err := a.Put(ctx, []byte(doc("web", "10.1.0.2", "web")))
	if err != nil {
		t.Fatal(err)
	}
	if hostname(a, "web") != "web" || rec.Name != "web" {
		t.Fatal("Put is not visible in its own store on return")
	}
	eventually(t, "replica b to see a's Put", func() bool { return hostname(b, "web") == "web" })
	if _, err := b.Put(ctx, []byte(doc("web", "10.1.0.2", "web2"))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica a to see b's update", func() bool { return hostname(a, "web") == "web2" })

	// Writes straight to etcd are watched too.
	cli.Put(ctx, DefaultPrefix+"direct", doc("direct", "10.1.0.3", "direct"))
	eventually(t, "a direct write", func() bool { return hostname(a, "direct") == "direct" && hostname(b, "direct") == "direct" })

	// A bad document is logged and skipped; the last good version stays.
	cli.Put(ctx, DefaultPrefix+"web", "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web}\nspec: {hostname: Bad_Name, bogus: 1}\n")
	eventually(t, "the bad document to be logged", func() bool { return strings.Contains(logsA.String(), "invalid document skipped") })
	for _, want := range []string{"key=/vminit/instances/web", "spec.bogus", "spec.hostname", "last good version"} {
		if !strings.Contains(logsA.String(), want) {
			t.Errorf("log lacks %q: %s", want, logsA.String())
		}
	}
	if hostname(a, "web") != "web2" || hostname(b, "web") != "web2" {
		t.Error("the last good version is not served")
	}
	// A document under the wrong key, and one stealing an address, are refused.
	cli.Put(ctx, DefaultPrefix+"wrong-key", doc("other", "10.1.0.9", "x"))
	cli.Put(ctx, DefaultPrefix+"thief", doc("thief", "10.1.0.1", "x"))
	eventually(t, "the refusals to be logged", func() bool {
		return strings.Contains(logsA.String(), `key names \"wrong-key\"`) && strings.Contains(logsA.String(), "document refused")
	})
	if r, _ := a.Snapshot().ByAddr(netip.MustParseAddr("10.1.0.1")); r == nil || r.Name != "pre" {
		t.Errorf("10.1.0.1 → %v", r)
	}
	// Put refuses an address conflict and invalid documents up front.
	if _, err := a.Put(ctx, []byte(doc("thief2", "10.1.0.1", "x"))); !errors.Is(err, registry.ErrAddressConflict) {
		t.Errorf("Put with a taken address: %v", err)
	}
	if _, err := a.Put(ctx, []byte("kind: nope\n")); err == nil {
		t.Error("Put of an invalid document succeeded")
	}

	// Delete.
	if err := b.Delete(ctx, "direct"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Snapshot().ByName("direct"); ok {
		t.Error("Delete is not visible in its own store on return")
	}
	eventually(t, "a to see the delete", func() bool { _, ok := a.Snapshot().ByName("direct"); return !ok })
	if err := a.Delete(ctx, "direct"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("deleting a missing key: %v", err)
	}
	// Deleting the incumbent lets the refused thief in.
	a.Delete(ctx, "pre")
	eventually(t, "the refused document to be accepted", func() bool {
		r, _ := a.Snapshot().ByAddr(netip.MustParseAddr("10.1.0.1"))
		return r != nil && r.Name == "thief"
	})
}

func TestPrefixes(t *testing.T) {
	e := startEtcd(t)
	a, _ := open(t, e, "/fleet-a/")
	b, _ := open(t, e, "/fleet-b")
	if _, err := a.Put(context.Background(), []byte(doc("x", "10.2.0.1", "x"))); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(context.Background(), []byte(doc("y", "10.2.0.1", "y"))); err != nil {
		t.Fatalf("the same address under another prefix: %v", err)
	}
	if a.Snapshot().Len() != 1 || b.Snapshot().Len() != 1 {
		t.Errorf("prefixes leak: %v %v", a.Snapshot().Names(), b.Snapshot().Names())
	}
}

// TestEtcdOutage kills etcd while stores are serving, checks they keep
// answering from memory, restarts etcd on the same data directory, changes
// an instance, and checks both stores catch up.
func TestEtcdOutage(t *testing.T) {
	e := startEtcd(t)
	a, logs := open(t, e, "")
	b, _ := open(t, e, "")
	ctx := context.Background()
	if _, err := a.Put(ctx, []byte(doc("vm", "10.3.0.1", "before"))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b to see the instance", func() bool { return hostname(b, "vm") == "before" })

	e.Kill()
	// Served from memory, without waiting on etcd.
	for _, s := range []*Store{a, b} {
		start := time.Now()
		for range 1000 {
			r, ok := s.Snapshot().ByAddr(netip.MustParseAddr("10.3.0.1"))
			if !ok || r.Instance().Spec.Hostname != "before" {
				t.Fatal("the instance vanished while etcd is down")
			}
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("1000 lookups took %v with etcd down", d)
		}
	}
	// Writes fail (bounded by RequestTimeout) and say why.
	if _, err := a.Put(ctx, []byte(doc("vm", "10.3.0.1", "during"))); !errors.Is(err, registry.ErrUnavailable) {
		t.Errorf("Put with etcd down: %v", err)
	}
	if hostname(a, "vm") != "before" {
		t.Error("a failed Put changed the snapshot")
	}

	e.Restart() // same data dir and ports
	cli := e.Client()
	// Made after the restart, by another client: both stores must catch up.
	var err error
	for range 50 {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = cli.Put(cctx, DefaultPrefix+"vm", doc("vm", "10.3.0.1", "after"))
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	cli.Put(ctx, DefaultPrefix+"new", doc("new", "10.3.0.2", "new"))
	eventually(t, "both stores to catch up", func() bool {
		return hostname(a, "vm") == "after" && hostname(b, "vm") == "after" && hostname(a, "new") == "new" && hostname(b, "new") == "new"
	})
	// And writes through the store work again.
	if _, err := a.Put(ctx, []byte(doc("vm", "10.3.0.1", "again"))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b to see the write after recovery", func() bool { return hostname(b, "vm") == "again" })
	t.Logf("relists: a=%d b=%d; log:\n%s", a.Relists(), b.Relists(), logs)
}

// TestCompaction compacts away the revision the store's first watch
// starts from, so the watch fails and the store must re-list to catch up.
func TestCompaction(t *testing.T) {
	e := startEtcd(t)
	cli := e.Client()
	ctx := context.Background()
	cli.Put(ctx, DefaultPrefix+"c", doc("c", "10.4.0.1", "h0"))
	var once sync.Once
	beforeWatch = func() {
		once.Do(func() {
			for i := 1; i <= 3; i++ {
				cli.Put(ctx, DefaultPrefix+"c", doc("c", "10.4.0.1", fmt.Sprintf("h%d", i)))
			}
			resp, _ := cli.Put(ctx, DefaultPrefix+"d", doc("d", "10.4.0.2", "d"))
			if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(func() { beforeWatch = nil })
	s, logs := open(t, e, "")
	eventually(t, "the re-list after compaction", func() bool { return hostname(s, "c") == "h3" && hostname(s, "d") == "d" })
	if s.Relists() < 1 || !strings.Contains(logs.String(), "compacted") {
		t.Errorf("no re-list logged (%d):\n%s", s.Relists(), logs)
	}
}

// TestPagedList lists in pages of 3. A change made between two pages is
// not half-applied: the list reads one revision, and the watch brings the
// change after it.
func TestPagedList(t *testing.T) {
	stores, atWatch := make(chan *Store, 1), make(chan string, 1)
	var once sync.Once
	var cli *clientv3.Client
	e, cli, pauses := pagedList(t, func(n int) {
		if n == 1 { // vm6 is on the last page
			cli.Put(context.Background(), DefaultPrefix+"vm6", doc("vm6", "10.5.0.7", "new"))
		}
	}, func() { once.Do(func() { atWatch <- hostname(<-stores, "vm6") }) })
	s, logs := open(t, e, "")
	stores <- s
	if h := <-atWatch; h != "old" {
		t.Errorf("the list read vm6 as %q: it mixed revisions", h)
	}
	eventually(t, "the watch to bring vm6's change", func() bool { return hostname(s, "vm6") == "new" })
	if s.Snapshot().Len() != 7 || pauses() != 2 {
		t.Errorf("%d instances, %d pauses between pages; log:\n%s", s.Snapshot().Len(), pauses(), logs)
	}
}

// TestPagedListCompacted compacts the revision a list reads at between two
// pages: the list starts again at a new revision, and Open succeeds.
func TestPagedListCompacted(t *testing.T) {
	var cli *clientv3.Client
	e, cli, pauses := pagedList(t, func(n int) {
		if n == 1 {
			ctx := context.Background()
			resp, _ := cli.Put(ctx, DefaultPrefix+"vm6", doc("vm6", "10.5.0.7", "new"))
			if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
				t.Error(err)
			}
		}
	}, nil)
	s, logs := open(t, e, "")
	// 3 pages, the second failed (compacted); then 3 pages.
	if s.Snapshot().Len() != 7 || hostname(s, "vm6") != "new" || pauses() != 3 {
		t.Errorf("%d instances, vm6 %q, %d pauses between pages; log:\n%s", s.Snapshot().Len(), hostname(s, "vm6"), pauses(), logs)
	}
}

// pagedList starts etcd with seven instances (vm0…vm6 at 10.5.0.1…7,
// hostname "old") and makes lists read pages of 3 for the test: between
// two pages onPause(n) runs, n counting from 1; pauses says how many ran.
// beforeWatchHook, if not nil, runs before each Watch. The hooks run only
// once a store is opened, after pagedList has returned.
func pagedList(t *testing.T, onPause func(n int), beforeWatchHook func()) (e *etcdtest.Server, cli *clientv3.Client, pauses func() int) {
	t.Helper()
	e = startEtcd(t)
	cli = e.Client()
	for i := range 7 {
		if _, err := cli.Put(context.Background(), fmt.Sprintf("%svm%d", DefaultPrefix, i), doc(fmt.Sprintf("vm%d", i), fmt.Sprintf("10.5.0.%d", i+1), "old")); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	old := listPage
	listPage, beforeWatch = 3, beforeWatchHook
	afterPage = func() { n++; onPause(n) }
	t.Cleanup(func() { listPage, afterPage, beforeWatch = old, nil, nil })
	return e, cli, func() int { return n }
}

// TestVersionsInOneWatchResponse: when a good and then a refused version
// of a key reach a store in one watch response, as they do for a replica
// that watches from before both, the store serves the good one, as it
// does when they come one by one; it does not keep only the last event
// of each key.
func TestVersionsInOneWatchResponse(t *testing.T) {
	e := startEtcd(t)
	cli := e.Client()
	checks := registry.Checks{Content: func(r *registry.Record) error {
		if r.Instance().Spec.Hostname == "refused" {
			return spec.Errors{{Field: "spec.hostname", Message: "refused by the check"}}
		}
		return nil
	}}
	// Both versions are written after the store's list and before its
	// watch starts, so the watch sends them together.
	var once sync.Once
	beforeWatch = func() {
		once.Do(func() {
			for _, host := range []string{"good", "refused"} {
				if _, err := cli.Put(context.Background(), DefaultPrefix+"web", doc("web", "10.1.0.2", host)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	t.Cleanup(func() { beforeWatch = nil })
	s, logs := openChecked(t, e, "", checks)
	eventually(t, "the refused version to be logged", func() bool { return strings.Contains(logs.String(), "refused by the check") })
	if hostname(s, "web") != "good" {
		t.Errorf("served %q, want the last good version:\n%s", hostname(s, "web"), logs.String())
	}
}

// TestChecksAndIncarnations: a version that fails the server's checks is
// skipped and the last good one served, and Put refuses it; a key deleted
// and written again with the same document is a new incarnation (UID),
// on which every replica agrees.
func TestChecksAndIncarnations(t *testing.T) {
	e := startEtcd(t)
	cli := e.Client()
	ctx := context.Background()
	checks := registry.Checks{Content: func(r *registry.Record) error {
		if r.Instance().Spec.Hostname == "refused" {
			return spec.Errors{{Field: "spec.hostname", Message: "refused by the check"}}
		}
		return nil
	}}
	a, logs := openChecked(t, e, "", checks)
	b, _ := openChecked(t, e, "", checks)
	if _, err := a.Put(ctx, []byte(doc("web", "10.1.0.2", "good"))); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Put(ctx, []byte(doc("web", "10.1.0.2", "refused"))); err == nil || !strings.Contains(err.Error(), "refused by the check") {
		t.Errorf("Put of a refused version: %v", err)
	}
	if _, err := cli.Put(ctx, DefaultPrefix+"web", doc("web", "10.1.0.2", "refused")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the refused version to be logged", func() bool { return strings.Contains(logs.String(), "refused by the check") })
	if hostname(a, "web") != "good" || !strings.Contains(logs.String(), "last good version") {
		t.Errorf("served %q:\n%s", hostname(a, "web"), logs.String())
	}

	uid := func(s *Store) string { // "" while s does not serve web (a replica lags)
		if r, ok := s.Snapshot().ByName("web"); ok {
			return r.UID
		}
		return ""
	}
	eventually(t, "the replica to serve web", func() bool { return hostname(b, "web") == "good" })
	first := uid(a)
	if first == "" || uid(b) != first {
		t.Fatalf("UIDs %q and %q", first, uid(b))
	}
	if _, err := cli.Delete(ctx, DefaultPrefix+"web"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, DefaultPrefix+"web", doc("web", "10.1.0.2", "good")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new incarnation", func() bool {
		return hostname(a, "web") == "good" && uid(a) != first && uid(b) == uid(a)
	})
}
