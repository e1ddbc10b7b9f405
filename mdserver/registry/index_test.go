package registry

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vminit/vminit/spec"
)

// quick builds a record without a spec's validation (for volume).
func quick(name, revision string, addrs ...netip.Addr) *Record {
	r := &Record{Name: name, Revision: revision, Addresses: addrs}
	r.inst.Store(&spec.Instance{Metadata: spec.Metadata{Name: name}})
	return r
}

// TestIndexIncremental holds the snapshots Apply derives change by change
// to one built from scratch of what the Index serves, through random
// edits, moves, deletions and conflicts over a few names and addresses;
// and every snapshot published stays as it was published.
func TestIndexIncremental(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ix := NewIndex(IndexOptions{Logger: slog.New(slog.DiscardHandler)})
	type published struct {
		snap  *Snapshot
		names []string
		addrs map[netip.Addr]string
	}
	view := func(s *Snapshot) published {
		p := published{snap: s, names: slices.Clone(s.Names()), addrs: map[netip.Addr]string{}}
		s.byAddr.each(func(a netip.Addr, r *Record) { p.addrs[a] = r.Name })
		return p
	}
	var history []published
	for round := range 400 {
		var changes []Change
		for range rng.IntN(4) + 1 {
			key := fmt.Sprintf("k%d", rng.IntN(12))
			if rng.IntN(4) == 0 {
				changes = append(changes, Change{Key: key})
				continue
			}
			addrs := []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(16))})}
			if rng.IntN(3) == 0 {
				addrs = append(addrs, netip.AddrFrom4([4]byte{10, 0, 1, byte(rng.IntN(16))}))
			}
			changes = append(changes, Change{Key: key, Seq: int64(rng.IntN(3)),
				Record: quick(fmt.Sprintf("n%d", rng.IntN(10)), fmt.Sprint(round), addrs...)})
		}
		ix.Apply(changes)
		want, err := NewSnapshot(slices.Collect(maps.Values(ix.served)))
		if err != nil {
			t.Fatalf("round %d: what is served conflicts: %v", round, err)
		}
		got := ix.Snapshot()
		if g, w := view(got), view(want); !slices.Equal(g.names, w.names) || !maps.Equal(g.addrs, w.addrs) || got.Len() != want.Len() {
			t.Fatalf("round %d: derived snapshot\n%v %v\nfrom scratch\n%v %v", round, g.names, g.addrs, w.names, w.addrs)
		}
		for k, r := range ix.served {
			if s, _ := got.ByName(r.Name); s != r || ix.names[r.Name] != k {
				t.Fatalf("round %d: %s serves %s, the snapshot %v", round, k, r.Name, s)
			}
		}
		if len(ix.names) != got.Len() || len(ix.addrs) != got.byAddr.len {
			t.Fatalf("round %d: claims %d names %d addresses, snapshot %d %d", round, len(ix.names), len(ix.addrs), got.Len(), got.byAddr.len)
		}
		history = append(history, view(got))
		for i, h := range history {
			if now := view(h.snap); !slices.Equal(now.names, h.names) || !maps.Equal(now.addrs, h.addrs) {
				t.Fatalf("round %d: the snapshot of round %d changed after it was published", round, i)
			}
		}
	}
}

// BenchmarkIndexApply measures one change (an edit of one instance,
// whose revision changes) applied to an Index serving n instances: what a
// store pays per watched change, and what a guest waits between the
// change and its data.
func BenchmarkIndexApply(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			ix := NewIndex(IndexOptions{Logger: slog.New(slog.DiscardHandler)})
			changes := make([]Change, n)
			for i := range n {
				changes[i] = Change{Key: fmt.Sprintf("vm-%06d.yaml", i),
					Record: quick(fmt.Sprintf("vm-%06d", i), "0", netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))}
			}
			ix.Apply(changes)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				c := changes[i%n]
				ix.Apply([]Change{{Key: c.Key, Record: quick(c.Record.Name, fmt.Sprint(i), c.Record.Addresses...)}})
			}
			if ix.Snapshot().Len() != n {
				b.Fatalf("%d served", ix.Snapshot().Len())
			}
		})
	}
}

// TestDeferredChecks: a record whose content check is deferred is never
// found before it passed (the first lookup runs the check, once); one
// that fails is taken out by Unserve, logged, and what it blocked is let
// in.
func TestDeferredChecks(t *testing.T) {
	var logs strings.Builder
	var runs atomic.Int32
	ix := NewIndex(IndexOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil)), KeyAttr: "file", Invalid: "invalid", Refused: "refused",
		Checks: Checks{Content: func(r *Record) error {
			runs.Add(1)
			if r.Instance().Spec.Hostname == "bad" {
				return spec.Errors{{Field: "spec.hostname", Message: "refused by the check"}}
			}
			return nil
		}}})
	decode := func(name, addr, host string) *Record {
		r, err := ix.DecodeDeferred([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: "+name+"}\nspec:\n  hostname: "+host+"\n  metadataServer: {addresses: ["+addr+"]}\n"), "")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	bad, thief, good := decode("a", "10.0.0.1", "bad"), decode("b", "10.0.0.1", "fine"), decode("c", "10.0.0.3", "fine")
	ix.Apply([]Change{{Key: "a.yaml", Record: bad}, {Key: "b.yaml", Record: thief}, {Key: "c.yaml", Record: good}})
	if ran, _ := bad.Checked(); ran || runs.Load() != 0 {
		t.Fatal("a deferred check ran at Apply")
	}
	snap := ix.Snapshot()
	if r, ok := snap.ByAddr(netip.MustParseAddr("10.0.0.1")); ok {
		t.Errorf("a record that fails its deferred check was found: %v", r.Name)
	}
	if _, ok := snap.ByName("a"); ok || runs.Load() != 1 {
		t.Errorf("found by name, or checked again (%d runs)", runs.Load())
	}
	if r, ok := snap.ByName("c"); !ok || r != good {
		t.Error("a record that passes is not found")
	}
	if ran, err := bad.Checked(); !ran || err == nil {
		t.Errorf("Checked = %v, %v", ran, err)
	}
	if !ix.Unserve("a.yaml", bad, bad.Verify()) || ix.Unserve("a.yaml", bad, bad.Verify()) {
		t.Error("Unserve did not take the record out exactly once")
	}
	if r, ok := ix.Snapshot().ByAddr(netip.MustParseAddr("10.0.0.1")); !ok || r != thief {
		t.Errorf("the version the failed record blocked is not served: %v", r)
	}
	if l := logs.String(); !strings.Contains(l, `msg=invalid file=a.yaml problem1="spec.hostname: refused by the check" serving="nothing from this file"`) {
		t.Errorf("log:\n%s", l)
	}
	if ix.Snapshot().Len() != 2 || !slices.Equal(ix.Snapshot().Names(), []string{"b", "c"}) || !slices.Equal(snap.Names(), []string{"a", "c"}) {
		t.Errorf("%d served now, %d in the snapshot before", ix.Snapshot().Len(), snap.Len())
	}
}

// TestIndexSwap: two served records that exchange their addresses in one
// batch are both taken, although neither fits while the other holds its
// old version (a store that resolves claims itself, such as kubestore,
// hands the Index such batches); a batch that does not fit together
// changes nothing.
func TestIndexSwap(t *testing.T) {
	ix := NewIndex(IndexOptions{Logger: slog.New(slog.DiscardHandler)})
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	ix.Apply([]Change{{Key: "x", Record: quick("x", "1", a)}, {Key: "y", Record: quick("y", "1", b)}})
	ix.Apply([]Change{{Key: "x", Record: quick("x", "2", b)}, {Key: "y", Record: quick("y", "2", a)}})
	for addr, want := range map[netip.Addr]string{a: "y", b: "x"} {
		if r, ok := ix.Snapshot().ByAddr(addr); !ok || r.Name != want {
			t.Errorf("after the swap, %s → %v, want %s", addr, r, want)
		}
	}
	if _, err := ix.Pending("x"); err != nil {
		t.Errorf("x still refused: %v", err)
	}
	// z holds c and is not part of the batch: x cannot take it, so
	// neither half of this swap is taken.
	ix.Apply([]Change{{Key: "z", Record: quick("z", "1", c)}})
	ix.Apply([]Change{{Key: "x", Record: quick("x", "3", a, c)}, {Key: "y", Record: quick("y", "3", b)}})
	if r, _ := ix.Snapshot().ByAddr(a); r.Name != "y" {
		t.Errorf("a batch that does not fit moved %s to %s", a, r.Name)
	}
	if r, _ := ix.Snapshot().ByAddr(c); r.Name != "z" {
		t.Errorf("%s → %s", c, r.Name)
	}
}
