// Package mdserver is the guest side of vminit's metadata server: one
// http.Handler that serves every instance's first-boot data in the
// dialects guests already speak (EC2 IMDS v1 and v2, OpenStack,
// NoCloud-net, Ignition), rendered from the same spec the seeds are built
// from.
//
// A request is answered only with the data of the instance that owns its
// source address (or, behind a trusted proxy, the instance named by a
// signed header), so a VM can never read another VM's data. The handler
// reads instances through a registry.Source, one method: Snapshot. The
// stores that hold them (dirstore, etcdstore, kubestore) and the admin API
// that changes them (package admin) are packages of their own.
//
// Each dialect is one file of the same shape (ec2.go, openstack.go,
// nocloud.go, ignition.go): its routes, its payload rendered once per
// record revision, and its handlers. Metrics, rate limits and the audit
// log are the handler's, around every dialect.
package mdserver
