package ignition

import (
	"encoding/json"
	"fmt"

	types "github.com/coreos/ignition/v2/config/v3_0/types"
	t32 "github.com/coreos/ignition/v2/config/v3_2/types"

	"github.com/vminit/vminit/internal/lib/systemd"
	"github.com/vminit/vminit/spec"
)

// The root partition of Fedora CoreOS and RHCOS, on the disk their
// initramfs links as coreos-boot-disk (the partition a config resizes in
// the distributions' own documentation).
const (
	bootDisk      = "/dev/disk/by-id/coreos-boot-disk"
	rootPartLabel = "root"
	rootPartition = 4
)

// storage renders spec.storage to storage.disks and storage.filesystems
// (spec 3.0.0), a .swap unit for each swap filesystem (the units the
// cloud-init rendering writes), and for growRoot the root partition's
// resize (spec 3.2.0, a generated child config). What Ignition cannot
// express is unsupported: percentages of a disk, a swap file, keeping
// the root from growing.
func (r *renderer) storage(cfg *types.Config) {
	st := r.inst.Spec.Storage
	if st == nil {
		return
	}
	for i, d := range st.Disks {
		if len(d.Partitions) == 0 && !d.WipeTable {
			continue // nothing to do, as in the cloud-init rendering
		}
		if disk, ok := r.disk(i, d); ok {
			cfg.Storage.Disks = append(cfg.Storage.Disks, disk)
		}
	}
	for i, fs := range st.Filesystems {
		cfg.Storage.Filesystems = append(cfg.Storage.Filesystems, types.Filesystem{
			Device:  fs.DevicePath(),
			Format:  strPtr(fs.Format),
			Label:   optStr(fs.Label),
			Options: filesystemOptions(fs.Options),
			// Written even when false, so that the config shows the rule:
			// an existing filesystem of the format is kept, anything else
			// fails the boot rather than being formatted.
			WipeFilesystem: boolPtr(fs.WipeFilesystem),
		})
		if fs.Format == spec.FormatSwap {
			dev := fs.SwapDevice()
			r.addUnit(cfg, fmt.Sprintf("spec.storage.filesystems[%d]", i), types.Unit{
				Name: systemd.SwapUnitName(dev), Contents: strPtr(systemd.SwapUnit(dev)), Enabled: boolPtr(true),
			})
		}
	}
	if st.Swap != nil {
		r.unsupported("spec.storage.swap", "Ignition makes swap only on a device, and a swap file needs mkswap on the mounted root, which no Ignition stage runs: use a swap partition (spec.storage.filesystems, format swap)")
	}
	if st.GrowRoot != nil {
		r.growRoot(*st.GrowRoot)
	}
}

// disk renders one disk; ok is false when it was dropped (AllowPartial).
func (r *renderer) disk(i int, d spec.Disk) (disk types.Disk, ok bool) {
	disk = types.Disk{Device: d.Device}
	if d.WipeTable {
		disk.WipeTable = boolPtr(true)
	}
	ok = true
	for j, p := range d.Partitions {
		sz, _ := spec.ParseSize(p.Size) // validated
		if sz.Percent > 0 {
			r.unsupported(fmt.Sprintf("spec.storage.disks[%d].partitions[%d].size", i, j), "Ignition sizes partitions in MiB, not as a share of the disk: write a size such as \"20GiB\"")
			ok = false
		}
		t, _ := spec.LookupPartitionType(p.Type) // validated
		disk.Partitions = append(disk.Partitions, types.Partition{
			Number:   p.Number,
			Label:    optStr(p.Label),
			SizeMiB:  intPtr(int(sz.MiB)), // 0: as large as possible
			TypeGUID: strPtr(t.GUID),
		})
	}
	return disk, ok
}

func filesystemOptions(opts []string) []types.FilesystemOption {
	var out []types.FilesystemOption
	for _, o := range opts {
		out = append(out, types.FilesystemOption(o))
	}
	return out
}

// growRoot renders spec.storage.growRoot. Fedora CoreOS and RHCOS grow
// the root filesystem to its partition on first boot; true makes the
// partition fill its disk first (resize, spec 3.2.0). Flatcar's
// extend-filesystems.service grows the root partition and filesystem on
// every boot, so true needs nothing there. No image lets a config keep
// the root as it is.
func (r *renderer) growRoot(grow bool) {
	const field = "spec.storage.growRoot"
	if !grow {
		r.unsupported(field, "Fedora CoreOS, RHCOS and Flatcar grow the root filesystem on first boot themselves, and an Ignition config cannot stop it")
		return
	}
	if r.opts.Variant == Flatcar {
		return
	}
	var c t32.Config
	c.Ignition.Version = "3.2.0"
	c.Storage.Disks = []t32.Disk{{Device: bootDisk, Partitions: []t32.Partition{{
		Number: rootPartition, Label: strPtr(rootPartLabel), Resize: boolPtr(true), SizeMiB: intPtr(0),
	}}}}
	raw, err := json.Marshal(c)
	if err != nil {
		r.errs.Add(field, "internal error: %v", err)
		return
	}
	r.generated = append(r.generated, child{field, raw})
}
