package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// TestLocalMatchesClient: the operations in process (Local) and through
// the handler (Client) answer the same, so that `vminit instances` means
// the same against a cluster's store as against a server; in process, an
// unknown instance is registry.ErrNotFound and an invalid document
// spec.Errors.
func TestLocalMatchesClient(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	store := newMemStore()
	local := NewLocal(store, Options{Logger: quiet})
	srv := httptest.NewServer(NewHandler(store, Options{Token: adminToken, Logger: quiet}))
	defer srv.Close()
	remote := &Client{URL: srv.URL, Token: adminToken, HTTP: srv.Client()}

	put, err := local.Put(ctx, "web", []byte(webSpec))
	if err != nil || put.Name != "web" {
		t.Fatalf("put: %+v %v", put, err)
	}
	for _, api := range []API{local, remote} {
		if again, err := api.Put(ctx, "web", []byte(webSpec)); err != nil || !reflect.DeepEqual(again, put) {
			t.Errorf("%T put again: %+v %v", api, again, err)
		}
	}
	ll, err1 := local.List(ctx)
	rl, err2 := remote.List(ctx)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(ll, rl) || len(ll) != 1 {
		t.Errorf("list: %+v %v / %+v %v", ll, err1, rl, err2)
	}
	lg, err1 := local.Get(ctx, "web")
	rg, err2 := remote.Get(ctx, "web")
	if err1 != nil || err2 != nil || string(lg) != string(rg) || !strings.Contains(string(lg), "instanceID:") {
		t.Errorf("get: %s %v / %s %v", lg, err1, rg, err2)
	}
	for _, d := range PreviewDialects {
		lp, err1 := local.Preview(ctx, "web", d)
		rp, err2 := remote.Preview(ctx, "web", d)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(lp, rp) || len(lp.Files) == 0 {
			t.Errorf("preview %s: %+v %v / %+v %v", d, lp, err1, rp, err2)
		}
	}
	if _, err := local.Preview(ctx, "web", "floppy"); err == nil || !strings.Contains(err.Error(), `dialect "floppy": want one of`) {
		t.Errorf("unknown dialect: %v", err)
	}
	if _, err := local.Get(ctx, "nope"); !errors.Is(err, registry.ErrNotFound) || err.Error() != `instance "nope" not found` {
		t.Errorf("get of an unknown instance: %v", err)
	}
	if _, err := local.Put(ctx, "other", []byte(webSpec)); spec.AsErrors(err) == nil || !strings.Contains(err.Error(), "the URL names") {
		t.Errorf("put under another name: %v", err)
	}
	if err := local.Delete(ctx, "web"); err != nil {
		t.Errorf("delete: %v", err)
	}
	if err := local.Delete(ctx, "web"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("delete again: %v", err)
	}
}
