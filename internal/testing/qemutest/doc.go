// Package qemutest checks vminit's seed media against the consumer that
// matters most: a real Linux kernel. It boots Debian's 6.1 kernel under
// qemu-system-x86_64 (TCG, or KVM when /dev/kvm is usable), has the kernel's
// own isofs and vfat drivers mount our images, and reads fw_cfg blobs from
// /sys/firmware/qemu_fw_cfg, exactly as a booting cloud VM does. Userspace
// readers (xorriso, mtools, our own parsers) forgive things the kernel does
// not, and the host kernel here cannot mount iso9660 or vfat, hence a VM.
//
// The common cases are one call, one boot:
//
//	fss := qemutest.DumpFS(t, "seed.iso", qemutest.ISO9660, qemutest.Joliet)
//	data := fss[0].Files["user-data"].Data      // Rock Ridge view
//	_, ok := fss[1].Files["network-config"]       // Joliet view
//	blob := qemutest.ReadFwCfg(t, "opt/com.coreos/config", "config.ign")
//
// Inspect does several images, views and fw_cfg blobs in a single boot (each
// boot costs a few seconds of emulation, so tests should combine checks), and
// Run boots a Machine with a custom guest script.
//
// # The guest
//
// The initramfs is built at test time: a static busybox, the kernel modules
// installed by scripts/install-test-kernel.sh (in VMINIT_TEST_KERNEL_DIR,
// default /var/cache/vminit-test-kernel), and an /init that mounts /proc,
// /sys and devtmpfs, loads the modules in dependency order, runs the test's
// script and powers off. The kernel console is ttyS0 (Result.Console); the
// script's results travel on ttyS1 as framed, base64-encoded records that
// carry a per-boot random marker, so kernel messages never mix with them.
//
// CD-ROMs are virtio-scsi CD drives (sr_mod, 2048-byte sectors, as a cloud
// seed CD); disks are virtio-blk. Both are attached read-only. The guest has
// no network.
//
// A Machine.Script is busybox sh with these helpers:
//
//	qt_cdrom N                  print the /dev node of Machine.CDROMs[N]
//	qt_disk N                   print the /dev node of Machine.Disks[N]
//	qt_emit KIND NAME [F...]    emit stdin as a Record
//	qt_emit_file FILE KIND NAME [F...]
//	qt_dumpfs TAG DIR           emit an "entry" record per file below DIR
//	qt_mountdump TAG DEV FSTYPE OPTS   mount, "mount" record, dumpfs, umount, "dmesg" record
//	qt_error MSG                report a failure (Run returns an error)
//
// # Requirements
//
// qemu-system-x86_64 (Debian's qemu-system-x86 without recommends is
// enough: it depends on seabios and ipxe-qemu), a statically linked
// /bin/busybox (busybox-static) and the test kernel. When one is missing the
// test is skipped, or failed under CI=true (see package testtools).
//
// Each boot is bounded by Machine.Timeout (DefaultTimeout), its serial output
// by MaxOutput, and QEMU is killed on timeout and at test cleanup. Everything
// is written under t.TempDir().
package qemutest
