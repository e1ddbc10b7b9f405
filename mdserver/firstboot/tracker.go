package firstboot

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"
)

// Options configure a Tracker. The zero value is usable.
type Options struct {
	// StallAfter is how long a fetched or running boot may stay silent
	// before it reads as Stalled; default 15 minutes (a package upgrade
	// is one cloud-init module, and posts nothing while it runs).
	StallAfter time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Reports says whether a guest of agent (spec.agent) reports its
	// first boot (spec.ReportsFirstBoot, which this package does not
	// import: mdserver.NewTracker hands it in); nil: every agent does. A
	// boot whose agent does not is marked Status.NoReport and never reads
	// as Stalled: its silence says nothing.
	Reports func(agent string) bool
	// OnFinish, if set, is called once per incarnation when its boot
	// reaches done or failed (the metrics' histogram), without a lock
	// held.
	OnFinish func(Status)
}

// DefaultStallAfter is Options.StallAfter's default.
const DefaultStallAfter = 15 * time.Minute

// Tracker holds the first boots of a fleet. Its methods are safe for
// concurrent use; Fetch, on every metadata request, takes one lock of the
// instance's own.
type Tracker struct {
	opts  Options
	boots sync.Map // name → *boot

	wakeMu sync.Mutex
	wake   chan struct{} // closed on the next change; nil when nobody waits
	waited atomic.Bool   // wake is set: a change must close it

	persisting atomic.Bool
	dirtyMu    sync.Mutex
	dirty      map[string]int // changes since written (persist.go)
}

// boot is one incarnation's status, under its lock. st.State is never
// Stalled.
type boot struct {
	mu       sync.Mutex
	st       Status
	wroteAs  State // the state Persist last wrote (Stalled included)
	finished bool  // OnFinish was called
}

// New returns an empty tracker.
func New(opts Options) *Tracker {
	if opts.StallAfter <= 0 {
		opts.StallAfter = DefaultStallAfter
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Tracker{opts: opts, dirty: map[string]int{}}
}

// lock returns name's boot for incarnation uid, locked, starting a fresh
// one when there is none or it belongs to another incarnation (a
// re-created instance starts again from pending). One lock, taken once:
// Fetch runs on every metadata request.
func (t *Tracker) lock(name, uid, agent string) *boot {
	for {
		v, ok := t.boots.Load(name)
		if !ok {
			v, _ = t.boots.LoadOrStore(name, newBoot(name, uid, agent))
		}
		b := v.(*boot)
		b.mu.Lock()
		if b.st.UID == uid {
			return b
		}
		b.mu.Unlock()
		nb := newBoot(name, uid, agent)
		nb.mu.Lock()
		if t.boots.CompareAndSwap(name, b, nb) {
			return nb
		}
		nb.mu.Unlock()
	}
}

func newBoot(name, uid, agent string) *boot {
	return &boot{st: Status{Name: name, UID: uid, Agent: agent, State: Pending}}
}

// Fetch records that the server answered a request of the instance's
// guest: the first one moves a pending boot to fetched. Fetches of one
// dialect in a row are one event with a count.
func (t *Tracker) Fetch(name, uid, agent, dialect, path string) {
	now := t.opts.Now()
	b := t.lock(name, uid, agent)
	st := &b.st
	st.LastEvent = now
	if n := len(st.Events); n > 0 && st.Events[n-1].Kind == KindFetch && st.Events[n-1].Dialect == dialect {
		last := &st.Events[n-1]
		last.Count++
		last.Until = now
		b.mu.Unlock()
		return
	}
	if st.FirstFetch.IsZero() {
		st.FirstFetch = now
	}
	if st.State == Pending {
		st.State = Fetched
	}
	b.add(Event{Time: now, Kind: KindFetch, Name: intern(clip(path, MaxName)), Dialect: dialect, Count: 1})
	b.fit()
	b.mu.Unlock()
	t.changed(name)
}

// ErrEvent wraps every reason Record refuses an event.
var ErrEvent = errors.New("bad event")

// Record takes a start or finish event of the instance's agent. ev.Time
// is set to now; the name and message are cut to their limits. A finish
// with FAIL records a failure; the finish of the agent's last stage
// (cloud-init's modules-final) ends the boot. Events after the end are
// kept in the log and change nothing else.
func (t *Tracker) Record(name, uid, agent string, ev Event) error {
	if err := check(&ev); err != nil {
		return err
	}
	ev.Time = t.opts.Now()
	ev.Name, ev.Message = intern(clip(ev.Name, MaxName)), intern(clip(ev.Message, MaxMessage))
	b := t.lock(name, uid, agent)
	if n := len(b.st.Events); ev.Kind == KindFinish && n > 0 && b.st.Events[n-1].Kind == KindStart && b.st.Events[n-1].Name == ev.Name {
		// A module's start and finish are one entry of the log, from its
		// start until its end: half the memory, and the timeline's shape.
		ev.Time, ev.Until = b.st.Events[n-1].Time, ev.Time
		b.st.Events = b.st.Events[:n-1]
	}
	b.add(ev)
	b.st.LastEvent = arrival(ev)
	var fin *Status
	if !b.st.State.Terminal() {
		fin = b.progress(ev, arrival(ev))
	}
	b.fit()
	b.mu.Unlock()
	t.finish(fin)
	t.changed(name)
	return nil
}

// arrival is when ev arrived: its Until when it stands for a start and a
// finish.
func arrival(ev Event) time.Time {
	if !ev.Until.IsZero() {
		return ev.Until
	}
	return ev.Time
}

// intern returns the canonical copy of s: every guest of a fleet posts
// the same event names and messages, and a boot's log then holds
// pointers to one copy (unique.Make drops copies nobody holds).
func intern(s string) string {
	if len(s) > 256 {
		return s
	}
	return unique.Make(s).Value()
}

// check refuses what no agent posts.
func check(ev *Event) error {
	switch {
	case ev.Kind != KindStart && ev.Kind != KindFinish:
		return fmt.Errorf("%w: event_type %q: want %q or %q", ErrEvent, ev.Kind, KindStart, KindFinish)
	case ev.Name == "" || strings.HasPrefix(ev.Name, "/"):
		return fmt.Errorf("%w: name %q: want a stage or stage/module", ErrEvent, ev.Name)
	case ev.Kind == KindStart && ev.Result != "":
		return fmt.Errorf("%w: a start event carries no result", ErrEvent)
	case ev.Kind == KindFinish && ev.Result != ResultSuccess && ev.Result != ResultWarn && ev.Result != ResultFail:
		return fmt.Errorf("%w: result %q: want %s, %s or %s", ErrEvent, ev.Result, ResultSuccess, ResultWarn, ResultFail)
	}
	return nil
}

// lastStage is the stage whose finish ends an agent's first boot.
func lastStage(agent string) string {
	if agent == "ignition" {
		return "" // Ignition posts no stages: its Report ends the boot
	}
	return "modules-final"
}

// progress applies ev to a boot still going, and returns the status to
// hand OnFinish when ev ended it. b.mu is held.
func (b *boot) progress(ev Event, at time.Time) *Status {
	st := &b.st
	stage, module, _ := strings.Cut(ev.Name, "/")
	st.State, st.Stage, st.Module = Running, stage, module
	sg := b.stage(stage, ev.Time)
	if ev.Kind != KindFinish {
		return nil
	}
	if ev.Result == ResultFail && (module != "" || !b.failedIn(stage)) {
		// A stage fails because a module of it failed: that failure
		// already names it.
		b.fail(Failure{Stage: stage, Module: module, Message: ev.Message})
	}
	if module != "" {
		return nil
	}
	if sg != nil {
		sg.End, sg.Result = at, ev.Result
	}
	if stage != lastStage(st.Agent) {
		return nil
	}
	return b.end(len(st.Errors) > 0 || ev.Result == ResultFail, at)
}

// stage returns the named stage, adding it (started at, for a stage
// whose start was not seen: cloud-init's reporting is configured in the
// middle of init-network) while there is room.
func (b *boot) stage(name string, at time.Time) *Stage {
	for i := range b.st.Stages {
		if b.st.Stages[i].Name == name {
			return &b.st.Stages[i]
		}
	}
	if len(b.st.Stages) >= MaxStages {
		return nil
	}
	b.st.Stages = append(b.st.Stages, Stage{Name: clip(name, MaxName), Start: at})
	return &b.st.Stages[len(b.st.Stages)-1]
}

// failedIn reports whether a failure names stage.
func (b *boot) failedIn(stage string) bool {
	for _, f := range b.st.Errors {
		if f.Stage == stage {
			return true
		}
	}
	return false
}

// fail adds f to the failures, unless it is there already or they are
// full. A failure of what an earlier one names (result.json names no
// stage; the events do) is that failure: its message, when it has one,
// replaces the earlier (the report says why; the event only what ran).
func (b *boot) fail(f Failure) { b.addFailure(f, true) }

// addFailure is fail; with replace false, a failure already there keeps
// the longer of the two messages (MergeStatus: of two replicas' copies
// neither is known to be the later, and a store may keep them clipped).
func (b *boot) addFailure(f Failure, replace bool) {
	f.Message = clip(f.Message, MaxMessage)
	for i, g := range b.st.Errors {
		if g.sameAs(f) {
			if f.Message != "" && (replace || len(f.Message) > len(g.Message)) {
				b.st.Errors[i].Message = f.Message
			}
			if g.Stage == "" {
				b.st.Errors[i].Stage = f.Stage
			}
			return
		}
	}
	if len(b.st.Errors) < MaxFailures {
		b.st.Errors = append(b.st.Errors, f)
	}
}

// sameAs reports whether g and f are one failure: the same unit, or the
// same module of the same stage where both know it. Failures of a stage
// alone are the same only when equal: a stage may fail more than once.
func (g Failure) sameAs(f Failure) bool {
	switch {
	case g == f:
		return true
	case g.Unit != "" || f.Unit != "":
		return g.Unit == f.Unit && g.Module == f.Module && g.Stage == f.Stage
	case g.Module != "":
		return g.Module == f.Module && (g.Stage == f.Stage || g.Stage == "" || f.Stage == "")
	}
	return false
}

// end ends the boot at when, and returns its status for OnFinish the
// first time. b.mu is held.
func (b *boot) end(failed bool, when time.Time) *Status {
	b.st.State = Done
	if failed {
		b.st.State = Failed
	}
	if b.st.Finished.IsZero() {
		b.st.Finished = when
	}
	if b.finished {
		return nil
	}
	b.finished = true
	st := b.snapshot(false)
	return &st
}

// add appends ev to the ring of the last MaxEvents.
func (b *boot) add(ev Event) {
	if len(b.st.Events) == MaxEvents {
		copy(b.st.Events, b.st.Events[1:])
		b.st.Events = b.st.Events[:MaxEvents-1]
	}
	b.st.Events = append(b.st.Events, ev)
}

// Report takes the agent's final report. It ends a boot still going; a
// failed report turns a done boot failed (the report knows what the
// events did not say) and adds its failures, but a failed boot stays
// failed.
func (t *Tracker) Report(name, uid, agent string, r Report) {
	now := t.opts.Now()
	b := t.lock(name, uid, agent)
	result := ResultSuccess
	if r.Failed {
		result = ResultFail
	}
	b.add(Event{Time: now, Kind: KindReport, Name: agent, Result: result, Message: clip(r.Message, MaxMessage)})
	b.st.LastEvent = now
	for _, f := range r.Errors {
		f.Stage, f.Module, f.Unit = clip(f.Stage, MaxName), clip(f.Module, MaxName), clip(f.Unit, MaxName)
		b.fail(f)
	}
	if len(b.st.Stages) == 0 && !b.st.FirstFetch.IsZero() {
		b.st.Stages = []Stage{{Name: "boot", Start: b.st.FirstFetch, End: now, Result: result}}
	}
	var fin *Status
	if !b.st.State.Terminal() || (r.Failed && b.st.State == Done) {
		fin = b.end(r.Failed || b.st.State == Failed, now)
	}
	b.fit()
	b.mu.Unlock()
	t.finish(fin)
	t.changed(name)
}

func (t *Tracker) finish(st *Status) {
	if st != nil && t.opts.OnFinish != nil {
		t.opts.OnFinish(*st)
	}
}

// Status returns the boot of name's incarnation uid (agent is its
// spec.agent, for a boot the tracker has not seen: pending), with Stalled
// applied.
func (t *Tracker) Status(name, uid, agent string) Status {
	return t.read(name, uid, agent, true)
}

// Brief is Status without the stages and events, and with only its
// first error, its message on one line of at most MaxBriefError bytes: a
// row of a fleet table (the rest is the instance's Status).
func (t *Tracker) Brief(name, uid, agent string) Status {
	return t.read(name, uid, agent, false)
}

func (t *Tracker) read(name, uid, agent string, full bool) Status {
	if v, ok := t.boots.Load(name); ok {
		b := v.(*boot)
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.st.UID == uid {
			st := b.snapshot(full)
			st.State = t.stateAt(&b.st, t.opts.Now())
			st.NoReport = t.noReport(st.Agent)
			return st
		}
	}
	return Status{Name: name, UID: uid, Agent: agent, State: Pending, NoReport: t.noReport(agent)}
}

// noReport reports whether a guest of agent tells the server nothing of
// its boot (Options.Reports).
func (t *Tracker) noReport(agent string) bool {
	return t.opts.Reports != nil && !t.opts.Reports(agent)
}

// snapshot copies the status (b.mu held).
func (b *boot) snapshot(full bool) Status {
	st := b.st
	if full {
		st.Errors = append([]Failure(nil), st.Errors...)
		st.Stages = append([]Stage(nil), st.Stages...)
		st.Events = append([]Event(nil), st.Events...)
		return st
	}
	st.Stages, st.Events, st.Errors = nil, nil, nil
	if len(b.st.Errors) > 0 {
		st.Errors = []Failure{b.st.Errors[0].brief()}
	}
	return st
}

// stateAt is st's state as read at now: a silent boot stalls, unless its
// agent never speaks.
func (t *Tracker) stateAt(st *Status, now time.Time) State {
	if (st.State == Fetched || st.State == Running) && now.Sub(st.LastEvent) > t.opts.StallAfter && !t.noReport(st.Agent) {
		return Stalled
	}
	return st.State
}

// Retain drops the boots of instances keep reports false for (deleted,
// or re-created with another UID): what the server no longer serves
// holds nothing.
func (t *Tracker) Retain(keep func(name, uid string) bool) {
	t.boots.Range(func(k, v any) bool {
		b := v.(*boot)
		b.mu.Lock()
		uid := b.st.UID
		b.mu.Unlock()
		if !keep(k.(string), uid) {
			t.boots.CompareAndDelete(k, v)
		}
		return true
	})
}

// Len is the number of boots tracked (instances whose guest the server
// heard from).
func (t *Tracker) Len() int {
	n := 0
	t.boots.Range(func(any, any) bool { n++; return true })
	return n
}

// Changes returns a channel closed at the next change of any boot: a
// watcher reads what it shows, then waits on a new one.
func (t *Tracker) Changes() <-chan struct{} {
	t.wakeMu.Lock()
	defer t.wakeMu.Unlock()
	if t.wake == nil {
		t.wake = make(chan struct{})
		t.waited.Store(true)
	}
	return t.wake
}

// changed wakes the watchers and marks name for Persist.
func (t *Tracker) changed(name string) {
	t.notify()
	if t.persisting.Load() {
		t.dirtyMu.Lock()
		t.dirty[name]++
		t.dirtyMu.Unlock()
	}
}

// notify wakes the watchers.
func (t *Tracker) notify() {
	if t.waited.Load() {
		t.wakeMu.Lock()
		if t.wake != nil {
			close(t.wake)
			t.wake = nil
			t.waited.Store(false)
		}
		t.wakeMu.Unlock()
	}
}
