package firstboot

import "context"

// Flush writes to sink at once what Persist would write at its next
// tick: the boots that changed since its last write. A server that stops
// calls it after Persist returned (never beside it), so that what its
// guests posted last is not lost with its memory.
func (t *Tracker) Flush(ctx context.Context, sink Sink) error {
	batch := t.takeDirty(func(string) bool { return true })
	if err := t.write(ctx, sink, batch); err != nil {
		t.markDirty(batch)
		return err
	}
	return nil
}
