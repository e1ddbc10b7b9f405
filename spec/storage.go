package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// Storage is what the guest's disks hold on first boot: partition tables,
// filesystems, the root grown, swap. One model renders to both agents
// (cloud-init's disk_setup, fs_setup, growpart, resize_rootfs and swap;
// Ignition's storage.disks and storage.filesystems); what one agent cannot
// express is that renderer's error naming the field. Filesystems are
// mounted with spec.mounts, by LABEL=.
type Storage struct {
	// +kubebuilder:validation:MaxItems=10000
	Disks []Disk `yaml:"disks,omitempty" json:"disks,omitempty"`
	// +kubebuilder:validation:MaxItems=10000
	Filesystems []Filesystem `yaml:"filesystems,omitempty" json:"filesystems,omitempty"`
	// GrowRoot grows the root partition and filesystem to fill its disk
	// (true) or leaves them as the image has them (false). Unset leaves
	// it to the image, and both agents' images grow the root by default.
	GrowRoot *bool `yaml:"growRoot,omitempty" json:"growRoot,omitempty"`
	// Swap is a swap file. A swap partition is a filesystems entry of
	// format swap.
	Swap *SwapFile `yaml:"swap,omitempty" json:"swap,omitempty"`
}

// Disk is a disk's GPT partition table.
type Disk struct {
	// Device is the disk: /dev/vdb, /dev/disk/by-id/…, /dev/disk/by-path/….
	Device string `yaml:"device" json:"device"`
	// WipeTable replaces the disk's partition table, whatever it holds.
	// The default keeps a table that already has the partitions asked for,
	// and refuses to touch a disk that holds anything else.
	WipeTable bool `yaml:"wipeTable,omitempty" json:"wipeTable,omitempty"`
	// +kubebuilder:validation:MaxItems=128
	Partitions []Partition `yaml:"partitions,omitempty" json:"partitions,omitempty"`
}

// Partition is one GPT partition.
type Partition struct {
	// Number is the partition's number, 1–128; defaults to its place in
	// the list (the first is 1).
	Number int `yaml:"number,omitempty" json:"number,omitempty"`
	// Label is the GPT partition name (/dev/disk/by-partlabel/…).
	Label string `yaml:"label,omitempty" json:"label,omitempty"`
	// Size is "512MiB", "20GiB", "1TiB" or a share of the disk such as
	// "25%"; empty, or "rest", takes what is left (the last partition
	// only).
	Size string `yaml:"size,omitempty" json:"size,omitempty"`
	// Type is a GPT partition type GUID or one of the names linux (the
	// default), swap, esp, lvm and raid.
	Type string `yaml:"type,omitempty" json:"type,omitempty"`
}

// Filesystem is a filesystem made on a disk or a partition.
type Filesystem struct {
	// Device is the disk or partition device; with Partition, the disk.
	Device string `yaml:"device" json:"device"`
	// Partition, when not 0, is the number of the partition of Device to
	// format (PartitionDevice names it).
	Partition int `yaml:"partition,omitempty" json:"partition,omitempty"`
	// Format is ext4, xfs, vfat, btrfs or swap.
	// +kubebuilder:validation:Enum=ext4;xfs;vfat;btrfs;swap
	Format string `yaml:"format" json:"format"`
	// Label is the filesystem label, which spec.mounts name with LABEL=.
	Label string `yaml:"label,omitempty" json:"label,omitempty"`
	// Options are extra arguments to mkfs.
	// +kubebuilder:validation:MaxItems=10000
	Options []string `yaml:"options,omitempty" json:"options,omitempty"`
	// WipeFilesystem formats the device whatever it holds. The default
	// never destroys data: an existing filesystem of the same format is
	// kept, and a device holding anything else is left alone.
	WipeFilesystem bool `yaml:"wipeFilesystem,omitempty" json:"wipeFilesystem,omitempty"`
}

// SwapFile is a swap file created and enabled on first boot.
type SwapFile struct {
	// Path is the absolute path of the file.
	Path string `yaml:"path" json:"path"`
	// Size is "512MiB", "2GiB"…
	Size string `yaml:"size" json:"size"`
}

// The filesystem formats spec.storage.filesystems[].format takes.
const (
	FormatExt4  = "ext4"
	FormatXFS   = "xfs"
	FormatVFAT  = "vfat"
	FormatBtrfs = "btrfs"
	FormatSwap  = "swap"
)

// labelLimit is a format's longest label, in bytes (the mkfs tools'
// limits, which Ignition's validator enforces too); false for a format
// the spec does not know. A switch, not a map: package-level maps cost
// every process an allocation at init (cmd/vminit TestInitIsLazy).
func labelLimit(format string) (int, bool) {
	switch format {
	case FormatExt4:
		return 16, true
	case FormatXFS:
		return 12, true
	case FormatVFAT:
		return 11, true
	case FormatBtrfs:
		return 255, true
	case FormatSwap:
		return 15, true
	}
	return 0, false
}

// PartitionType is a GPT partition type a spec may name.
type PartitionType struct {
	// GUID is the type's GUID, upper case.
	GUID string
	// Code is the sgdisk type code cloud-init's disk_setup takes as an
	// integer (83 for 8300); 0 when the code is not a number (ef00), which
	// disk_setup's schema cannot carry.
	Code int
}

// partitionTypes are the names partitions[].type may use for a GUID (a
// slice, statically laid out, rather than a map built at init).
var partitionTypes = []struct {
	name string
	PartitionType
}{
	{"linux", PartitionType{GUID: "0FC63DAF-8483-4772-8E79-3D69D8477DE4", Code: 83}},
	{"swap", PartitionType{GUID: "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F", Code: 82}},
	{"esp", PartitionType{GUID: "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"}},
	{"lvm", PartitionType{GUID: "E6D6D379-F507-44C2-A23C-238F2A3DF928"}},
	{"raid", PartitionType{GUID: "A19D880F-05FC-4D3B-A006-743F0F84911E"}},
}

// DefaultPartitionType is a partition's type when partitions[].type is
// unset.
const DefaultPartitionType = "linux"

// LookupPartitionType resolves a partitions[].type: a name of
// partitionTypes (linux, swap, esp, lvm, raid) or a GUID (any case), as a
// PartitionType with the GUID in upper case (and the Code of a GUID that
// has a name).
func LookupPartitionType(s string) (PartitionType, bool) {
	for _, t := range partitionTypes {
		if t.name == s {
			return t.PartitionType, true
		}
	}
	if !guidRE.MatchString(s) {
		return PartitionType{}, false
	}
	g := strings.ToUpper(s)
	for _, t := range partitionTypes {
		if t.GUID == g {
			return t.PartitionType, true
		}
	}
	return PartitionType{GUID: g}, true
}

// Size is a parsed partitions[].size or swap.size: MiB, or Percent of the
// disk, or neither (the rest of the disk).
type Size struct {
	MiB     int64
	Percent int
}

// Rest reports whether the size is what is left of the disk.
func (s Size) Rest() bool { return s.MiB == 0 && s.Percent == 0 }

// sizeUnits are the units a size is written in, in MiB. Only binary units:
// "G" means GB to some tools and GiB to others.
var sizeUnits = []struct {
	suffix string
	mib    int64
}{{"MiB", 1}, {"GiB", 1 << 10}, {"TiB", 1 << 20}}

// maxSizeMiB bounds a size (1 EiB), far past any disk, so that sums and
// byte counts cannot overflow.
const maxSizeMiB = 1 << 40

// ParseSize parses "512MiB", "20GiB", "1TiB", "25%", or "" and "rest"
// (the rest of the disk).
func ParseSize(s string) (Size, error) {
	if s == "" || s == "rest" {
		return Size{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 || p[0] == '+' {
			return Size{}, fmt.Errorf("%q: a share of the disk is a whole percentage from 1%% to 100%%", s)
		}
		return Size{Percent: n}, nil
	}
	for _, u := range sizeUnits {
		if p, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(p, 10, 64)
			if err != nil || n < 1 || p[0] == '+' || n > maxSizeMiB/u.mib {
				break
			}
			return Size{MiB: n * u.mib}, nil
		}
	}
	return Size{}, fmt.Errorf("%q is not a size: want a whole number of MiB, GiB or TiB (\"512MiB\", \"20GiB\"), a share of the disk (\"25%%\"), or \"rest\"", s)
}

// PartitionDevice is the device node of partition n of disk, as udev and
// the kernel name it: disk-partN for a udev link under /dev/disk
// (by-id, by-path, and the clouds' own, such as Azure's
// /dev/disk/azure/scsi1/lun0), diskpN when the disk's name ends in a digit
// (nvme0n1p1, mmcblk0p1), else diskN (vdb1).
func PartitionDevice(disk string, n int) string {
	switch {
	case strings.HasPrefix(disk, "/dev/disk/"):
		return disk + "-part" + strconv.Itoa(n)
	case disk != "" && disk[len(disk)-1] >= '0' && disk[len(disk)-1] <= '9':
		return disk + "p" + strconv.Itoa(n)
	}
	return disk + strconv.Itoa(n)
}

// DevicePath is the device node the filesystem is made on: Device, or
// its partition.
func (f *Filesystem) DevicePath() string {
	if f.Partition == 0 {
		return f.Device
	}
	return PartitionDevice(f.Device, f.Partition)
}

// SwapDevice is what a swap filesystem is enabled by: LABEL=… when it has
// a label (which outlives a renamed device), else its device node.
func (f *Filesystem) SwapDevice() string {
	if f.Label != "" {
		return "LABEL=" + f.Label
	}
	return f.DevicePath()
}

// defaultStorage fills in each partition's number (its place) and type.
func (st *Storage) defaultStorage() {
	for i := range st.Disks {
		for j := range st.Disks[i].Partitions {
			p := &st.Disks[i].Partitions[j]
			if p.Number == 0 {
				p.Number = j + 1
			}
			if p.Type == "" {
				p.Type = DefaultPartitionType
			}
		}
	}
}
