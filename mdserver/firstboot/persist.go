package firstboot

import (
	"context"
	"slices"
	"strings"
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

// PaceTicks is how many of Persist's intervals pass between two writes
// of one instance's status (5 s at the server's 1 s) unless its state
// changed: a guest posts dozens of events a minute while it boots, and
// each write of its status is a revision of the whole status in etcd (or
// an update of the Instance every informer receives). Its first fetch,
// each step of its state and its end are written at the next interval;
// the events between coalesce.
const PaceTicks = 5

// Persist writes the boots that changed to sink, until ctx ends: every
// interval (default one second) the boots whose state changed (stalled,
// as read, included), and the others that changed once PaceTicks
// intervals passed since their last write. A failed write is retried at
// the next interval; onError receives its error. Call it once per
// tracker.
func (t *Tracker) Persist(ctx context.Context, sink Sink, every time.Duration, onError func(error)) {
	if every <= 0 {
		every = time.Second
	}
	t.persisting.Store(true)
	tick := time.NewTicker(every)
	defer tick.Stop()
	p := &pacer{pace: PaceTicks * every, last: map[string]time.Time{}}
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case now = <-tick.C:
		}
		if err := t.persistDue(ctx, sink, p, now); err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
	}
}

// pacer is when Persist last wrote each instance: those written within
// the pace only (the map is bounded by what changed lately).
type pacer struct {
	pace time.Duration
	last map[string]time.Time
}

// persistDue is one interval of Persist, at now: it writes what is due,
// and marks again what it failed to write.
func (t *Tracker) persistDue(ctx context.Context, sink Sink, p *pacer, now time.Time) error {
	for n, at := range p.last {
		if now.Sub(at) >= p.pace {
			delete(p.last, n)
		}
	}
	batch := t.takeDirty(func(name string) bool { _, held := p.last[name]; return !held })
	if err := t.write(ctx, sink, batch); err != nil {
		t.markDirty(batch)
		return err
	}
	for _, w := range batch {
		p.last[w.name] = now
	}
	return nil
}

// pending is a boot to write, and how many changes of it that write
// carries (accepted events, fetches).
type pending struct {
	name    string
	changes int
}

// takeDirty returns the boots to write: those whose state as read is no
// longer what was last written (a step, an end, a boot that stalled),
// and those that changed and are due. The others stay marked.
func (t *Tracker) takeDirty(due func(name string) bool) []pending {
	now := t.opts.Now()
	stepped := map[string]bool{}
	t.boots.Range(func(k, v any) bool {
		b := v.(*boot)
		b.mu.Lock()
		if b.wroteAs != t.stateAt(&b.st, now) {
			stepped[k.(string)] = true
		}
		b.mu.Unlock()
		return true
	})
	var out []pending
	t.dirtyMu.Lock()
	for n, c := range t.dirty {
		if stepped[n] || due(n) {
			out = append(out, pending{n, c})
			delete(t.dirty, n)
			delete(stepped, n)
		}
	}
	t.dirtyMu.Unlock()
	for n := range stepped {
		out = append(out, pending{name: n})
	}
	slices.SortFunc(out, func(a, b pending) int { return strings.Compare(a.name, b.name) })
	return out
}

// markDirty marks again what a failed write carried.
func (t *Tracker) markDirty(batch []pending) {
	t.dirtyMu.Lock()
	for _, p := range batch {
		t.dirty[p.name] += p.changes
	}
	t.dirtyMu.Unlock()
}

// Unwritten counts what the tracker holds that no write carried yet:
// the changes (events accepted, fetches) and the instances they are of.
// A server that stops says so when its last write failed.
func (t *Tracker) Unwritten() (changes, instances int) {
	t.dirtyMu.Lock()
	defer t.dirtyMu.Unlock()
	for _, c := range t.dirty {
		changes += c
	}
	return changes, len(t.dirty)
}

// write hands sink the statuses of batch, MaxBatch at a time.
func (t *Tracker) write(ctx context.Context, sink Sink, batch []pending) error {
	for len(batch) > 0 {
		n := min(len(batch), MaxBatch)
		sts := make([]Status, 0, n)
		for _, p := range batch[:n] {
			v, ok := t.boots.Load(p.name)
			if !ok {
				continue
			}
			b := v.(*boot)
			b.mu.Lock()
			st := b.snapshot(true)
			st.State = t.stateAt(&b.st, t.opts.Now())
			b.wroteAs = st.State
			b.mu.Unlock()
			sts = append(sts, st)
		}
		if len(sts) > 0 {
			if err := sink.WriteBoot(ctx, sts); err != nil {
				return err
			}
		}
		batch = batch[n:]
	}
	return nil
}

// Merge takes a status another replica wrote (read back from the store):
// for the same incarnation, the boot becomes the union of both
// (MergeStatus), so that an event a guest posted to another replica is
// kept beside this one's. A status of another incarnation is taken only
// when this replica holds none for the name (Retain drops it once the
// instance is gone). It reports whether the boot changed. A merged status
// is not written back: what the store holds is already the union, as a
// Sink writes it.
func (t *Tracker) Merge(in Status) bool {
	in.State = stored(in)
	v, ok := t.boots.Load(in.Name)
	if !ok {
		nb := &boot{st: in, wroteAs: in.State, finished: in.State.Terminal()}
		nb.fit() // what a store holds is bounded as what a guest posts
		if _, loaded := t.boots.LoadOrStore(in.Name, nb); loaded {
			return t.Merge(in)
		}
		t.notify()
		return true
	}
	b := v.(*boot)
	b.mu.Lock()
	changed, lacks := false, false
	if b.st.UID == in.UID {
		merged := MergeStatus(b.st, in)
		if changed = !sameStatus(&b.st, &merged); changed {
			b.st = merged
			b.finished = b.finished || merged.State.Terminal()
			b.wroteAs = t.stateAt(&b.st, t.opts.Now())
		}
		lacks = !sameStatus(&merged, &in)
	}
	b.mu.Unlock()
	if changed {
		t.notify()
	}
	if lacks && t.persisting.Load() {
		// What the store holds lacks what this replica knows (a store
		// whose last writer overwrote another's, as an apply does):
		// Persist writes the union back. A Sink skips a write that
		// changes nothing it holds.
		t.dirtyMu.Lock()
		t.dirty[in.Name] += 0
		t.dirtyMu.Unlock()
	}
	return changed
}
