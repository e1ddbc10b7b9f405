package registry_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"

	"github.com/vminit/vminit/mdserver/registry"
)

func doc(name, addr string) []byte {
	return []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: " + name + "}\nspec:\n  metadataServer: {addresses: [" + addr + "]}\n")
}

// Records are decoded from spec documents and indexed by a Snapshot: the
// guest handler finds the instance a request comes from by its address.
func ExampleNewSnapshot() {
	a, err := registry.DecodeDocument(doc("web-1", "10.0.0.1"), "")
	if err != nil {
		panic(err)
	}
	b, err := registry.DecodeDocument(doc("web-2", "10.0.0.2"), "")
	if err != nil {
		panic(err)
	}
	snap, err := registry.NewSnapshot([]*registry.Record{a, b})
	if err != nil {
		panic(err)
	}
	rec, _ := snap.ByAddr(netip.MustParseAddr("::ffff:10.0.0.2"))
	fmt.Println(snap.Names(), rec.Name, snap.Serves(rec.Key()))
	// Output: [web-1 web-2] web-2 true
}

// A store feeds an Index what changed in its backend; the Index keeps
// records that are served in place, refuses (and logs) a newcomer that
// takes their address, and lets it in once the address is free.
func ExampleIndex() {
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
			return slog.Attr{}
		}
		return a
	}}))
	ix := registry.NewIndex(registry.IndexOptions{Logger: log, KeyAttr: "file",
		Invalid: "invalid spec file", Refused: "spec file refused"})
	decode := func(name, addr string) *registry.Record {
		r, err := registry.DecodeDocument(doc(name, addr), "")
		if err != nil {
			panic(err)
		}
		return r
	}
	ix.Apply([]registry.Change{{Key: "web-1.yaml", Record: decode("web-1", "10.0.0.1")}})
	ix.Apply([]registry.Change{{Key: "thief.yaml", Record: decode("thief", "10.0.0.1")}})
	fmt.Println(ix.Snapshot().Names())
	ix.Apply([]registry.Change{{Key: "web-1.yaml"}}) // web-1.yaml removed
	fmt.Println(ix.Snapshot().Names())
	// Output:
	// msg="spec file refused" file=thief.yaml instance=thief problem="address claimed by two instances: 10.0.0.1 is claimed by web-1.yaml (instance \"web-1\")" serving="nothing from this file"
	// [web-1]
	// [thief]
}

// A store that defers the content check (at start-up, to listen at once)
// indexes the record unchecked; the snapshot's lookups run the check
// first, once, and never return a record that fails it.
func ExampleIndex_DecodeDeferred() {
	ix := registry.NewIndex(registry.IndexOptions{Logger: slog.New(slog.DiscardHandler), KeyAttr: "file",
		Checks: registry.Checks{Content: func(r *registry.Record) error {
			if r.Name == "bad" {
				return errors.New("refused by the check")
			}
			return nil
		}}})
	var changes []registry.Change
	for _, name := range []string{"good", "bad"} {
		r, err := ix.DecodeDeferred(doc(name, "10.0.0."+fmt.Sprint(len(changes)+1)), "")
		if err != nil {
			panic(err)
		}
		changes = append(changes, registry.Change{Key: name + ".yaml", Record: r})
	}
	ix.Apply(changes)
	snap := ix.Snapshot()
	_, good := snap.ByName("good")
	_, bad := snap.ByName("bad")
	fmt.Println(snap.Len(), good, bad)
	r := changes[1].Record
	fmt.Println(r.Checked())
	ix.Unserve("bad.yaml", r, r.Verify()) // what the store's background pass does
	fmt.Println(ix.Snapshot().Names())
	// Output:
	// 2 true false
	// true refused by the check
	// [good]
}
