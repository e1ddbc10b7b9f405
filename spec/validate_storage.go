package spec

// The rules of spec.storage, and of the spec.mounts that name its
// filesystems.

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/vminit/vminit/internal/lib/lazyre"
)

var (
	guidRE = lazyre.New(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)
	// Labels go on mkfs and sgdisk command lines and into udev's
	// /dev/disk/by-label names: no slashes, quotes or whitespace.
	storageLabelRE = lazyre.New(`^[A-Za-z0-9_.:+-]+$`)
)

// maxPartitions is what a GPT holds by default.
const maxPartitions = 128

// validateStorage checks spec.storage, and the spec.mounts that name its
// filesystems by label.
func validateStorage(c *ErrorList, s *Spec) {
	st := s.Storage
	if st == nil {
		return
	}
	for _, l := range []struct {
		field string
		n     int
	}{{"spec.storage.disks", len(st.Disks)}, {"spec.storage.filesystems", len(st.Filesystems)}} {
		if l.n > MaxListEntries {
			c.Add(l.field, "%d entries; the limit is %d (%s)", l.n, MaxListEntries, listAdvice)
			return
		}
	}
	validateDisks(c, st.Disks)
	validateFilesystems(c, st.Filesystems)
	if sw := st.Swap; sw != nil {
		checkPath(c, "spec.storage.swap.path", sw.Path)
		checkSwapPath(c, "spec.storage.swap.path", sw.Path)
		if sz, err := ParseSize(sw.Size); err != nil || sz.MiB == 0 {
			c.Add("spec.storage.swap.size", "%q: want the file's size in MiB or GiB, such as \"2GiB\"", sw.Size)
		}
	}
	validateMountedFilesystems(c, s.Mounts, st.Filesystems)
}

func checkDevice(c *ErrorList, field, dev string) {
	switch {
	case dev == "":
		c.Add(field, "required: a device such as /dev/vdb or /dev/disk/by-id/…")
	case !strings.HasPrefix(dev, "/dev/") || path.Clean(dev) != dev || strings.ContainsAny(dev, " \t\r\n\x00"):
		c.Add(field, "%q is not a device: want a clean path under /dev such as /dev/vdb or /dev/disk/by-id/…", dev)
	}
}

func validateDisks(c *ErrorList, disks []Disk) {
	devices := map[string]int{}
	partLabels := map[string]string{}
	for i, d := range disks {
		f := fmt.Sprintf("spec.storage.disks[%d]", i)
		checkDevice(c, f+".device", d.Device)
		if j, dup := devices[d.Device]; dup && d.Device != "" {
			c.Add(f+".device", "%q is already partitioned by spec.storage.disks[%d]", d.Device, j)
		} else {
			devices[d.Device] = i
		}
		if len(d.Partitions) > maxPartitions {
			c.Add(f+".partitions", "%d partitions; a GPT holds %d", len(d.Partitions), maxPartitions)
			continue
		}
		validatePartitions(c, f, d.Partitions, partLabels)
	}
}

func validatePartitions(c *ErrorList, disk string, parts []Partition, labels map[string]string) {
	numbers := map[int]int{}
	var percent, mib bool
	for j, p := range parts {
		f := fmt.Sprintf("%s.partitions[%d]", disk, j)
		switch k, dup := numbers[p.Number]; {
		case p.Number < 1 || p.Number > maxPartitions:
			c.Add(f+".number", "%d: want 1 to %d", p.Number, maxPartitions)
		case dup:
			c.Add(f+".number", "%d is already %s.partitions[%d]", p.Number, disk, k)
		default:
			numbers[p.Number] = j
		}
		if p.Label != "" {
			switch prev, dup := labels[p.Label]; {
			case len(p.Label) > 36 || !storageLabelRE.MatchString(p.Label):
				c.Add(f+".label", "%q: a GPT partition name of at most 36 letters, digits and _.:+-", p.Label)
			case dup:
				c.Add(f+".label", "%q is already the name of %s (/dev/disk/by-partlabel names one partition)", p.Label, prev)
			default:
				labels[p.Label] = f
			}
		}
		sz, err := ParseSize(p.Size)
		switch {
		case err != nil:
			c.Add(f+".size", "%v", err)
		case sz.Rest() && j != len(parts)-1:
			c.Add(f+".size", "required: only the last partition may take the rest of the disk")
		}
		percent = percent || sz.Percent > 0
		mib = mib || sz.MiB > 0
		if _, ok := LookupPartitionType(p.Type); !ok {
			c.Add(f+".type", "%q is not a partition type: want a GPT type GUID or one of esp, linux, lvm, raid, swap", p.Type)
		}
	}
	if percent && mib {
		c.Add(disk+".partitions", "sizes mix shares of the disk (%%) with MiB and GiB: use one or the other on a disk")
	}
}

func validateFilesystems(c *ErrorList, fss []Filesystem) {
	devices := map[string]string{}
	labels := map[string]string{}
	for i, fs := range fss {
		f := fmt.Sprintf("spec.storage.filesystems[%d]", i)
		checkDevice(c, f+".device", fs.Device)
		if fs.Partition < 0 || fs.Partition > maxPartitions {
			c.Add(f+".partition", "%d: want a partition number, 1 to %d, or none for the whole device", fs.Partition, maxPartitions)
		} else if prev, dup := devices[fs.DevicePath()]; dup && fs.Device != "" {
			c.Add(f+".device", "%s already has a filesystem, %s", fs.DevicePath(), prev)
		} else {
			devices[fs.DevicePath()] = f
		}
		limit, known := labelLimit(fs.Format)
		if !known {
			c.Add(f+".format", "%q is not a format: want ext4, xfs, vfat, btrfs or swap", fs.Format)
		}
		if l := fs.Label; l != "" {
			switch prev, dup := labels[l]; {
			case !storageLabelRE.MatchString(l):
				c.Add(f+".label", "%q: use letters, digits and _.:+- only", l)
			case known && len(l) > limit:
				c.Add(f+".label", "%q is %d bytes; a %s label holds at most %d", l, len(l), fs.Format, limit)
			case dup:
				c.Add(f+".label", "%q is already the label of %s (LABEL= would name either)", l, prev)
			default:
				labels[l] = f
			}
		}
		for j, o := range fs.Options {
			if o == "" || strings.ContainsAny(o, "\x00\r\n") {
				c.Add(fmt.Sprintf("%s.options[%d]", f, j), "%q: one mkfs argument per entry, not empty, without newlines", o)
			}
		}
	}
}

// validateMountedFilesystems checks the mounts that name a filesystem of
// spec.storage by LABEL=: one cannot mount swap, nor as another type.
func validateMountedFilesystems(c *ErrorList, mounts []Mount, fss []Filesystem) {
	byLabel := map[string]*Filesystem{}
	for i := range fss {
		if fss[i].Label != "" {
			byLabel[fss[i].Label] = &fss[i]
		}
	}
	for i, m := range mounts {
		l, ok := strings.CutPrefix(m.Device, "LABEL=")
		fs := byLabel[l]
		if !ok || fs == nil {
			continue
		}
		f := fmt.Sprintf("spec.mounts[%d]", i)
		switch {
		case fs.Format == FormatSwap:
			c.Add(f+".device", "%s is a swap filesystem of spec.storage: swap is enabled, not mounted; remove the mount", m.Device)
		case m.Type != "" && m.Type != "auto" && m.Type != fs.Format:
			c.Add(f+".type", "%q, but spec.storage makes %s a %s filesystem", m.Type, m.Device, fs.Format)
		}
	}
}

// swapRefused are the trees no swap file may be in, and swapRefusedDirs
// the directories it may not be: cloud-init's cc_mounts takes a file at
// the path that is not already active swap, extends it (fallocate, or dd
// over it on btrfs) and runs mkswap on it, which overwrites its first page
// — and deletes the file when mkswap fails. A device there is a disk
// overwritten, a system file one destroyed; a directory cannot be swap.
var (
	swapRefused = []string{"/dev", "/proc", "/sys", "/run", "/etc", "/usr", "/bin", "/sbin",
		"/lib", "/lib32", "/lib64", "/libx32", "/boot", "/efi", "/var/lib", "/var/log", "/var/cache",
		"/var/spool", "/var/run", "/var/lock", "/tmp"}
	swapRefusedDirs = []string{"/home", "/root", "/srv", "/opt", "/mnt", "/media", "/var", "/snap", "/lost+found"}
)

// checkSwapPath refuses a swap file where the agent would destroy what is
// there: a device, a system path, or a directory every system has.
func checkSwapPath(c *ErrorList, field, p string) {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p { // checkPath said so
		return
	}
	for _, tree := range swapRefused {
		if p == tree || strings.HasPrefix(p, tree+"/") {
			what := "a system path"
			if tree == "/dev" {
				what = "a device: a swap partition is a spec.storage.filesystems entry of format swap"
			}
			c.Add(field, "%q is under %s, %s; the agent runs mkswap over whatever is at the path, so a swap file goes where nothing is, such as /swapfile or /var/swapfile", p, tree, what)
			return
		}
	}
	if slices.Contains(swapRefusedDirs, p) {
		c.Add(field, "%q is a directory on every system, not a file; write a file's path such as %s/swapfile", p, p)
	}
}
