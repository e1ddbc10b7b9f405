//go:build unix

package dirstore

import (
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/registry"
)

// TestIdleFleetHoldsItsDocuments: vminit serve's store (the server's
// checks deferred) holds an instance no guest has asked for as its
// document, not its decoded spec: after the background pass, the live
// heap is under 1,800 bytes an instance (2,600 when every spec stayed
// decoded; BenchmarkHeapPerInstance), and an instance asked for is served
// as its file says.
func TestIdleFleetHoldsItsDocuments(t *testing.T) {
	const n = 2000
	dir := t.TempDir()
	writeMany(t, dir, n)
	before := liveHeap()
	s, _ := open(t, dir, Options{NoWatch: true, Checks: registry.Checks{Content: func(*registry.Record) error { return nil }}, DeferChecks: true})
	<-s.checksDone
	if s.Snapshot().Len() != n {
		t.Fatalf("serving %d of %d", s.Snapshot().Len(), n)
	}
	if per := (liveHeap() - before) / n; per > 1800 {
		t.Errorf("%d bytes of heap an idle instance", per)
	}
	r, ok := s.Snapshot().ByAddr(netip.AddrFrom4([4]byte{10, 0, 0, 7}))
	if !ok || r.Name != "vm-000007" || string(r.Instance().Spec.Files[0].Data()) != "welcome to vm-000007\n" {
		t.Errorf("10.0.0.7: %v", r)
	}
	runtime.KeepAlive(s)
}

// TestDeferredDecodeReportsBadSpecs: with the documents decoded in the
// deferred checks, a file Parse refuses is still logged with every
// problem, each with its field and line, and never served; a file it kept
// out of an address (a bad file claims its addresses until its check
// fails) gets the address once it is out.
func TestDeferredDecodeReportsBadSpecs(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", string(inlineDoc("a", "10.0.0.1", "good")))
	bad := strings.Replace(string(inlineDoc("b", "10.0.0.2", "good")), "  hostname: good\n", "  hostname: good\n  hostnme: x\n  users:\n    - sudo: x\n", 1)
	write(t, dir, "b.yaml", bad)
	write(t, dir, "c.yaml", string(inlineDoc("c", "10.0.0.2", "good"))) // blocked by b until b is out
	release := make(chan struct{})
	hook := func() { <-release }
	deferHook.Store(&hook)
	defer deferHook.Store(nil)
	s, logs := open(t, dir, Options{NoWatch: true, Checks: registry.Checks{Content: func(*registry.Record) error { return nil }}, DeferChecks: true})
	close(release)
	<-s.checksDone
	if got := s.Snapshot().Names(); !slices.Equal(got, []string{"a", "c"}) || owner(s, "10.0.0.2") != "c" {
		t.Errorf("after the checks: %v, 10.0.0.2=%q", got, owner(s, "10.0.0.2"))
	}
	l := logs.String()
	for _, want := range []string{`file=b.yaml problem1="7: spec.hostnme: `, `problem2="9: spec.users[0].name: `, `serving="nothing from this file"`} {
		if !strings.Contains(l, want) {
			t.Errorf("no %q in the log:\n%s", want, l)
		}
	}
}

// BenchmarkHeapPerInstance is what vminit serve holds for each instance of
// an idle fleet: Open on 10,000 spec files with the server's checks
// deferred (as serve opens its directory), the background pass done, the
// heap after a collection less the heap before, per instance
// (heap-B/instance; docs/benchmarks.md, "Beside the peers"). Run with
// -benchtime 1x.
func BenchmarkHeapPerInstance(b *testing.B) {
	const n = 10_000
	dir := b.TempDir()
	writeMany(b, dir, n)
	syscall.Sync()
	checks := mdserver.StoreChecks(mdserver.Options{})
	var perInstance float64
	for b.Loop() {
		before := liveHeap()
		s, err := Open(dir, Options{NoWatch: true, Logger: slog.New(slog.DiscardHandler), Checks: checks, DeferChecks: true})
		if err != nil {
			b.Fatal(err)
		}
		<-s.checksDone
		if s.Snapshot().Len() != n {
			b.Fatalf("serving %d", s.Snapshot().Len())
		}
		perInstance = float64(liveHeap()-before) / n
		runtime.KeepAlive(s)
		s.Close()
	}
	b.ReportMetric(perInstance, "heap-B/instance")
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestChecksDone: ChecksDone is closed once the background pass has
// ended, and at once for a store that deferred nothing.
func TestChecksDone(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", string(inlineDoc("a", "10.0.0.1", "good")))
	checks := registry.Checks{Content: func(*registry.Record) error { return nil }}
	release := make(chan struct{})
	hook := func() { <-release }
	deferHook.Store(&hook)
	defer deferHook.Store(nil)
	s, _ := open(t, dir, Options{NoWatch: true, Checks: checks, DeferChecks: true})
	select {
	case <-s.ChecksDone():
		t.Fatal("done before the pass ran")
	default:
	}
	close(release)
	<-s.ChecksDone()
	if n := s.Snapshot().Len(); n != 1 {
		t.Errorf("serving %d", n)
	}
	deferHook.Store(nil)
	s, _ = open(t, dir, Options{NoWatch: true, Checks: checks})
	<-s.ChecksDone()
}
