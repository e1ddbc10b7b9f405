// Package e2e holds vminit's end-to-end tests and nothing else: a spec, or
// a platform's own objects (KubeVirt, Virtlet, oVirt, Cluster API), goes
// through the real pipeline (the vminit command, seed, media), a real Linux
// kernel under QEMU mounts the images with its own isofs and vfat drivers,
// and the consumers read what was built: cloud-init 22.4's own datasource
// code and modules, ignition-validate and the ignition binary, a POSIX
// shell running the first-boot commands. A KubeVirt guest's way to the
// metadata server is proven the same way without a kernel of its own
// (kubevirt_node_test.go): the node agent on a simulated KubeVirt node
// (internal/testing/netsim) and a real API server, the guests' clients
// run in their network namespaces.
//
// It stands under cmd/internal, beside the applications it drives (cli,
// run, controller), since Go's internal rule lets only cmd/ import them.
package e2e
