// Package e2e holds vminit's end-to-end tests and nothing else: a spec, or
// a platform's own objects (KubeVirt, Virtlet, oVirt, Cluster API), goes
// through the real pipeline (the vminit command, seed, media), a real Linux
// kernel under QEMU mounts the images with its own isofs and vfat drivers,
// and the consumers read what was built: cloud-init 22.4's own datasource
// code and modules, ignition-validate and the ignition binary, a POSIX
// shell running the first-boot commands.
package e2e
