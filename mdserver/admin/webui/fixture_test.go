package webui_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/admin/webui"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// The fleets the tests show: real records in a real store, served by a
// real guests' handler whose tracker the tests feed as the guests' posts
// would, on a clock of their own.

const token = "ui-test-token-0123456789abcdef"

// epoch is the fixtures' first instant: a fixed time, so that elapsed
// times and the screenshot are the same on every run.
var epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// stallAfter is the fixtures' firstboot.Options.StallAfter.
const stallAfter = 2 * time.Hour

type fleet struct {
	clock *testtools.Clock
	boots *firstboot.Tracker
	store *registry.StaticStore
	md    *mdserver.Handler
}

// instance is a record to serve: its name and spec.agent, and optionally
// its spec.metadataServer.addresses and spec.fqdn.
type instance struct {
	name, agent string
	addrs       []string
	fqdn        string
}

func newFleet(t testing.TB, instances []instance) *fleet {
	t.Helper()
	f := &fleet{clock: testtools.NewClock(epoch)}
	// A fleet of hundreds takes the clock an hour on: longer than
	// firstboot's default StallAfter.
	f.boots = mdserver.NewTracker(firstboot.Options{Now: f.clock.Now, StallAfter: stallAfter})
	var recs []*registry.Record
	for _, in := range instances {
		inst := &spec.Instance{Metadata: spec.Metadata{Name: in.name}, Spec: spec.Spec{Agent: in.agent, FQDN: in.fqdn}}
		if in.addrs != nil {
			inst.Spec.MetadataServer = &spec.MetadataServer{Addresses: in.addrs}
		}
		inst.Default()
		rec, err := registry.NewRecord(inst, "rev-1")
		if err != nil {
			t.Fatal(err)
		}
		rec.UID = "uid-" + in.name
		recs = append(recs, rec)
	}
	store, err := registry.NewStaticStore(recs)
	if err != nil {
		t.Fatal(err)
	}
	f.store = store
	f.md = mdserver.NewHandler(store, mdserver.Options{Boots: f.boots, Now: f.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	return f
}

// ui is the UI over the fleet, on its clock, taking the test token.
func (f *fleet) ui(opts webui.Options) *webui.UI {
	opts.Token, opts.Now = func() string { return token }, f.clock.Now
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Refresh == 0 {
		// No re-render while a browser test clicks: only the tracker's
		// changes a test makes.
		opts.Refresh = time.Hour
	}
	if opts.Bearer == nil {
		opts.Bearer = func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }
	}
	return webui.New(f.md, opts)
}

func uid(name string) string { return "uid-" + name }

// fetch is a cloud-init crawl of n NoCloud requests.
func (f *fleet) fetch(name, agent string, n int) {
	for range n {
		f.boots.Fetch(name, uid(name), agent, "nocloud", "/nocloud/user-data")
	}
}

func (f *fleet) event(t testing.TB, name, kind, what, result, msg string) {
	t.Helper()
	ev := firstboot.Event{Kind: kind, Name: what, Result: result, Message: msg}
	if err := f.boots.Record(name, uid(name), "cloud-init", ev); err != nil {
		t.Fatal(err)
	}
}

// cloudInit plays a cloud-init boot through its stages, a few seconds
// each; failModule, if set, fails in modules-final with msg; upTo stops
// after that stage started ("" plays them all).
func (f *fleet) cloudInit(t testing.TB, name, upTo, failModule, msg string) {
	t.Helper()
	f.fetch(name, "cloud-init", 6)
	for _, sg := range []struct {
		stage   string
		modules []string
	}{
		{"init-network", []string{"config-ssh", "config-users-groups"}},
		{"modules-config", []string{"config-apt-configure", "config-locale"}},
		{"modules-final", []string{"config-scripts-user", "config-final-message"}},
	} {
		f.clock.Advance(2 * time.Second)
		f.event(t, name, firstboot.KindStart, sg.stage, "", "")
		if sg.stage == upTo {
			f.event(t, name, firstboot.KindStart, sg.stage+"/"+sg.modules[0], "", "")
			return
		}
		result := firstboot.ResultSuccess
		for _, m := range sg.modules {
			f.clock.Advance(500 * time.Millisecond)
			f.event(t, name, firstboot.KindStart, sg.stage+"/"+m, "", "")
			f.clock.Advance(time.Second)
			if m == failModule {
				f.event(t, name, firstboot.KindFinish, sg.stage+"/"+m, firstboot.ResultFail, msg)
				result = firstboot.ResultFail
				continue
			}
			f.event(t, name, firstboot.KindFinish, sg.stage+"/"+m, firstboot.ResultSuccess, "")
		}
		f.event(t, name, firstboot.KindFinish, sg.stage, result, "")
	}
}

// numbered is n cloud-init instances vm-0001… .
func numbered(n int) []instance {
	out := make([]instance, n)
	for i := range out {
		out[i] = instance{name: fmt.Sprintf("vm-%04d", i+1), agent: "cloud-init"}
	}
	return out
}

// bigFleet is n instances, a fifth of them in each of pending, fetched,
// running, done and failed (by the number's remainder of 5).
func bigFleet(t testing.TB, n int) *fleet {
	f := newFleet(t, numbered(n))
	for i, in := range numbered(n) {
		switch i % 5 {
		case 1:
			f.fetch(in.name, in.agent, 3)
		case 2:
			f.cloudInit(t, in.name, "modules-config", "", "")
		case 3:
			f.cloudInit(t, in.name, "", "", "")
		case 4:
			f.cloudInit(t, in.name, "", "config-scripts-user", "exit status 1")
		}
	}
	return f
}

// showcase is the screenshot's fleet: some done, running, failed,
// stalled and pending, of both agents.
func showcase(t testing.TB) *fleet {
	f := newFleet(t, []instance{
		{name: "cache-01", agent: "cloud-init"}, {name: "db-01", agent: "cloud-init"}, {name: "db-02", agent: "cloud-init"},
		{name: "fcos-edge-01", agent: "ignition"}, {name: "fcos-edge-02", agent: "ignition"}, {name: "fcos-edge-03", agent: "ignition"},
		{name: "web-01", agent: "cloud-init"}, {name: "web-02", agent: "cloud-init"}, {name: "web-03", agent: "cloud-init"},
		{name: "web-04", agent: "cloud-init"}, {name: "web-05", agent: "cloud-init"}, {name: "worker-01", agent: "cloud-init"},
	})
	f.fetch("cache-01", "cloud-init", 4) // then silence: stalled
	f.clock.Advance(stallAfter + 10*time.Minute)
	for _, n := range []string{"web-01", "web-02", "web-03"} {
		f.cloudInit(t, n, "", "", "")
	}
	f.cloudInit(t, "db-01", "", "config-scripts-user",
		"Failed to run module scripts-user: runcmd: /var/lib/cloud/instance/scripts/runcmd: line 3: pg_ctlcluster: command not found")
	f.boots.Fetch("fcos-edge-01", uid("fcos-edge-01"), "ignition", "ignition", "/ignition/config")
	f.clock.Advance(38 * time.Second)
	f.boots.Report("fcos-edge-01", uid("fcos-edge-01"), "ignition", firstboot.Report{Message: "running"})
	f.boots.Fetch("fcos-edge-02", uid("fcos-edge-02"), "ignition", "ignition", "/ignition/config")
	f.clock.Advance(41 * time.Second)
	f.boots.Report("fcos-edge-02", uid("fcos-edge-02"), "ignition", firstboot.Report{Failed: true, Message: "degraded: 1 failed unit",
		Errors: []firstboot.Failure{{Unit: "app-setup.service", Message: "curl: (6) Could not resolve host: registry.internal"}}})
	f.cloudInit(t, "web-04", "modules-final", "", "")
	f.cloudInit(t, "web-05", "modules-config", "", "")
	f.boots.Fetch("fcos-edge-03", uid("fcos-edge-03"), "ignition", "ignition", "/ignition/config")
	f.clock.Advance(25 * time.Second)
	return f
}
