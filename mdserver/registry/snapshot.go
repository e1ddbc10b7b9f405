package registry

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// Snapshot is an immutable index of records by name and by address.
// Stores publish a new Snapshot for every change and swap it in
// atomically, so a request sees one consistent view without taking
// locks. Its maps are persistent (hamt): a Snapshot derived from another
// by a change of k records shares all but O(k log n) of its nodes, so a
// change costs O(k), not a copy of every instance.
type Snapshot struct {
	byName hamt[string, *Record]
	byAddr hamt[netip.Addr, *Record]

	namesOnce sync.Once
	names     []string // sorted, built on first use
}

// NewSnapshot indexes records. Two records with the same name or address
// are an error naming both, so a store can refuse the change and keep
// serving its previous snapshot.
func NewSnapshot(records []*Record) (*Snapshot, error) {
	names, addrs := hamt[string, *Record]{}.edit(), hamt[netip.Addr, *Record]{}.edit()
	for _, r := range records {
		if _, dup := names.m.get(r.Name); dup {
			return nil, fmt.Errorf("instance %q is defined twice", r.Name)
		}
		names.set(r.Name, r)
		for _, a := range r.Addresses {
			if o, dup := addrs.m.get(a); dup {
				return nil, fmt.Errorf("%w: %s by %q and %q", ErrAddressConflict, a, o.Name, r.Name)
			}
			addrs.set(a, r)
		}
	}
	return &Snapshot{byName: names.done(), byAddr: addrs.done()}, nil
}

// derive returns the snapshot s with the records of gone removed and
// those of added indexed, in O(len(gone)+len(added)) map updates. The
// caller (Index) has resolved the conflicts: after the removals, nothing
// in s claims a name or an address of added.
func (s *Snapshot) derive(gone, added []*Record) *Snapshot {
	names, addrs := s.byName.edit(), s.byAddr.edit()
	for _, r := range gone {
		if cur, _ := names.m.get(r.Name); cur == r {
			names.del(r.Name)
		}
		for _, a := range r.Addresses {
			if cur, _ := addrs.m.get(a); cur == r {
				addrs.del(a)
			}
		}
	}
	for _, r := range added {
		names.set(r.Name, r)
		for _, a := range r.Addresses {
			addrs.set(a, r)
		}
	}
	return &Snapshot{byName: names.done(), byAddr: addrs.done()}
}

// ByAddr returns the record that owns a source address. A record whose
// checks were deferred is checked first (Record.Verify, keeping what it
// decoded for the caller), and not returned if it fails.
func (s *Snapshot) ByAddr(a netip.Addr) (*Record, bool) {
	return verified(s.byAddr.get(a.Unmap()))
}

// ByName returns the record with the given name, checked as by ByAddr.
func (s *Snapshot) ByName(name string) (*Record, bool) {
	return verified(s.byName.get(name))
}

func verified(r *Record, ok bool) (*Record, bool) {
	if !ok || r.verify(true) != nil {
		return nil, false
	}
	return r, true
}

// Serves reports whether k is current: the snapshot holds its instance,
// the same incarnation, at its revision.
func (s *Snapshot) Serves(k Key) bool {
	r, ok := s.byName.get(k.Name)
	return ok && r.Revision == k.Revision && r.UID == k.UID
}

// Incarnation reports whether the snapshot holds the named instance as
// the incarnation uid, at whatever revision.
func (s *Snapshot) Incarnation(name, uid string) bool {
	r, ok := s.byName.get(name)
	return ok && r.UID == uid
}

// Names returns every instance name, sorted. While a store's deferred
// checks run (Index.DecodeDeferred), it may name a record that ByName
// then refuses. The list is built on the
// first call (O(n log n)) and kept; callers must not modify it.
func (s *Snapshot) Names() []string {
	s.namesOnce.Do(func() {
		s.names = make([]string, 0, s.byName.len)
		s.byName.each(func(name string, _ *Record) { s.names = append(s.names, name) })
		slices.Sort(s.names)
	})
	return s.names
}

// Unaddressed returns, sorted, the names of the records no address
// identifies: no guest can fetch them. It runs no deferred check.
func (s *Snapshot) Unaddressed() []string {
	var names []string
	s.byName.each(func(name string, r *Record) {
		if r.unaddressed() {
			names = append(names, name)
		}
	})
	slices.Sort(names)
	return names
}

// unaddressed says no address identifies the record: a guest's request
// never finds it (only a trusted proxy's, by name).
func (r *Record) unaddressed() bool { return len(r.Addresses) == 0 }

// Len is the number of records.
func (s *Snapshot) Len() int { return s.byName.len }
