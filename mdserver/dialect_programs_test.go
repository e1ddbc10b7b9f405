package mdserver_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// TestToyDialectInEveryProgram: the toy dialect, declared in
// dialect_test.go alone, is in the registry and in what the admin API
// previews, with no other edit. The programs read the registry too:
// vminit run's dialects and the help of serve, run and instances preview
// list every registered dialect (TestHelpListsEveryDialect and
// TestDialectsFromRegistry under cmd/internal, which cannot be linked
// into this package's tests), so the toy would be there as well.
func TestToyDialectInEveryProgram(t *testing.T) {
	inst, _, err := spec.Decode([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: vm-a\nspec:\n  fqdn: vm-a.example.com\n"))
	if err != nil {
		t.Fatal(err)
	}
	inst.Default()
	rec, err := registry.NewRecord(inst, "1")
	if err != nil {
		t.Fatal(err)
	}
	store, err := registry.NewStaticStore([]*registry.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(mdserver.Dialects(), func(d mdserver.DialectInfo) bool { return d.Name == "toy" }) {
		t.Errorf("mdserver.Dialects() lacks toy")
	}
	h := mdserver.NewHandler(store, mdserver.Options{Logger: slog.New(slog.DiscardHandler)})
	if !slices.Contains(admin.PreviewDialects, "toy") {
		t.Errorf("admin.PreviewDialects %v lack toy", admin.PreviewDialects)
	}
	p, err := admin.NewLocal(store, admin.Options{Metadata: h}).Preview(context.Background(), "vm-a", "toy")
	if err != nil || len(p.Files) != 1 || p.Files[0].Path != "/toy/hello" || p.Files[0].Content != "hello vm-a (vm-a.example.com)\n" || len(p.Warnings) != 0 {
		t.Errorf("admin preview of toy: %+v %v", p, err)
	}

}
