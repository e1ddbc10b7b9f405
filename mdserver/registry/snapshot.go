package registry

import (
	"fmt"
	"net/netip"
	"sort"
)

// Snapshot is an immutable index of records by name and by address.
// Stores build a new Snapshot for every change and swap it in atomically,
// so a request sees one consistent view without taking locks.
type Snapshot struct {
	byName map[string]*Record
	byAddr map[netip.Addr]*Record
	names  []string // sorted
}

// NewSnapshot indexes records. Two records with the same name or address
// are an error naming both, so a store can refuse the change and keep
// serving its previous snapshot.
func NewSnapshot(records []*Record) (*Snapshot, error) {
	s := &Snapshot{byName: make(map[string]*Record, len(records)), byAddr: make(map[netip.Addr]*Record, len(records))}
	for _, r := range records {
		if _, dup := s.byName[r.Name]; dup {
			return nil, fmt.Errorf("instance %q is defined twice", r.Name)
		}
		s.byName[r.Name] = r
		for _, a := range r.Addresses {
			if o, dup := s.byAddr[a]; dup {
				return nil, fmt.Errorf("%w: %s by %q and %q", ErrAddressConflict, a, o.Name, r.Name)
			}
			s.byAddr[a] = r
		}
		s.names = append(s.names, r.Name)
	}
	sort.Strings(s.names)
	return s, nil
}

// ByAddr returns the record that owns a source address.
func (s *Snapshot) ByAddr(a netip.Addr) (*Record, bool) {
	r, ok := s.byAddr[a.Unmap()]
	return r, ok
}

// ByName returns the record with the given name.
func (s *Snapshot) ByName(name string) (*Record, bool) {
	r, ok := s.byName[name]
	return r, ok
}

// Serves reports whether k is current: the snapshot holds its instance at
// its revision.
func (s *Snapshot) Serves(k Key) bool {
	r, ok := s.byName[k.Name]
	return ok && r.Revision == k.Revision
}

// Names returns every instance name, sorted.
func (s *Snapshot) Names() []string { return s.names }

// Len is the number of records.
func (s *Snapshot) Len() int { return len(s.names) }
