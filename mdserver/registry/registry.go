package registry

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"github.com/vminit/vminit/spec"
)

// Record is one instance as the server knows it: its loaded, defaulted
// and validated spec, and the source addresses that identify it.
type Record struct {
	// Name is the instance's metadata.name, unique in a Snapshot.
	Name string
	// Instance is the spec; never modified once in a Snapshot.
	Instance *spec.Instance
	// Addresses come from Instance.Spec.MetadataServer.Addresses, unmapped
	// (an IPv4-mapped IPv6 address is stored as IPv4).
	Addresses []netip.Addr
	// Revision changes whenever the record's content changes (a content
	// hash or a store revision); caches of rendered data key on it.
	Revision string
}

// NewRecord builds a Record from a valid instance.
func NewRecord(inst *spec.Instance, revision string) (*Record, error) {
	r := &Record{Name: inst.Metadata.Name, Instance: inst, Revision: revision}
	if ms := inst.Spec.MetadataServer; ms != nil {
		for _, a := range ms.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.Name, err)
			}
			r.Addresses = append(r.Addresses, ip.Unmap())
		}
	}
	return r, nil
}

// ErrAddressConflict is returned when two records claim one address.
var ErrAddressConflict = errors.New("address claimed by two instances")

// ErrNotFound is returned for an instance name a store does not hold.
var ErrNotFound = errors.New("instance not found")

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

// Names returns every instance name, sorted.
func (s *Snapshot) Names() []string { return s.names }

// Len is the number of records.
func (s *Snapshot) Len() int { return len(s.names) }

// Source is what serving needs of a store: the current snapshot. The
// guest handler (mdserver.NewHandler) reads through one.
type Source interface {
	// Snapshot returns the current index. It is cheap (an atomic load),
	// never nil, and keeps being served when the backend is unreachable.
	Snapshot() *Snapshot
}

// Store is what the admin API needs of a store: a Source that also
// stores and removes instances. Implementations: dirstore (a directory of
// spec files, the default), etcdstore (for fleets of servers sharing one
// etcd) and StaticStore (read-only). The stores that watch a backend also
// have a Close method that stops watching.
type Store interface {
	Source
	// Put validates a spec document and stores it under its
	// metadata.name, replacing any previous version. Invalid documents are
	// refused with spec.Errors.
	Put(ctx context.Context, doc []byte) (*Record, error)
	// Delete removes an instance; ErrNotFound if it is absent.
	Delete(ctx context.Context, name string) error
}
