package registry

import (
	"context"
	"errors"
)

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
// etcd), kubestore (a cluster's Instance objects) and StaticStore
// (read-only). The stores that watch a backend also
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

// Reloader is implemented by stores that can rescan their backend on
// demand (vminit serve calls it on SIGHUP; dirstore.Store does). Reload
// swaps in the new snapshot atomically, so requests in flight are not
// dropped.
type Reloader interface {
	Reload() error
}

// The errors stores return; the admin API maps them to HTTP statuses.
var (
	// ErrNotFound is returned for an instance name a store does not hold.
	ErrNotFound = errors.New("instance not found")
	// ErrAddressConflict is returned when two records claim one address.
	ErrAddressConflict = errors.New("address claimed by two instances")
	// ErrConflict is returned when a document would take an instance
	// name another source holds (another file defines the instance).
	ErrConflict = errors.New("conflicting instance")
	// ErrUnavailable is returned by a store's Put and Delete when its
	// backend cannot be reached; the snapshot keeps being served.
	ErrUnavailable = errors.New("store backend unavailable")
)
