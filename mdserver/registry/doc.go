// Package registry holds the instances a metadata server serves, and is
// all a store needs to import:
//
//   - Record: one instance (its validated spec, the source addresses that
//     identify it, a revision), decoded from a spec document by
//     DecodeDocument; Key names one version of it.
//   - Snapshot: an immutable index of records by name and address, swapped
//     in atomically on every change, so requests never take a lock.
//   - Source and Store: what the guest handler needs of a store (the
//     current snapshot) and what the admin API needs (also Put and
//     Delete). StaticStore is a fixed set of records.
//   - Index: the bookkeeping every store of keyed documents shares (files,
//     etcd keys, Kubernetes objects): the conflict rule between instances,
//     versions refused for now and retried, problems logged once, and the
//     snapshot published.
//
// The stores (dirstore, etcdstore) import this package alone; the guest
// handler (package mdserver) and the admin API (package admin) read from
// them through it.
package registry
