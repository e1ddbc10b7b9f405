package firstboot

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)} }
func finish(name, result string) Event   { return Event{Kind: KindFinish, Name: name, Result: result} }
func start(name string) Event            { return Event{Kind: KindStart, Name: name} }

func TestCloudInitBoot(t *testing.T) {
	c := newClock()
	var finished []Status
	tr := New(Options{Now: c.now, OnFinish: func(s Status) { finished = append(finished, s) }})
	if st := tr.Status("vm", "u1", "cloud-init"); st.State != Pending || st.Agent != "cloud-init" {
		t.Fatalf("unseen: %+v", st)
	}
	for range 30 {
		tr.Fetch("vm", "u1", "cloud-init", "nocloud", "/nocloud/meta-data")
	}
	st := tr.Status("vm", "u1", "cloud-init")
	if st.State != Fetched || len(st.Events) != 1 || st.Events[0].Count != 30 {
		t.Fatalf("fetched: %+v", st)
	}
	c.advance(time.Second)
	must(t, tr.Record("vm", "u1", "cloud-init", start("init-network/config-users-groups")))
	must(t, tr.Record("vm", "u1", "cloud-init", finish("init-network/config-users-groups", ResultSuccess)))
	must(t, tr.Record("vm", "u1", "cloud-init", finish("init-network", ResultSuccess)))
	c.advance(time.Second)
	must(t, tr.Record("vm", "u1", "cloud-init", start("modules-final")))
	must(t, tr.Record("vm", "u1", "cloud-init", start("modules-final/config-scripts-user")))
	if st := tr.Brief("vm", "u1", "cloud-init"); st.State != Running || st.Stage != "modules-final" || st.Module != "config-scripts-user" {
		t.Fatalf("running: %+v", st)
	}
	c.advance(20 * time.Minute)
	if st := tr.Brief("vm", "u1", "cloud-init"); st.State != Stalled {
		t.Fatalf("silent for 20 minutes: %s", st.State)
	}
	ev := finish("modules-final/config-scripts-user", ResultFail)
	ev.Message = "running config-scripts-user failed"
	must(t, tr.Record("vm", "u1", "cloud-init", ev))
	must(t, tr.Record("vm", "u1", "cloud-init", finish("modules-final", ResultFail)))
	st = tr.Status("vm", "u1", "cloud-init")
	if st.State != Failed || st.FirstError() != "modules-final/config-scripts-user: running config-scripts-user failed" {
		t.Fatalf("failed: %+v", st)
	}
	if len(st.Errors) != 1 {
		t.Errorf("the stage's failure was counted apart from its module's: %+v", st.Errors)
	}
	if len(st.Stages) != 2 || st.Stages[1].Duration() != 20*time.Minute {
		t.Errorf("stages: %+v", st.Stages)
	}
	if len(finished) != 1 || finished[0].Elapsed(c.t) != 20*time.Minute+2*time.Second {
		t.Errorf("OnFinish: %+v", finished)
	}
	// A second boot's events change nothing but the log.
	must(t, tr.Record("vm", "u1", "cloud-init", finish("modules-final", ResultSuccess)))
	if st := tr.Brief("vm", "u1", "cloud-init"); st.State != Failed || len(finished) != 1 {
		t.Errorf("after the end: %s, OnFinish %d times", st.State, len(finished))
	}
	// A re-created instance starts fresh.
	if st := tr.Status("vm", "u2", "cloud-init"); st.State != Pending {
		t.Errorf("new incarnation: %s", st.State)
	}
	tr.Fetch("vm", "u2", "cloud-init", "ec2", "/latest/meta-data/")
	if st := tr.Status("vm", "u2", "cloud-init"); st.State != Fetched || len(st.Errors) != 0 {
		t.Errorf("new incarnation fetched: %+v", st)
	}
}

func TestIgnitionReport(t *testing.T) {
	c := newClock()
	tr := New(Options{Now: c.now})
	tr.Fetch("fc", "u", "ignition", "ignition", "/ignition/config")
	c.advance(time.Minute)
	tr.Report("fc", "u", "ignition", Report{Failed: true, Message: "degraded: 1 failed unit", Errors: []Failure{{Unit: "app.service", Message: "exit 1"}}})
	st := tr.Status("fc", "u", "ignition")
	if st.State != Failed || st.FirstError() != "app.service: exit 1" || len(st.Stages) != 1 || st.Stages[0].Duration() != time.Minute {
		t.Fatalf("%+v", st)
	}
}

// TestCloudInitReportTurnsDoneFailed: a cloud-init boot its events
// finished without errors is failed once its report names a failed unit,
// and the one line the views show is the unit's; a replica that heard
// only the events takes the failure from the one that heard the report.
func TestCloudInitReportTurnsDoneFailed(t *testing.T) {
	c := newClock()
	events, report := New(Options{Now: c.now}), New(Options{Now: c.now})
	for _, tr := range []*Tracker{events, report} {
		tr.Fetch("vm", "u", AgentCloudInit, "nocloud", "/meta-data")
		must(t, tr.Record("vm", "u", AgentCloudInit, start("modules-final")))
		must(t, tr.Record("vm", "u", AgentCloudInit, finish("modules-final", ResultSuccess)))
	}
	if st := report.Status("vm", "u", ""); st.State != Done {
		t.Fatalf("after cloud-init's events: %s", st.State)
	}
	c.advance(time.Second)
	r, err := GuestReport{Agent: AgentCloudInit, Result: json.RawMessage(`{"v1": {"errors": []}}`), SystemState: "degraded",
		FailedUnits: []UnitReport{{Unit: "srv-data.mount", Log: mountJournal}}}.Report()
	if err != nil {
		t.Fatal(err)
	}
	report.Report("vm", "u", AgentCloudInit, r)
	const want = "srv-data.mount: mount: /srv/data: wrong fs type, bad option, bad superblock on tmpfs, missing codepage or helper program, or other error."
	st := report.Status("vm", "u", "")
	if st.State != Failed || st.FirstError() != want || st.Where() != "srv-data.mount" {
		t.Fatalf("after the report: %s at %q, %q", st.State, st.Where(), st.FirstError())
	}
	if b := report.Brief("vm", "u", ""); b.FirstError() != want {
		t.Errorf("the row's first error %q", b.FirstError())
	}
	events.Merge(st)
	if m := events.Status("vm", "u", ""); m.State != Failed || m.FirstError() != want {
		t.Errorf("the events' replica after merging: %s %q", m.State, m.FirstError())
	}
}

func TestRecordRefuses(t *testing.T) {
	tr := New(Options{})
	for _, ev := range []Event{
		{Kind: "progress", Name: "init-network"},
		{Kind: KindStart, Name: ""},
		{Kind: KindStart, Name: "x", Result: ResultSuccess},
		{Kind: KindFinish, Name: "x", Result: "MAYBE"},
	} {
		if err := tr.Record("vm", "u", "cloud-init", ev); err == nil {
			t.Errorf("%+v accepted", ev)
		}
	}
	if tr.Len() != 0 {
		t.Errorf("a refused event made a boot")
	}
}

func TestBounded(t *testing.T) {
	tr := New(Options{})
	long := strings.Repeat("é", MaxMessage)
	for i := range 1000 {
		ev := finish("s"+strings.Repeat("x", i%300)+"/m", ResultFail)
		ev.Message = long
		must(t, tr.Record("vm", "u", "cloud-init", ev))
	}
	st := tr.Status("vm", "u", "cloud-init")
	if len(st.Events) != MaxEvents || len(st.Errors) != MaxFailures || len(st.Stages) != MaxStages {
		t.Fatalf("events %d, failures %d, stages %d", len(st.Events), len(st.Errors), len(st.Stages))
	}
	for _, e := range st.Events {
		if len(e.Message) > MaxMessage || len(e.Name) > MaxName {
			t.Fatalf("event of %d/%d bytes", len(e.Name), len(e.Message))
		}
	}
}

type sink struct {
	mu  sync.Mutex
	got map[string]Status
	n   chan struct{}
}

func (s *sink) WriteBoot(_ context.Context, sts []Status) error {
	s.mu.Lock()
	for _, st := range sts {
		s.got[st.Name] = st
	}
	s.mu.Unlock()
	s.n <- struct{}{}
	return nil
}

func TestPersistAndMerge(t *testing.T) {
	a, b := New(Options{}), New(Options{})
	s := &sink{got: map[string]Status{}, n: make(chan struct{}, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Persist(ctx, s, time.Millisecond, nil); close(done) }()
	defer func() { cancel(); <-done }()
	for !a.persisting.Load() {
		time.Sleep(time.Millisecond)
	}
	changes := b.Changes()
	a.Fetch("vm", "u", "ignition", "ignition", "/ignition/config")
	a.Report("vm", "u", "ignition", Report{})
	for {
		<-s.n
		s.mu.Lock()
		st, ok := s.got["vm"]
		s.mu.Unlock()
		if ok && st.State == Done {
			if !b.Merge(st) {
				t.Fatal("b did not take a's status")
			}
			break
		}
	}
	<-changes
	if st := b.Status("vm", "u", "ignition"); st.State != Done || len(st.Events) != 2 {
		t.Fatalf("b: %+v", st)
	}
	old := a.Status("vm", "u", "ignition")
	old.State, old.Events = Fetched, nil
	if b.Merge(old) {
		t.Error("an older status replaced a newer one")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCounts: the boots tracked, by state as read now, of the
// incarnations served only.
func TestCounts(t *testing.T) {
	c := newClock()
	tr := New(Options{Now: c.now, StallAfter: time.Minute})
	tr.Fetch("a", "u1", "cloud-init", "nocloud", "/nocloud/meta-data")
	tr.Fetch("b", "u1", "cloud-init", "nocloud", "/nocloud/meta-data")
	tr.Fetch("gone", "u1", "cloud-init", "nocloud", "/nocloud/meta-data")
	tr.Fetch("old", "u1", "ignition", "ignition", "/ignition/config")
	c.advance(2 * time.Minute) // a, b, gone and old stall
	must(t, tr.Record("b", "u1", "cloud-init", finish("modules-final", ResultSuccess)))
	tr.Fetch("c", "u1", "ignition", "ignition", "/ignition/config")
	tr.Report("c", "u1", "ignition", Report{Failed: true})
	served := map[string]string{"a": "u1", "b": "u1", "c": "u1", "old": "u2"}
	got := tr.Counts(func(name, uid string) bool { return served[name] == uid })
	want := map[State]int{Pending: 0, Fetched: 0, Running: 0, Stalled: 1, Done: 1, Failed: 1}
	for _, st := range States {
		if got[st] != want[st] {
			t.Errorf("%s: %d, want %d (all %v)", st, got[st], want[st], got)
		}
	}
}

// TestUnreportedNeverStalls: a boot whose agent sends no report
// (Options.Reports says so of cloudbase-init) is heard of only by its
// fetches: it stays pending, then fetched, however long it is silent;
// it is marked NoReport in every read (Status, Brief, a summary's row,
// Counts), and its Where says why. A reporting agent's boot beside it
// still stalls.
func TestUnreportedNeverStalls(t *testing.T) {
	c := newClock()
	tr := New(Options{Now: c.now, StallAfter: time.Minute, Reports: func(agent string) bool { return agent != "cloudbase-init" }})
	if st := tr.Brief("win", "u1", "cloudbase-init"); st.State != Pending || !st.NoReport || st.Where() != "cloudbase-init sends no first-boot report" {
		t.Fatalf("unseen: %+v, where %q", st, st.Where())
	}
	tr.Fetch("win", "u1", "cloudbase-init", "openstack", "/openstack/latest/meta_data.json")
	tr.Fetch("linux", "u1", "cloud-init", "nocloud", "/nocloud/meta-data")
	c.advance(time.Hour)
	for _, st := range []Status{tr.Status("win", "u1", "cloudbase-init"), tr.Brief("win", "u1", "cloudbase-init")} {
		if st.State != Fetched || !st.NoReport || st.Unreported() != "cloudbase-init sends no first-boot report" {
			t.Errorf("silent for an hour: %+v", st)
		}
	}
	if st := tr.Brief("linux", "u1", "cloud-init"); st.State != Stalled || st.NoReport || st.Unreported() != "" {
		t.Errorf("cloud-init, silent for an hour: %+v", st)
	}
	got := tr.Counts(func(string, string) bool { return true })
	if got[Fetched] != 1 || got[Stalled] != 1 {
		t.Errorf("counts: %v, want the cloudbase-init boot fetched and the cloud-init one stalled", got)
	}
	sum := Summarize([]Status{tr.Brief("win", "u1", "cloudbase-init")}, Filter{Agent: "cloudbase-init"}, c.t)
	if len(sum.Instances) != 1 || sum.Counts[Fetched] != 1 || !sum.Instances[0].NoReport {
		t.Errorf("summary: %+v", sum)
	}
}
