package firstboot

import (
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
	Name  string `json:"name"`
	UID   string `json:"uid,omitempty"`
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

// FirstError is the first failure, "where: message", or "".
func (s *Status) FirstError() string {
	if len(s.Errors) == 0 {
		return ""
	}
	f := s.Errors[0]
	if f.Message == "" {
		return f.Where()
	}
	return f.Where() + ": " + f.Message
}

// Filter selects statuses for a fleet summary. The zero Filter selects
// every one.
type Filter struct {
	States []State // any of these (Stalled as read, not as stored)
	Agent  string  // spec.agent: cloud-init or ignition
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
// count of each state among them.
type Summary struct {
	Counts    map[State]int `json:"counts"`
	Instances []Status      `json:"instances"`
}

// Summarize filters statuses (already read at now, with Stalled applied)
// and counts them; the instances come out sorted by name.
func Summarize(statuses []Status, f Filter, now time.Time) Summary {
	sum := Summary{Counts: make(map[State]int, len(States)), Instances: make([]Status, 0, len(statuses))}
	for _, st := range States {
		sum.Counts[st] = 0
	}
	for i := range statuses {
		if f.Match(&statuses[i], now) {
			sum.Counts[statuses[i].State]++
			sum.Instances = append(sum.Instances, statuses[i])
		}
	}
	slices.SortFunc(sum.Instances, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return sum
}
