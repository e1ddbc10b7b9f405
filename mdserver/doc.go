// Package mdserver is vminit's metadata server: one http.Handler that
// serves every instance's first-boot data in the dialects guests already
// speak (EC2 IMDS v1 and v2, OpenStack, NoCloud-net, Ignition), from the
// same instance record the seeds are built from.
//
// A request is answered only with the data of the instance that owns its
// source address (or, behind a trusted proxy, the instance named by a
// signed header), so a VM can never read another VM's data. Records come
// from a Store: a directory of spec files by default, or etcd for fleets.
package mdserver
