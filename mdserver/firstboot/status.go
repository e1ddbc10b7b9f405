package firstboot

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// State is where an instance's first boot is.
type State string

// The states, in the order a boot goes through them. Stalled is never
// stored: a fetched or running boot reads as stalled when no event came
// for Options.StallAfter, and the next event makes it what it was.
const (
	Pending State = "pending" // the server never answered this incarnation
	Fetched State = "fetched" // its data was fetched; no event from the agent yet
	Running State = "running" // the agent reports progress (Status.Stage, Status.Module)
	Done    State = "done"    // first boot finished without a failure
	Failed  State = "failed"  // first boot finished, and something failed (Status.Errors)
	Stalled State = "stalled" // fetched or running, and silent for Options.StallAfter
)

// States lists every state, in the order tables and counts show them.
var States = []State{Pending, Fetched, Running, Stalled, Done, Failed}

// Terminal reports whether s ends a first boot: later events are kept in
// the log, and change nothing else.
func (s State) Terminal() bool { return s == Done || s == Failed }

// rank orders the stored states by progress (Merge keeps the furthest).
func (s State) rank() int {
	switch s {
	case Fetched:
		return 1
	case Running:
		return 2
	case Done, Failed:
		return 3
	}
	return 0
}

// Event kinds.
const (
	KindFetch  = "fetch"  // the server answered a metadata request (Name is the path)
	KindStart  = "start"  // a stage or module started (cloud-init)
	KindFinish = "finish" // a stage or module finished with Result (cloud-init)
	KindReport = "report" // the agent's final report (Report)
)

// Results of a finish event, as cloud-init names them.
const (
	ResultSuccess = "SUCCESS"
	ResultWarn    = "WARN"
	ResultFail    = "FAIL"
)

// Event is one thing the server saw of a boot. Times are the server's
// clock when the event arrived: a guest's clock at first boot is often
// wrong.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Name is what the event is about: cloud-init's event name ("stage" or
	// "stage/module", e.g. "modules-final/config-scripts-user"), a fetch's
	// path, a report's agent.
	Name    string `json:"name,omitempty"`
	Result  string `json:"result,omitempty"`
	Message string `json:"message,omitempty"`
	// Dialect is a fetch's dialect; Count says how many fetches of that
	// dialect in a row this event stands for (a cloud-init crawl is up to
	// a hundred requests), and Until when the last one came. A finish
	// event that follows its own start stands for both: Time is the
	// start, Until the finish.
	Dialect string    `json:"dialect,omitempty"`
	Count   int       `json:"count,omitempty"`
	Until   time.Time `json:"until,omitzero"`
}

// Stage is one top-level stage of a boot (cloud-init's init-network,
// modules-config, modules-final; "boot" for an Ignition report).
type Stage struct {
	Name   string    `json:"name"`
	Start  time.Time `json:"start,omitzero"`
	End    time.Time `json:"end,omitzero"`
	Result string    `json:"result,omitempty"`
}

// Duration is how long the stage ran (0 while it runs).
func (s Stage) Duration() time.Duration {
	if s.Start.IsZero() || s.End.IsZero() {
		return 0
	}
	return s.End.Sub(s.Start)
}

// Failure is one thing that failed: a cloud-init stage and module, or an
// Ignition boot's systemd unit, with what it said.
type Failure struct {
	Stage   string `json:"stage,omitempty"`
	Module  string `json:"module,omitempty"`
	Unit    string `json:"unit,omitempty"`
	Message string `json:"message,omitempty"`
}

// Where names what failed: "stage/module", or the unit (or what of them
// is known).
func (f Failure) Where() string {
	switch {
	case f.Unit != "":
		return f.Unit
	case f.Module != "" && f.Stage != "":
		return f.Stage + "/" + f.Module
	case f.Module != "":
		return f.Module // from cloud-init's result.json, which names no stage
	}
	return f.Stage
}

// Status is one incarnation's first boot: what the admin API answers, the
// CLI and the web page show, and a store writes back.
type Status struct {
	Name string `json:"name"`
	// UID is the incarnation (registry.Record.UID): always present, ""
	// for an instance a directory store loaded at start, so that every
	// row of a listing has the same keys.
	UID   string `json:"uid"`
	Agent string `json:"agent,omitempty"`
	State State  `json:"state"`
	// Stage and Module are where the boot is (or ended, or failed).
	Stage  string `json:"stage,omitempty"`
	Module string `json:"module,omitempty"`
	// FirstFetch is when the server first answered this incarnation,
	// LastEvent when it last heard of it, Finished when the boot reached
	// done or failed.
	FirstFetch time.Time `json:"firstFetch,omitzero"`
	LastEvent  time.Time `json:"lastEvent,omitzero"`
	Finished   time.Time `json:"finished,omitzero"`
	Stages     []Stage   `json:"stages,omitempty"`
	Errors     []Failure `json:"errors,omitempty"`
	// Events are the last events, oldest first (at most MaxEvents).
	Events []Event `json:"events,omitempty"`
	// NoReport is set when the instance's agent tells the server nothing
	// of its boot (cloudbase-init; Options.Reports): only its fetches are
	// heard, so it stays pending or fetched, never reads as stalled, and
	// nobody waits for its end. Unreported says so in words.
	NoReport bool `json:"noReport,omitempty"`
}

// Unreported is why the server hears nothing of a boot but its fetches,
// "cloudbase-init sends no first-boot report", or "" when its agent
// reports: the words the CLI, the web page (Where) and the Kubernetes
// condition all show.
func (s *Status) Unreported() string {
	if !s.NoReport {
		return ""
	}
	return s.Agent + " sends no first-boot report"
}

// Elapsed is how long the boot took (finished) or has taken so far, from
// the first fetch; 0 for a boot never fetched.
func (s *Status) Elapsed(now time.Time) time.Duration {
	switch {
	case s.FirstFetch.IsZero():
		return 0
	case !s.Finished.IsZero():
		return s.Finished.Sub(s.FirstFetch)
	}
	return now.Sub(s.FirstFetch)
}

// Where is a boot's stage column, the one rule the CLI's table, the web
// page and the instance views share: where a running or stalled boot is
// (stage/module), what a failed one failed in (its first failure),
// nothing for a boot not started or done (the stage it last reported
// would read as where it stopped), and why nobody can say where a boot
// whose agent sends no report is (Unreported).
func (s *Status) Where() string {
	if s.NoReport && !s.State.Terminal() {
		return s.Unreported()
	}
	switch s.State {
	case Failed:
		if len(s.Errors) > 0 {
			return s.Errors[0].Where()
		}
	case Running, Stalled:
	default:
		return ""
	}
	if s.Module != "" {
		return s.Stage + "/" + s.Module
	}
	return s.Stage
}

// FirstError is the first failure, "where: why" on one line (Why: the
// line of its message that says why), or "". The CLI, the web page and
// the Kubernetes condition show it; the whole message is the Status's.
func (s *Status) FirstError() string {
	if len(s.Errors) == 0 {
		return ""
	}
	f := s.Errors[0]
	if f.Message == "" {
		return f.Where()
	}
	return f.Where() + ": " + oneLine(Why(f.Message))
}

// Filter selects statuses for a fleet summary. The zero Filter selects
// every one.
type Filter struct {
	States []State // any of these (Stalled as read, not as stored)
	Agent  string  // spec.agent: one of Agents
	// MinAge and MaxAge bound Elapsed (a pending boot's is 0).
	MinAge, MaxAge time.Duration
	// Name is a substring of the instance name.
	Name string
}

// Match reports whether s passes f at now.
func (f *Filter) Match(s *Status, now time.Time) bool {
	if len(f.States) > 0 && !slices.Contains(f.States, s.State) {
		return false
	}
	if f.Agent != "" && s.Agent != f.Agent {
		return false
	}
	if f.Name != "" && !strings.Contains(s.Name, f.Name) {
		return false
	}
	age := s.Elapsed(now)
	return age >= f.MinAge && (f.MaxAge == 0 || age <= f.MaxAge)
}

// Summary is a fleet's statuses that passed a filter, by name, and the
// count of each state among them. Its rows are Tracker.Brief's: no stages
// or events, the first error only.
type Summary struct {
	Counts    map[State]int `json:"counts"`
	Instances []Status      `json:"instances"`
	// Continue is set on a page (Page) that rows follow: what asks for
	// the next one.
	Continue string `json:"continue,omitempty"`
	// Removed is set on changes (Changes): the instances that left the
	// selection.
	Removed []string `json:"removed,omitempty"`
}

// Page is the page of s of at most limit rows (all for 0) after the row
// named after ("": from the first), with the counts of the whole of s.
// Rows are by name, so that a fleet read page by page sees each instance
// once, whatever is added or removed between pages; Continue is the name
// of the page's last row when rows follow it.
func (s Summary) Page(after string, limit int) Summary {
	if limit <= 0 {
		limit = len(s.Instances) + 1
	}
	rows := s.Instances
	if after != "" {
		i, found := slices.BinarySearchFunc(rows, after, func(st Status, name string) int { return strings.Compare(st.Name, name) })
		if found {
			i++
		}
		rows = rows[i:]
	}
	page := Summary{Counts: s.Counts, Instances: rows[:min(limit, len(rows))]}
	if len(rows) > limit {
		page.Continue = rows[limit-1].Name
	}
	return page
}

// Changes is what a reader holding since needs to hold s (both by
// name, as Summarize returns them): the rows of s new or different, the
// names of since's rows s no longer has, and s's counts. Its Instances
// and Removed are empty when nothing changed but the counts.
func (s Summary) Changes(since Summary) Summary {
	ch := Summary{Counts: s.Counts, Instances: []Status{}} // [] on the wire, not null
	old := since.Instances
	for i := range s.Instances {
		row := &s.Instances[i]
		for len(old) > 0 && old[0].Name < row.Name {
			ch.Removed = append(ch.Removed, old[0].Name)
			old = old[1:]
		}
		if len(old) > 0 && old[0].Name == row.Name {
			same := sameRow(&old[0], row)
			old = old[1:]
			if same {
				continue
			}
		}
		ch.Instances = append(ch.Instances, *row)
	}
	for _, r := range old {
		ch.Removed = append(ch.Removed, r.Name)
	}
	return ch
}

// Apply makes s what it was sent changes of (Changes): s's rows stay by
// name.
func (s *Summary) Apply(ch Summary) {
	gone := make(map[string]bool, len(ch.Removed))
	for _, n := range ch.Removed {
		gone[n] = true
	}
	rows := make([]Status, 0, len(s.Instances)+len(ch.Instances))
	old, add := s.Instances, ch.Instances
	for len(old) > 0 || len(add) > 0 {
		switch {
		case len(add) == 0 || len(old) > 0 && old[0].Name < add[0].Name:
			if !gone[old[0].Name] {
				rows = append(rows, old[0])
			}
			old = old[1:]
		default:
			if len(old) > 0 && old[0].Name == add[0].Name {
				old = old[1:]
			}
			rows = append(rows, add[0])
			add = add[1:]
		}
	}
	s.Instances, s.Counts, s.Continue = rows, ch.Counts, ""
}

// Unchanged reports whether changes ch carry nothing new for a reader
// holding counts.
func (ch Summary) Unchanged(counts map[State]int) bool {
	return len(ch.Instances) == 0 && len(ch.Removed) == 0 && maps.Equal(ch.Counts, counts)
}

// sameRow reports whether two statuses are the same.
func sameRow(a, b *Status) bool {
	return a.Name == b.Name && a.UID == b.UID && a.Agent == b.Agent && a.State == b.State && a.NoReport == b.NoReport &&
		a.Stage == b.Stage && a.Module == b.Module && a.FirstFetch.Equal(b.FirstFetch) &&
		a.LastEvent.Equal(b.LastEvent) && a.Finished.Equal(b.Finished) &&
		slices.Equal(a.Errors, b.Errors) && slices.Equal(a.Stages, b.Stages) && slices.Equal(a.Events, b.Events)
}

// Summarize filters statuses (already read at now, with Stalled applied)
// and counts them; the instances come out sorted by name.
func Summarize(statuses []Status, f Filter, now time.Time) Summary {
	rows := make([]Status, 0, len(statuses))
	for i := range statuses {
		if f.Match(&statuses[i], now) {
			rows = append(rows, statuses[i])
		}
	}
	slices.SortFunc(rows, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return Counted(rows)
}

// Counted is the summary of rows: each state counted (every state
// listed, 0 when none is in it).
func Counted(rows []Status) Summary {
	sum := Summary{Counts: make(map[State]int, len(States)), Instances: rows}
	for _, st := range States {
		sum.Counts[st] = 0
	}
	for i := range rows {
		sum.Counts[rows[i].State]++
	}
	return sum
}

// How a reader of a fleet's changes (Tracker.Changes) paces itself: by
// what each read costs, not by how many changes come (a fleet booting
// posts hundreds of events a second, and a hostile guest as many as its
// rate allows). After a read that took read and a send of sent bytes, the
// next read waits the longest of its minimum, WatchReadCost times the
// read (a fleet of 100,000 takes most of a second to read: a watcher must
// not keep a core busy), and sent at WatchBytesPerSecond (64 watchers
// then send at most 16 MiB a second together, whatever the guests do).
const (
	WatchReadCost       = 4
	WatchBytesPerSecond = 256 << 10
)

// WatchPause is how long a watcher waits after a read that took read and
// a send of sent bytes, at least least.
func WatchPause(least time.Duration, sent int, read time.Duration) time.Duration {
	return max(least, WatchReadCost*read, time.Duration(sent)*time.Second/WatchBytesPerSecond)
}
