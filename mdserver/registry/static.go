package registry

import (
	"context"
	"errors"
	"sync/atomic"
)

// StaticStore is a Store over a fixed set of records, for tests, examples
// and embedding. Replace swaps in a new set atomically; Put and Delete are
// refused.
type StaticStore struct{ snap atomic.Pointer[Snapshot] }

// NewStaticStore indexes records (see NewSnapshot for the conflicts
// refused).
func NewStaticStore(records []*Record) (*StaticStore, error) {
	s, err := NewSnapshot(records)
	if err != nil {
		return nil, err
	}
	st := &StaticStore{}
	st.snap.Store(s)
	return st, nil
}

// Snapshot returns the current snapshot.
func (s *StaticStore) Snapshot() *Snapshot { return s.snap.Load() }

// Replace serves a new set of records from now on; requests in flight
// keep the snapshot they started with.
func (s *StaticStore) Replace(records []*Record) error {
	snap, err := NewSnapshot(records)
	if err != nil {
		return err
	}
	s.snap.Store(snap)
	return nil
}

var errReadOnly = errors.New("static store is read-only")

// Put is refused.
func (s *StaticStore) Put(context.Context, []byte) (*Record, error) { return nil, errReadOnly }

// Delete is refused.
func (s *StaticStore) Delete(context.Context, string) error { return errReadOnly }

// Close does nothing.
func (s *StaticStore) Close() error { return nil }
