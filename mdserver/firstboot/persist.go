package firstboot

import (
	"context"
	"slices"
	"time"
)

// Sink is where a store keeps the statuses every replica and client
// reads: etcdstore a key per instance, kubestore the Instance's status
// and its FirstBoot condition. WriteBoot is called by one goroutine
// (Persist), with statuses as read (Stalled applied), at most MaxBatch at
// a time.
type Sink interface {
	WriteBoot(ctx context.Context, statuses []Status) error
}

// Shared is a store that shares statuses between replicas: it writes
// them (Sink) and hands the tracker what the other replicas wrote.
// FollowBoots merges what is stored into t (Tracker.Merge), then what
// changes, until ctx ends; the server calls it once, beside Persist.
// Given a context that has already ended, it merges what is stored and
// returns: a one-shot read (`vminit instances status --kubeconfig`).
type Shared interface {
	Sink
	FollowBoots(ctx context.Context, t *Tracker) error
}

// MaxBatch bounds the statuses of one WriteBoot call.
const MaxBatch = 256

// Persist writes the boots that changed to sink every interval (default
// one second), and those that turned stalled since their last write,
// until ctx ends. A failed write is logged through onError and retried at
// the next interval. Call it once per tracker.
func (t *Tracker) Persist(ctx context.Context, sink Sink, every time.Duration, onError func(error)) {
	if every <= 0 {
		every = time.Second
	}
	t.persisting.Store(true)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		batch := t.takeDirty()
		if err := t.write(ctx, sink, batch); err != nil && ctx.Err() == nil {
			t.markDirty(batch)
			if onError != nil {
				onError(err)
			}
		}
	}
}

// takeDirty returns the names to write: those that changed, and those
// whose state as read is no longer what was last written (a boot that
// stalled).
func (t *Tracker) takeDirty() []string {
	t.dirtyMu.Lock()
	names := make([]string, 0, len(t.dirty))
	for n := range t.dirty {
		names = append(names, n)
	}
	clear(t.dirty)
	t.dirtyMu.Unlock()
	now := t.opts.Now()
	t.boots.Range(func(k, v any) bool {
		b := v.(*boot)
		b.mu.Lock()
		stale := b.wroteAs != t.stateAt(&b.st, now)
		b.mu.Unlock()
		if stale {
			names = append(names, k.(string))
		}
		return true
	})
	slices.Sort(names)
	return slices.Compact(names)
}

func (t *Tracker) markDirty(names []string) {
	t.dirtyMu.Lock()
	for _, n := range names {
		t.dirty[n] = struct{}{}
	}
	t.dirtyMu.Unlock()
}

// write hands sink the statuses of names, MaxBatch at a time.
func (t *Tracker) write(ctx context.Context, sink Sink, names []string) error {
	for len(names) > 0 {
		n := min(len(names), MaxBatch)
		batch := make([]Status, 0, n)
		for _, name := range names[:n] {
			v, ok := t.boots.Load(name)
			if !ok {
				continue
			}
			b := v.(*boot)
			b.mu.Lock()
			st := b.snapshot(true)
			st.State = t.stateAt(&b.st, t.opts.Now())
			b.wroteAs = st.State
			b.mu.Unlock()
			batch = append(batch, st)
		}
		if len(batch) > 0 {
			if err := sink.WriteBoot(ctx, batch); err != nil {
				return err
			}
		}
		names = names[n:]
	}
	return nil
}

// Merge takes a status another replica wrote (read back from the store)
// and keeps it when it is further on than what this replica holds for
// the same incarnation: a later state, or the same state heard of later.
// A status of another incarnation is taken only when this replica holds
// none for the name (Retain drops it once the instance is gone). It
// reports whether the boot changed. A merged status is not written back.
func (t *Tracker) Merge(in Status) bool {
	if in.State == Stalled { // written as read: stored as what it stalled in
		in.State = Fetched
		if in.Stage != "" {
			in.State = Running
		}
	}
	v, ok := t.boots.Load(in.Name)
	if !ok {
		nb := &boot{st: in, wroteAs: in.State, finished: in.State.Terminal()}
		if _, loaded := t.boots.LoadOrStore(in.Name, nb); loaded {
			return t.Merge(in)
		}
		t.notify()
		return true
	}
	b := v.(*boot)
	b.mu.Lock()
	cur := &b.st
	ahead := cur.UID == in.UID && (in.State.rank() > cur.State.rank() ||
		in.State.rank() == cur.State.rank() && in.LastEvent.After(cur.LastEvent))
	if ahead {
		events := mergeEvents(cur.Events, in.Events)
		if in.Stages == nil { // a store that keeps none (kubestore): keep ours
			in.Stages = cur.Stages
		}
		b.st = in
		b.st.Events = events
		b.finished = b.finished || in.State.Terminal()
		b.wroteAs = t.stateAt(&b.st, t.opts.Now())
	}
	b.mu.Unlock()
	if ahead {
		t.notify()
	}
	return ahead
}

// mergeEvents is the union of two event logs, by time, without
// duplicates, keeping the last MaxEvents.
func mergeEvents(a, b []Event) []Event {
	all := append(append([]Event(nil), a...), b...)
	slices.SortStableFunc(all, func(x, y Event) int { return x.Time.Compare(y.Time) })
	all = slices.CompactFunc(all, func(x, y Event) bool {
		return x.Time.Equal(y.Time) && x.Kind == y.Kind && x.Name == y.Name && x.Result == y.Result
	})
	if len(all) > MaxEvents {
		all = all[len(all)-MaxEvents:]
	}
	return all
}
