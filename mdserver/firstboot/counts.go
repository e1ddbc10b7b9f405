package firstboot

// Counts returns how many of the tracked boots are in each state, read
// now (Stalled applied), counting only those serves reports true for:
// a boot of an instance gone, or of an earlier incarnation, that Retain
// has not dropped yet is not the fleet's. A fleet's pending instances are
// mostly ones the tracker never heard of, which it does not hold: the
// caller adds them (the metrics: instances served minus those counted).
// It takes each boot's lock in turn, never decoding a spec.
func (t *Tracker) Counts(serves func(name, uid string) bool) map[State]int {
	counts := make(map[State]int, len(States))
	for _, st := range States {
		counts[st] = 0
	}
	now := t.opts.Now()
	t.boots.Range(func(k, v any) bool {
		b := v.(*boot)
		b.mu.Lock()
		uid, state := b.st.UID, t.stateAt(&b.st, now)
		b.mu.Unlock()
		if serves(k.(string), uid) {
			counts[state]++
		}
		return true
	})
	return counts
}
