// Package e2e holds vminit's end-to-end tests and nothing else: a spec goes
// through the real pipeline (spec → seed → media), a real Linux kernel under
// QEMU mounts the images with its own isofs and vfat drivers, and cloud-init
// 22.4's own datasource code reads what the kernel saw.
package e2e
