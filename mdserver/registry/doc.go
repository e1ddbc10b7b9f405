// Package registry holds the instances a metadata server serves: the
// Record of each instance (its validated spec, the source addresses that
// identify it, a revision), immutable Snapshots that index them by name
// and address, and the interfaces a store implements. The stores
// (dirstore, etcdstore) import this package alone; the guest handler
// (package mdserver) and the admin API read from them through it.
package registry
