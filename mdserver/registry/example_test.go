package registry_test

import (
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
