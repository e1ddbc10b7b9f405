package firstboot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMergeKeepsStages: a status read back from a store that keeps no
// stages (kubestore's status.firstBoot) moves the boot on without
// dropping the stages this replica saw.
func TestMergeKeepsStages(t *testing.T) {
	c := newClock()
	tr := New(Options{Now: c.now})
	tr.Fetch("web", "u1", "cloud-init", "nocloud", "/meta-data")
	must(t, tr.Record("web", "u1", "cloud-init", start("modules-config")))
	c.advance(1)
	other := Status{Name: "web", UID: "u1", Agent: "cloud-init", State: Done, Stage: "modules-final", LastEvent: c.now(), Finished: c.now()}
	if !tr.Merge(other) {
		t.Fatal("a done status of the same incarnation was not merged")
	}
	st := tr.Status("web", "u1", "")
	if st.State != Done || len(st.Stages) != 1 || st.Stages[0].Name != "modules-config" {
		t.Errorf("merged: %s, stages %+v", st.State, st.Stages)
	}
}

// TestMergeStatusUnion: two replicas that each heard part of one boot
// (a guest posting its events to one, then the other) merge into the
// union, whichever way round: every event once, a start and the finish
// that closed it as one entry, each stage as far as either saw it, each
// failure once, and the state of the one further on.
func TestMergeStatusUnion(t *testing.T) {
	c := newClock()
	a, b := New(Options{Now: c.now}), New(Options{Now: c.now})
	a.Fetch("vm", "u", AgentCloudInit, "nocloud", "/meta-data")
	must(t, a.Record("vm", "u", AgentCloudInit, start("init-network")))
	c.advance(time.Second)
	must(t, a.Record("vm", "u", AgentCloudInit, start("init-network/config-a")))
	b.Merge(a.Status("vm", "u", "")) // b reads a's write
	c.advance(time.Second)
	// b hears the module's end (one entry with a's start), a the next one.
	must(t, b.Record("vm", "u", AgentCloudInit, finish("init-network/config-a", ResultFail)))
	must(t, a.Record("vm", "u", AgentCloudInit, start("init-network/config-b")))
	c.advance(time.Second)
	must(t, b.Record("vm", "u", AgentCloudInit, finish("init-network", ResultSuccess)))
	must(t, a.Record("vm", "u", AgentCloudInit, start("modules-config")))

	sa, sb := a.Status("vm", "u", ""), b.Status("vm", "u", "")
	ab, ba := MergeStatus(sa, sb), MergeStatus(sb, sa)
	if !sameStatus(&ab, &ba) {
		t.Errorf("the union depends on the order:\n%+v\n%+v", ab, ba)
	}
	var names []string
	for _, ev := range ab.Events {
		names = append(names, ev.Kind+":"+ev.Name)
	}
	want := "fetch:/meta-data start:init-network finish:init-network/config-a start:init-network/config-b finish:init-network start:modules-config"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if ab.State != Running || ab.Stage != "modules-config" || len(ab.Errors) != 1 || ab.Errors[0].Module != "config-a" {
		t.Errorf("state %s at %s, errors %+v", ab.State, ab.Stage, ab.Errors)
	}
	if len(ab.Stages) != 2 || ab.Stages[0].Name != "init-network" || ab.Stages[0].End.IsZero() || ab.Stages[1].Name != "modules-config" {
		t.Errorf("stages %+v", ab.Stages)
	}
	// Merged into each tracker, both hold the union; merging again
	// changes nothing.
	if !a.Merge(sb) || !b.Merge(sa) {
		t.Error("a merge that added events reported no change")
	}
	ga, gb := a.Status("vm", "u", ""), b.Status("vm", "u", "")
	if !sameStatus(&ga, &gb) || len(ga.Events) != 6 {
		t.Errorf("after the merges:\n%+v\n%+v", ga, gb)
	}
	if a.Merge(sb) {
		t.Error("merging what a holds already changed it")
	}
	// A done boot and a failed report of it: failed, whichever is read.
	done, failed := ga, ga
	done.State, done.Finished = Done, c.now()
	failed.State, failed.Finished = Failed, c.now().Add(time.Second)
	if got := MergeStatus(failed, done); got.State != Failed || !got.Finished.Equal(c.now()) {
		t.Errorf("done and failed: %s at %v", got.State, got.Finished)
	}
}

// TestMergeEventsBounded: the union keeps the last MaxEvents of both.
func TestMergeEventsBounded(t *testing.T) {
	c := newClock()
	a, b := New(Options{Now: c.now}), New(Options{Now: c.now})
	for i := range MaxEvents {
		tr := a
		if i%2 == 1 {
			tr = b
		}
		must(t, tr.Record("vm", "u", AgentCloudInit, start(fmt.Sprintf("init-network/m%02d", i))))
		c.advance(time.Millisecond)
	}
	must(t, a.Record("vm", "u", AgentCloudInit, start("init-network/last")))
	got := MergeStatus(a.Status("vm", "u", ""), b.Status("vm", "u", ""))
	if len(got.Events) != MaxEvents || got.Events[0].Name != "init-network/m01" || got.Events[MaxEvents-1].Name != "init-network/last" {
		t.Errorf("%d events, %s … %s", len(got.Events), got.Events[0].Name, got.Events[len(got.Events)-1].Name)
	}
}

// TestPersistPaces: an instance's status is written at its first fetch
// and each change of state at the next interval; the events between
// coalesce into one write per pace; nothing is lost to the pacing.
func TestPersistPaces(t *testing.T) {
	tr := New(Options{})
	tr.persisting.Store(true)
	var writes []string
	sink := sinkFunc(func(_ context.Context, sts []Status) error {
		for _, st := range sts {
			writes = append(writes, fmt.Sprintf("%s:%d", st.State, len(st.Events)))
		}
		return nil
	})
	p := &pacer{pace: 5 * time.Second, last: map[string]time.Time{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) {
		t.Helper()
		must(t, tr.persistDue(context.Background(), sink, p, t0.Add(time.Duration(s)*time.Second)))
	}
	tr.Fetch("vm", "u", AgentCloudInit, "nocloud", "/meta-data")
	at(0) // the first fetch: at once
	must(t, tr.Record("vm", "u", AgentCloudInit, start("init-network")))
	at(1) // running: at once
	for i := range 10 {
		must(t, tr.Record("vm", "u", AgentCloudInit, start(fmt.Sprintf("init-network/m%d", i))))
		at(2 + i%3) // within the pace: held
	}
	if n, _ := tr.Unwritten(); n != 10 {
		t.Errorf("unwritten: %d changes, want 10", n)
	}
	at(6) // the pace passed: the ten in one write
	must(t, tr.Record("vm", "u", AgentCloudInit, finish("modules-final", ResultSuccess)))
	at(7) // done: at once
	at(8)
	want := "fetched:1 running:2 running:12 done:13"
	if got := strings.Join(writes, " "); got != want {
		t.Errorf("writes %s, want %s", got, want)
	}
	if n, i := tr.Unwritten(); n != 0 || i != 0 {
		t.Errorf("unwritten after the writes: %d changes of %d instances", n, i)
	}
}

// TestMergeKeepsTheLongerMessage: a replica that reads back a failure a
// store keeps clipped (kubestore's status.firstBoot) keeps the whole
// message it heard itself, whichever copy comes first.
func TestMergeKeepsTheLongerMessage(t *testing.T) {
	whole := Failure{Stage: "modules-final", Module: "config-scripts-user", Message: strings.Repeat("why ", 400)}
	clipped := whole
	clipped.Message = clip(whole.Message, 256)
	for _, order := range [][2]Failure{{whole, clipped}, {clipped, whole}} {
		a := Status{Name: "vm", UID: "u", State: Failed, Errors: []Failure{order[0]}}
		b := Status{Name: "vm", UID: "u", State: Failed, Errors: []Failure{order[1]}}
		if m := MergeStatus(a, b); len(m.Errors) != 1 || m.Errors[0].Message != whole.Message {
			t.Errorf("merged %d then %d bytes: %d errors, the message %d bytes", len(order[0].Message), len(order[1].Message), len(m.Errors), len(m.Errors[0].Message))
		}
	}
	tr := New(Options{})
	tr.Report("vm", "u", AgentCloudInit, Report{Failed: true, Errors: []Failure{whole}})
	tr.Merge(Status{Name: "vm", UID: "u", State: Failed, Agent: AgentCloudInit, Errors: []Failure{clipped}})
	if st := tr.Status("vm", "u", AgentCloudInit); st.Errors[0].Message != whole.Message {
		t.Errorf("Tracker.Merge of a clipped copy: the message is %d bytes, want %d", len(st.Errors[0].Message), len(whole.Message))
	}
}
