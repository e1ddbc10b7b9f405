package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/vminit/vminit/internal/lib/qemu"
	"github.com/vminit/vminit/spec"
)

// MaxDisks bounds Options.Disks: each takes a PCI slot of its own
// (firstDiskSlot onwards).
const MaxDisks = 8

// firstDiskSlot is the PCI slot of the first extra disk. The slots are
// fixed, and above those QEMU gives the image, the seed and the NICs, so
// that the guest finds the extra disks after the image, in order: /dev/vdb,
// /dev/vdc… (after the seed, /dev/vdb, with --media vfat), and always as
// /dev/disk/by-id/virtio-vminit-disk1, -disk2….
const firstDiskSlot = 0x18

// extraDisk is an extra disk as QEMU attaches it.
type extraDisk struct {
	path   string
	format string
}

// configureDisks checks Options.Disks: each is a size (spec.ParseSize's
// MiB, GiB or TiB) or a file, which checkDisks checks.
func (c *config) configureDisks(bad func(format string, a ...any)) {
	if len(c.Disks) > MaxDisks {
		bad("disk: %d extra disks; at most %d", len(c.Disks), MaxDisks)
	}
	for _, d := range c.Disks {
		if d == "" {
			bad("disk: empty: want a size such as 10GiB or a disk image file")
		}
	}
}

// diskSize is a --disk SIZE in bytes, or 0 for a FILE.
func diskSize(d string) int64 {
	sz, err := spec.ParseSize(d)
	if err != nil || sz.MiB == 0 {
		return 0
	}
	return sz.MiB << 20
}

// prepareDisks creates each --disk SIZE as a sparse raw file in dir (the
// run's temporary directory, removed with it) and checks each --disk
// FILE: a regular file, attached as qcow2 when it has a qcow2 header
// (its chain checked as the image's is) and as raw otherwise, so that
// QEMU never probes what a guest wrote. The guest writes a FILE.
func (c *config) prepareDisks(ctx context.Context, dir string) ([]extraDisk, error) {
	var out []extraDisk
	for i, d := range c.Disks {
		if n := diskSize(d); n > 0 {
			p := filepath.Join(dir, "disk"+strconv.Itoa(i+1)+".raw")
			if err := sparseFile(p, n); err != nil {
				return nil, fmt.Errorf("run: --disk %s: %w", d, err)
			}
			out = append(out, extraDisk{p, qemu.Raw})
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("run: --disk %s: %w", d, err)
		}
		if abs == c.Image || abs == c.Overlay {
			return nil, fmt.Errorf("run: --disk %s is the image or its overlay, which the guest boots from", d)
		}
		if _, err := os.Stat(abs); os.IsNotExist(err) {
			return nil, fmt.Errorf("run: --disk %s: no such file (a size is written like 10GiB or 512MiB)", d)
		}
		format := qemu.Raw
		if img, err := qemu.DetectImage(abs, ""); err == nil && img.Format == qemu.QCOW2 {
			format = qemu.QCOW2
			if err := checkImage(ctx, abs, format, c.AllowBackingFiles); err != nil {
				return nil, fmt.Errorf("run: --disk %w", err)
			}
		} else if _, err := qemu.DetectImage(abs, qemu.Raw); err != nil {
			return nil, fmt.Errorf("run: --disk %w", err) // not a regular file
		}
		out = append(out, extraDisk{abs, format})
	}
	return out, nil
}

// sparseFile creates a file of n bytes that takes no space until written.
func sparseFile(p string, n int64) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// diskArgs are QEMU's arguments for the extra disks.
func diskArgs(disks []extraDisk) []string {
	var a []string
	for i, d := range disks {
		id := "disk" + strconv.Itoa(i+1)
		a = append(a,
			"-drive", "if=none,id="+id+",file="+qemu.Escape(d.path)+",format="+d.format,
			"-device", fmt.Sprintf("virtio-blk-pci,drive=%s,serial=vminit-%s,addr=0x%x", id, id, firstDiskSlot+i))
	}
	return a
}
