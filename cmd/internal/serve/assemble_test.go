package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/registry"
)

// TestNew: the server New assembles from a directory serves a guest its
// instance, the admin API that store, and the metrics; Run stops when
// its context ends.
func TestNew(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, 1, 0)
	srv, err := New(context.Background(), Options{
		Store:   StoreConfig{Dir: dir},
		Handler: mdserver.Options{AllowLoopbackInstances: true},
		Listen:  []string{"127.0.0.1:0"}, MetricsListen: "127.0.0.1:0",
		AdminListen: "127.0.0.1:0", AdminToken: func() string { return "0123456789abcdef" },
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
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, nil, 0) }()

	resp, err := client(1, false).Get(addr["metadata"] + "/latest/meta-data/hostname")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "vm-1-g0" {
		t.Errorf("guest: %s %q", resp.Status, body)
	}
	list, err := (&admin.Client{URL: addr["admin"], Token: "0123456789abcdef"}).List(context.Background())
	if err != nil || len(list) != 1 || list[0].Name != "vm-1" {
		t.Errorf("admin list: %+v %v", list, err)
	}
	resp, err = http.Get(addr["metrics"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "vminit_") {
		t.Errorf("metrics: %s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestNewErrors: a store that does not open is a *StoreError (the CLI
// adds its etcd hints to those only); a listener that cannot listen is
// not; no store is an error.
func TestNewErrors(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	_, err := New(context.Background(), Options{Store: StoreConfig{Dir: filepath.Join(t.TempDir(), "none")}, Listen: []string{"127.0.0.1:0"}, Logger: quiet})
	if se := (*StoreError)(nil); !errors.As(err, &se) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing directory: %v", err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	writeSpec(t, dir, 1, 0)
	_, err = New(context.Background(), Options{Store: StoreConfig{Dir: dir}, Listen: []string{"127.0.0.1:0", taken.Addr().String()}, Logger: quiet})
	if se := (*StoreError)(nil); err == nil || errors.As(err, &se) {
		t.Errorf("an address in use: %v", err)
	}
	if _, err := OpenStore(context.Background(), StoreConfig{}, mdserver.StoreChecks(mdserver.Options{}), quiet); err == nil {
		t.Error("no store: no error")
	}
}

// TestWarnUnaddressed: the instances no address identifies are named
// (at most maxUnaddressedNames, then how many more), with the way to
// give one that fits the store: a spec's addresses, or in Kubernetes a
// VM that names the Instance.
func TestWarnUnaddressed(t *testing.T) {
	var recs []*registry.Record
	for i := range maxUnaddressedNames + 2 {
		recs = append(recs, &registry.Record{Name: fmt.Sprintf("vm-%02d", i), Revision: "1"})
	}
	recs = append(recs, &registry.Record{Name: "served", Revision: "1", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.7")}})
	store, err := registry.NewStaticStore(recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, kube := range []bool{false, true} {
		var buf bytes.Buffer
		warnUnaddressed(store.Snapshot().Unaddressed(), kube, slog.New(slog.NewTextHandler(&buf, nil)))
		want := `count=12 instances="vm-00, vm-01, vm-02, vm-03, vm-04, vm-05, vm-06, vm-07, vm-08, vm-09, and 2 more"`
		hint := "spec.metadataServer.addresses"
		if kube {
			hint = "vminit.dev/instance: NAME"
		}
		if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, want) || !strings.Contains(out, hint) {
			t.Errorf("kubernetes %v:\n%s", kube, out)
		}
	}
}

// TestWarnUnaddressedOnChange: a directory store's change that serves an
// instance no address identifies warns as serve's start does, once per
// change of it: not again at a reload (SIGHUP re-reads every file) nor
// at another file's change, again when its own file changes.
func TestWarnUnaddressedOnChange(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, 1, 0)
	var logs testtools.SyncBuffer
	srv, err := New(context.Background(), Options{Store: StoreConfig{Dir: dir}, Listen: []string{"127.0.0.1:0"},
		Handler: mdserver.Options{AllowLoopbackInstances: true},
		Logger:  slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, l := range srv.Listeners {
		l.Listener.Close()
	}
	const warning = "no address identifies them"
	warnings := func() int { return strings.Count(logs.String(), warning) }
	if n := warnings(); n != 0 {
		t.Fatalf("an addressed instance warned at start:\n%s", logs.String())
	}
	lonely := func(hostname string) {
		t.Helper()
		tmp := filepath.Join(dir, ".lonely.tmp")
		if err := os.WriteFile(tmp, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: lonely}\nspec: {hostname: "+hostname+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "lonely.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	served := func(name, hostname string) func() bool {
		return func() bool {
			r, ok := srv.Store.Snapshot().ByName(name)
			return ok && r.Instance().Spec.Hostname == hostname
		}
	}

	lonely("a")
	until(t, "lonely served", served("lonely", "a"))
	until(t, "the warning", func() bool { return warnings() == 1 })
	if out := logs.String(); !strings.Contains(out, `instances=lonely`) || !strings.Contains(out, "spec.metadataServer.addresses") {
		t.Errorf("warning:\n%s", out)
	}

	// Unchanged: a reload and another file's change say nothing more.
	if err := srv.Store.(registry.Reloader).Reload(); err != nil {
		t.Fatal(err)
	}
	writeSpec(t, dir, 1, 1)
	until(t, "vm-1 changed", served("vm-1", "vm-1-g1"))
	if n := warnings(); n != 1 {
		t.Errorf("%d warnings after a reload and another file's change, want 1:\n%s", n, logs.String())
	}

	// Its own change warns again.
	lonely("b")
	until(t, "lonely changed", served("lonely", "b"))
	until(t, "the second warning", func() bool { return warnings() == 2 })
}

// until polls cond every 10 ms, for at most 30 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}
