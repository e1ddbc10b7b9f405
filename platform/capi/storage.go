package capi

import (
	"strconv"
	"strings"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/vminit/vminit/spec"
)

// specStorage is a cloud-config diskSetup as spec.storage, when all of it
// fits: GPT tables (the spec writes no MBR) laid out in percent with
// Linux or LinuxSwap partitions, and filesystems of the spec's formats on
// a device path (not a cloud-init alias such as ephemeral0.1), without
// replaceFS, on a partition number, the whole device, or cloud-init's
// search where it can only find one device (a disk of diskSetup with one
// partition, or a disk it does not partition). Otherwise ok is false and
// diskSetup stays cloud-init's own keys, as CABPK writes them: one
// diskSetup is never split between the two.
//
// What it keeps of CABPK's delivery, as cloud-init 22.4 runs both: the
// same partitions (the last takes the rest of the disk in both), the same
// filesystems, labels and mkfs options, overwrite as wipeTable and
// wipeFilesystem (partition none, which cloud-init always formats, as
// wipeFilesystem). What the spec's rendering adds: fs_setup names a
// partition's node with partition "any", so a partition holding another
// filesystem is left alone where CABPK's "N" formats it.
func specStorage(ds bootstrapv1.DiskSetup) (st *spec.Storage, ok bool) {
	st = &spec.Storage{}
	parts := map[string]int{} // device → its number of partitions
	for _, p := range ds.Partitions {
		d, ok := specDisk(p)
		if !ok {
			return nil, false
		}
		parts[p.Device] = len(d.Partitions)
		if len(d.Partitions) > 0 {
			st.Disks = append(st.Disks, d)
		}
	}
	for _, f := range ds.Filesystems {
		fs, ok := specFilesystem(f, parts)
		if !ok {
			return nil, false
		}
		st.Filesystems = append(st.Filesystems, fs)
	}
	return st, true
}

// specDisk is one diskSetup partition table as a spec disk; no partitions
// for a layout of false (cloud-init leaves such a disk alone).
func specDisk(p bootstrapv1.Partition) (spec.Disk, bool) {
	d := spec.Disk{Device: p.Device, WipeTable: p.Overwrite != nil && *p.Overwrite}
	switch {
	case !strings.HasPrefix(p.Device, "/dev/"):
		return d, false
	case len(p.DiskLayout) == 0 && (p.Layout == nil || !*p.Layout):
		return d, true
	case p.TableType != "gpt":
		return d, false
	case len(p.DiskLayout) == 0:
		d.Partitions = []spec.Partition{{}} // layout: true, one partition
		return d, true
	}
	for i, l := range p.DiskLayout {
		t, ok := map[string]string{"": "", bootstrapv1.PartitionTypeLinux: "linux", bootstrapv1.PartitionTypeLinuxSwap: "swap"}[l.PartitionType]
		if !ok || l.Percentage < 1 || l.Percentage > 100 {
			return d, false
		}
		sp := spec.Partition{Type: t}
		if i < len(p.DiskLayout)-1 {
			// cloud-init gives the last partition the rest, whatever its
			// percentage.
			sp.Size = strconv.Itoa(int(l.Percentage)) + "%"
		}
		d.Partitions = append(d.Partitions, sp)
	}
	return d, true
}

// specFilesystem is one diskSetup filesystem as a spec filesystem; parts
// are the partitions diskSetup makes on each device.
func specFilesystem(f bootstrapv1.Filesystem, parts map[string]int) (spec.Filesystem, bool) {
	fs := spec.Filesystem{Device: f.Device, Format: f.Filesystem, Label: f.Label, Options: f.ExtraOpts,
		WipeFilesystem: f.Overwrite != nil && *f.Overwrite}
	if _, known := map[string]bool{spec.FormatExt4: true, spec.FormatXFS: true, spec.FormatVFAT: true, spec.FormatBtrfs: true, spec.FormatSwap: true}[f.Filesystem]; !known ||
		!strings.HasPrefix(f.Device, "/dev/") || f.ReplaceFS != "" {
		return fs, false
	}
	switch n, err := strconv.Atoi(f.Partition); {
	case err == nil && n >= 1:
		fs.Partition = n
	case f.Partition == "none":
		fs.WipeFilesystem = true // cloud-init formats the device whatever it holds
	case f.Partition == "" || f.Partition == "any" || f.Partition == "auto":
		switch parts[f.Device] {
		case 0: // the whole device, searched as the spec's rendering does
		case 1:
			fs.Partition = 1 // the one partition, the one device the search finds
		default:
			return fs, false
		}
	default:
		return fs, false
	}
	return fs, true
}
