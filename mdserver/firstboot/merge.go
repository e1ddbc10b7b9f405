package firstboot

import (
	"slices"
	"strings"
	"time"
)

// MergeStatus is the union of two statuses of one incarnation, as two
// replicas heard of it (a guest may post each event to another replica):
// the events of both, by time and without duplicates (the last
// MaxEvents); the stages of both, by name, each as far as either saw it;
// the failures of both, one failure once (as the tracker's own are
// kept, with the longer message of its two copies: a store may keep them
// clipped); and the state, stage and module of the one further on. The
// result does not depend on which is a and which b, but for the order of
// failures (a's first). A store that shares statuses writes the union of
// what it holds and what it writes (etcdstore), and Tracker.Merge takes
// the union of what it holds and what it reads: no replica's event is
// lost to another's write. The union is held to MaxText as the
// tracker's own statuses are.
func MergeStatus(a, b Status) Status {
	a.State, b.State = stored(a), stored(b)
	lead, other := a, b
	if further(b, a) {
		lead, other = b, a
	}
	out := lead
	if out.Agent == "" {
		out.Agent = other.Agent
	}
	out.FirstFetch = earliest(a.FirstFetch, b.FirstFetch)
	out.LastEvent = latest(a.LastEvent, b.LastEvent)
	if out.State.Terminal() {
		out.Finished = earliest(a.Finished, b.Finished)
	} else {
		out.Finished = time.Time{}
	}
	out.Events = mergeEvents(a.Events, b.Events)
	out.Stages = mergeStages(a.Stages, b.Stages)
	m := boot{st: Status{Errors: slices.Clone(a.Errors)}}
	for _, f := range b.Errors {
		m.addFailure(f, false)
	}
	out.Errors = m.st.Errors
	if len(out.Errors) == 0 {
		out.Errors = nil
	}
	// Two statuses each within MaxText may hold more together.
	fitted := boot{st: out}
	fitted.fit()
	return fitted.st
}

// stored is st's state as a tracker holds it: a status written as read
// may say stalled, which is what it stalled in.
func stored(st Status) State {
	if st.State != Stalled {
		return st.State
	}
	if st.Stage != "" {
		return Running
	}
	return Fetched
}

// further reports whether a is further on than b: a later state (a
// failed boot past a done one: a failed report turns it failed), or the
// same state heard of later; of two heard of at once, the later stage
// and module by name (cloud-init's stages sort in the order they run),
// so that the union does not depend on which replica merges.
func further(a, b Status) bool {
	if a.State.rank() != b.State.rank() {
		return a.State.rank() > b.State.rank()
	}
	if a.State != b.State {
		return a.State == Failed
	}
	if c := a.LastEvent.Compare(b.LastEvent); c != 0 {
		return c > 0
	}
	if a.Stage != b.Stage {
		return a.Stage > b.Stage
	}
	return a.Module > b.Module
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// mergeEvents is the union of two event logs, by time, without
// duplicates, keeping the last MaxEvents. One event seen by two replicas
// is one entry: the same time, kind and name. Of a run of fetches, the
// entry that counted more is kept; a start and the finish that closed it
// (Record makes them one entry, Time the start) are the finish.
func mergeEvents(a, b []Event) []Event {
	if len(b) == 0 {
		return slices.Clone(a)
	}
	all := append(slices.Clone(a), b...)
	slices.SortStableFunc(all, func(x, y Event) int {
		if c := x.Time.Compare(y.Time); c != 0 {
			return c
		}
		if c := strings.Compare(x.Name, y.Name); c != 0 {
			return c
		}
		// The entry that says more first: a finish before its start,
		// the longer run of fetches first.
		if c := strings.Compare(kindOrder(x.Kind), kindOrder(y.Kind)); c != 0 {
			return c
		}
		return y.Count - x.Count
	})
	out := all[:0]
	for _, ev := range all {
		if n := len(out); n > 0 && sameEvent(out[n-1], ev) {
			last := &out[n-1]
			last.Until = latest(last.Until, ev.Until)
			continue
		}
		out = append(out, ev)
	}
	if len(out) > MaxEvents {
		out = out[len(out)-MaxEvents:]
	}
	return slices.Clip(out)
}

// kindOrder sorts a finish before a start of the same time and name.
func kindOrder(kind string) string {
	if kind == KindFinish {
		return ""
	}
	return kind
}

// sameEvent reports whether y, sorted after x, is an entry of the event x
// stands for.
func sameEvent(x, y Event) bool {
	if !x.Time.Equal(y.Time) || x.Name != y.Name {
		return false
	}
	return x.Kind == y.Kind || x.Kind == KindFinish && y.Kind == KindStart && !x.Until.IsZero()
}

// mergeStages is the union of two stage lists by name, each stage as far
// as either saw it (the earlier start; the end, when either saw one), in
// the order of their starts; at most MaxStages.
func mergeStages(a, b []Stage) []Stage {
	out := slices.Clone(a)
	for _, s := range b {
		i := slices.IndexFunc(out, func(o Stage) bool { return o.Name == s.Name })
		if i < 0 {
			out = append(out, s)
			continue
		}
		o := &out[i]
		o.Start = earliest(o.Start, s.Start)
		if o.End.IsZero() && !s.End.IsZero() {
			o.End, o.Result = s.End, s.Result
		}
	}
	slices.SortStableFunc(out, func(x, y Stage) int { return x.Start.Compare(y.Start) })
	if len(out) > MaxStages {
		out = out[:MaxStages]
	}
	return out
}

// sameStatus reports whether a and b say the same (times compared as
// instants: one read back from a store has no monotonic reading).
func sameStatus(a, b *Status) bool {
	return a.Name == b.Name && a.UID == b.UID && a.Agent == b.Agent && a.State == b.State &&
		a.Stage == b.Stage && a.Module == b.Module && a.FirstFetch.Equal(b.FirstFetch) &&
		a.LastEvent.Equal(b.LastEvent) && a.Finished.Equal(b.Finished) &&
		slices.EqualFunc(a.Stages, b.Stages, func(x, y Stage) bool {
			return x.Name == y.Name && x.Start.Equal(y.Start) && x.End.Equal(y.End) && x.Result == y.Result
		}) &&
		slices.Equal(a.Errors, b.Errors) &&
		slices.EqualFunc(a.Events, b.Events, func(x, y Event) bool {
			return x.Time.Equal(y.Time) && x.Until.Equal(y.Until) && x.Kind == y.Kind && x.Name == y.Name &&
				x.Result == y.Result && x.Message == y.Message && x.Dialect == y.Dialect && x.Count == y.Count
		})
}
