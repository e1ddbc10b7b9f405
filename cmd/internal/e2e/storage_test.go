package e2e

// Storage on real guests, the proof of spec.storage: each agent's guest boots with a
// second disk and a root disk larger than its file system, partitions,
// formats, labels and mounts the disk, activates swap and grows the root;
// a second boot of the same disks destroys nothing. The input is a spec
// per agent in testdata; the expectations below are the spec's, not the
// agent's, so the spec files may switch from hand-written agent configs to
// spec.storage without touching this file.

import (
	"testing"
	"time"

	"github.com/vminit/vminit/cmd/internal/run"
	"github.com/vminit/vminit/internal/testing/guesttest"
)

// The disks of a storage test: a sparse 1 GiB second disk (the guest's
// /dev/vdb), and 1 GiB more root disk than the image's root file system.
const (
	storageDiskSize = 1 << 30
	storageRootGrow = 1 << 30
	mib             = 1 << 20
)

// storagePart is a partition the storage specs make on /dev/vdb.
type storagePart struct {
	path, fsType, label string
	partLabel           string // the GPT partition name (Ignition sets it; cloud-init 22.4 cannot)
	partType            string // GPT type GUID, as lsblk prints it
	mount               string // the mount point; "[SWAP]" for swap
	sizeMiB             int64  // nominal size; 0 for the rest of the disk
}

// GPT partition type GUIDs.
const (
	linuxFSType = "0fc63daf-8483-4772-8e79-3d69d8477de4"
	swapType    = "0657fd6d-a4ab-43c4-84e5-0933c84b4f4f"
)

// storageLayout is what both testdata/storage-*.yaml make of the second disk.
var storageLayout = []storagePart{
	{"/dev/vdb1", "ext4", "data", "data", linuxFSType, "/srv/data", 256},
	{"/dev/vdb2", "swap", "swap", "swap", swapType, "[SWAP]", 64},
	{"/dev/vdb3", "xfs", "logs", "logs", linuxFSType, "/mnt/logs", 320},
	{"/dev/vdb4", "btrfs", "scratch", "scratch", linuxFSType, "/mnt/scratch", 192},
	{"/dev/vdb5", "vfat", "SHARED", "shared", linuxFSType, "/mnt/shared", 0},
}

// storagePackages are what the guests need for storage
// (scripts/install-test-guests.sh, docs/guests.md).
var storagePackages = []string{"gdisk", "fdisk", "cloud-guest-utils", "xfsprogs", "btrfs-progs", "dosfstools"}

// The marker the specs' first-boot command writes on the data file system.
const (
	storageMarker        = "/srv/data/marker"
	storageMarkerContent = "written on the first boot\n"
)

// storageGuest is how each agent's guest boots for the storage test.
type storageGuest struct {
	agent string
	spec  string
	// root is the root partition and the disk space before it (the
	// cloud-init guest's FAT /boot; a GPT's first MiB).
	root       string
	rootOffset int64
	partLabels bool // whether the agent names GPT partitions
	options    func(im *guesttest.Images, firstBoot bool) run.Options
}

var storageGuests = []storageGuest{
	{
		agent: "cloud-init", spec: "testdata/storage-cloudinit.yaml",
		root: "/dev/vda2", rootOffset: 65 * mib,
		options: func(im *guesttest.Images, _ bool) run.Options {
			return run.Options{Image: im.CloudInitDisk, Kernel: im.Kernel, Initrd: im.Initrd, Append: guesttest.CloudInitAppend}
		},
	},
	{
		agent: "ignition", spec: "testdata/storage-ignition.yaml",
		root: "/dev/vda1", rootOffset: 1 * mib, partLabels: true,
		options: func(im *guesttest.Images, firstBoot bool) run.Options {
			return run.Options{Image: im.IgnitionDisk, Kernel: im.Kernel, Initrd: im.IgnitionInitrd,
				Append: guesttest.IgnitionAppend("qemu", firstBoot, false)}
		},
	},
}

// TestGuestStorage boots each agent's guest twice on the same disks: the
// first boot makes the spec's storage, the second finds it as it was.
func TestGuestStorage(t *testing.T) {
	im := guesttest.Find(t)
	im.RequirePackages(t, storagePackages...)
	t.Parallel()
	for _, g := range storageGuests {
		t.Run(g.agent, func(t *testing.T) {
			t.Parallel()
			disks := guesttest.Disks(t, 1, storageDiskSize)
			overlay := guesttest.GrownOverlay(t, g.options(im, true).Image, storageRootGrow)
			boot := func(firstBoot bool) (*run.Result, *guesttest.Report) {
				o := g.options(im, firstBoot)
				o.Instance, o.Disks, o.Overlay = loadGuestSpec(t, g.spec), disks, overlay
				start := time.Now()
				res, rep := bootGuest(t, o, firstBoot)
				t.Logf("%s boot %d: %s to power-off", g.agent, rep.Boot(), time.Since(start).Round(100*time.Millisecond))
				return res, rep
			}
			res, first := boot(true)
			checkStorage(t, g, res, first, nil)
			if t.Failed() {
				return
			}
			_, second := boot(false)
			checkStorage(t, g, nil, second, first)
		})
	}
}

// checkStorage checks a boot's report against storageLayout and the grown
// root; given the first boot's report, it wants every file system there
// still (the same UUIDs) and the first boot's marker on the data one.
func checkStorage(t *testing.T, g storageGuest, res *run.Result, rep, first *guesttest.Report) {
	t.Helper()
	boot := 1
	if first != nil {
		boot = 2
	}
	c := startCheck(t, res, rep, g.agent, boot)
	defer c.done()
	if _, err := rep.BlockDevices(); err != nil {
		c.errorf("%v", err)
		return
	}
	disk, _ := rep.BlockDevice("/dev/vdb")
	if disk.PTType != "gpt" || disk.Size != storageDiskSize || len(disk.Children) != len(storageLayout) {
		c.errorf("/dev/vdb: table %q, %d bytes, %d partitions; want gpt, %d bytes, %d partitions", disk.PTType, disk.Size, len(disk.Children), storageDiskSize, len(storageLayout))
	}
	for _, want := range storageLayout {
		c.partition(want, g.partLabels)
		if first != nil {
			was, _ := first.BlockDevice(want.path)
			if got, _ := rep.BlockDevice(want.path); got.UUID != was.UUID {
				c.errorf("%s: file system UUID %q, was %q on the first boot: reformatted", want.path, got.UUID, was.UUID)
			}
		}
	}
	swaps := rep.Swaps()
	if len(swaps) != 1 || swaps[0].Name != "/dev/vdb2" || swaps[0].Type != "partition" {
		c.errorf("active swap %+v, want /dev/vdb2 alone", swaps)
	}
	c.file(storageMarker, "644", "root", "root", storageMarkerContent)
	c.grownRoot(g)
}

// partition wants want's partition, file system, label and mount.
func (c *guestCheck) partition(want storagePart, partLabels bool) {
	got, ok := c.rep.BlockDevice(want.path)
	if !ok {
		c.errorf("%s: missing", want.path)
		return
	}
	if got.FSType != want.fsType || got.Label != want.label || got.MountPoint != want.mount || got.PartType != want.partType {
		c.errorf("%s: %s %q mounted on %q, type %s; want %s %q on %q, type %s", want.path, got.FSType, got.Label, got.MountPoint, got.PartType, want.fsType, want.label, want.mount, want.partType)
	}
	if partLabels && got.PartLabel != want.partLabel {
		c.errorf("%s: partition name %q, want %q", want.path, got.PartLabel, want.partLabel)
	}
	// cloud-init sizes partitions in percent of the disk: within 5%.
	if n := want.sizeMiB * mib; n != 0 && (got.Size < n*95/100 || got.Size > n*105/100) {
		c.errorf("%s: %d MiB, want %d MiB", want.path, got.Size/mib, want.sizeMiB)
	}
}

// grownRoot wants the root partition to reach the end of its disk, and its
// file system to be larger than the image's (3 GiB, on a partition of 3 GiB).
func (c *guestCheck) grownRoot(g storageGuest) {
	disk, _ := c.rep.BlockDevice("/dev/vda")
	root, ok := c.rep.BlockDevice(g.root)
	if !ok || root.MountPoint != "/" {
		c.errorf("root %s: %+v, want it mounted on /", g.root, root)
		return
	}
	// The rest: a GPT's backup table, alignment.
	if free := disk.Size - g.rootOffset - root.Size; free > 2*mib {
		c.errorf("root %s: %d MiB on a disk of %d MiB, %d MiB of it left free: not grown", g.root, root.Size/mib, disk.Size/mib, free/mib)
	}
	if root.FSSize <= 3<<30 {
		c.errorf("root file system: %d MiB, want more than the image's 3 GiB: not grown", root.FSSize/mib)
	}
}
