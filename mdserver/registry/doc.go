// Package registry holds the instances a metadata server serves, and is
// all a store needs to import:
//
//   - Record: one instance (its validated spec, the source addresses that
//     identify it, a revision, the UID of its incarnation), decoded from a
//     spec document by DecodeDocument, or holding the document until it
//     is asked for (Index.DecodeDeferred: what an idle fleet holds); Key
//     names one version of it.
//   - Snapshot: an immutable index of records by name and address, swapped
//     in atomically on every change, so requests never take a lock.
//   - Source and Store: what the guest handler needs of a store (the
//     current snapshot) and what the admin API needs (also Put and
//     Delete). StaticStore is a fixed set of records.
//   - Index: the bookkeeping every store of keyed documents shares (files,
//     etcd keys, Kubernetes objects): the server's Checks on every
//     document (Index.Decode), the conflict rule between instances,
//     versions refused for now and retried, problems logged once, UIDs,
//     and the snapshot published.
//
// The stores (dirstore, etcdstore, kubestore) import this package and
// spec and nothing else of the server's (kubestore also the Instance types
// of kube/api/v1alpha1); the guest handler (package mdserver) and the
// admin API (package admin) read from them through it.
//
// # Why the persistent map is our own
//
// A snapshot's maps by name and address are persistent (hamt.go), so that
// one change costs O(changed) and a published snapshot is never modified.
// The library made for that job, github.com/hashicorp/go-immutable-radix/v2
// (v2.1.0), was put in its place and measured on the same benchmarks: it
// allocates a watch channel for every node and every leaf, which nothing
// here uses and no option turns off, so the two maps took 765 B an
// instance against 172 B (76.5 MB against 17.1 MB at 100,000 instances;
// the start that writes the start-up cache peaked at 1.0 GiB against
// 0.86-0.90), and one change took 1.2-1.7 times as long
// (docs/benchmarks.md, "Instance stores"). The hash trie here is the
// smallest thing that does the job; TestHamt holds it to a Go map and
// checks that earlier versions never change.
package registry
