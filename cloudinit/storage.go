package cloudinit

import (
	"fmt"
	"path"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/systemd"
	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/spec"
)

// forceFlags make mkfs format a device that holds a filesystem, for
// wipeFilesystem: cloud-init 22.4's own lookup finds no flag for any
// format, and mkfs.xfs and mkfs.btrfs refuse without one. mkswap needs
// none.
func forceFlag(format string) string {
	switch format {
	case spec.FormatExt4:
		return "-F"
	case spec.FormatXFS, spec.FormatBtrfs:
		return "-f"
	}
	return ""
}

// vfatCommand is fs_setup's cmd for a labelled vfat filesystem: cloud-init
// 22.4 gives every mkfs "-L LABEL", which mkfs.fat refuses (its flag is
// -n; seen on the test guest, TestGuestStorage). cmd runs in a shell after
// the same checks for an existing filesystem, and without extra_opts,
// which cloud-init ignores beside it: the options go into the command,
// quoted, with "%" doubled for cloud-init's %-formatting. The label is
// substituted by cloud-init; spec validation keeps it to [A-Za-z0-9_.:+-].
func vfatCommand(opts []string) string {
	cmd := "mkfs.fat -n %(label)s"
	for _, o := range opts {
		cmd += " " + strings.ReplaceAll(spec.ShellQuote(o), "%", "%%")
	}
	return cmd + " %(device)s"
}

// storage adds spec.storage's keys to the cloud-config: disk_setup,
// fs_setup, growpart and resize_rootfs, and swap. What cloud-init 22.4
// cannot express is an error naming the field.
func storage(add func(string, *yaml.Node), st *spec.Storage, errs *spec.ErrorList) {
	if st == nil {
		return
	}
	if ds := diskSetup(st.Disks, errs); len(ds.Content) > 0 {
		add("disk_setup", ds)
	}
	if len(st.Filesystems) > 0 {
		add("fs_setup", fsSetup(st.Filesystems))
	}
	if g := st.GrowRoot; g != nil {
		mode := "off"
		if *g {
			mode = "auto"
		}
		add("growpart", yaml11.Mapping("mode", yaml11.String(mode), "devices", yaml11.Flow(yaml11.Strings([]string{"/"}))))
		add("resize_rootfs", yaml11.BoolNode(*g))
	}
	if sw := st.Swap; sw != nil {
		sz, _ := spec.ParseSize(sw.Size) // validated
		add("swap", yaml11.Mapping("filename", yaml11.String(sw.Path), "size", yaml11.IntNode(sz.MiB<<20)))
	}
}

// diskSetup renders the disks with partitions as disk_setup. Its layout
// gives each partition a share of the disk in percent (the last one the
// rest), numbered in order, with an sgdisk type code: no names, no sizes
// in bytes, no GUID types.
func diskSetup(disks []spec.Disk, errs *spec.ErrorList) *yaml.Node {
	out := yaml11.Mapping()
	for i, d := range disks {
		if len(d.Partitions) == 0 {
			if d.WipeTable {
				errs.Add(fmt.Sprintf("spec.storage.disks[%d].wipeTable", i), "cloud-init's disk_setup cannot clear a partition table without writing a new one: list the partitions")
			}
			continue
		}
		layout := yaml11.Flow(yaml11.Sequence())
		used := 0
		for j, p := range d.Partitions {
			f := fmt.Sprintf("spec.storage.disks[%d].partitions[%d]", i, j)
			if p.Number != j+1 {
				errs.Add(f+".number", "%d: cloud-init's disk_setup numbers partitions in their order, so this one would be %d", p.Number, j+1)
			}
			if p.Label != "" {
				errs.Add(f+".label", "cloud-init's disk_setup cannot name a partition; name its filesystem (spec.storage.filesystems[].label) instead")
			}
			sz, _ := spec.ParseSize(p.Size) // validated
			last := j == len(d.Partitions)-1
			switch {
			case sz.MiB > 0:
				errs.Add(f+".size", "cloud-init's disk_setup sizes partitions only as a share of the disk: write a percentage such as \"50%%\", or leave the last partition's size out")
			case last && !sz.Rest() && used+sz.Percent < 100:
				errs.Add(f+".size", "cloud-init's disk_setup gives the last partition the rest of the disk: leave its size out")
			case last && sz.Rest():
				sz.Percent = 100 - used
				if sz.Percent < 1 {
					errs.Add(f+".size", "the partitions before it take the whole disk")
				}
			}
			used += sz.Percent
			t, _ := spec.LookupPartitionType(p.Type)
			if t.Code == 0 {
				errs.Add(f+".type", "%q: cloud-init's disk_setup takes only the types with a numeric sgdisk code, linux (8300) and swap (8200)", p.Type)
			}
			layout.Content = append(layout.Content, yaml11.Flow(yaml11.Sequence(yaml11.IntNode(int64(sz.Percent)), yaml11.IntNode(int64(t.Code)))))
		}
		if used > 100 {
			errs.Add(fmt.Sprintf("spec.storage.disks[%d].partitions", i), "the shares of the disk add up to %d%%", used)
		}
		yaml11.AddPair(out, d.Device, yaml11.Mapping(
			"table_type", yaml11.String("gpt"),
			"layout", layout,
			"overwrite", yaml11.BoolNode(d.WipeTable)))
	}
	return out
}

// fsSetup renders fs_setup. Each entry names the device node itself
// (a partition's too: 22.4's schema refuses a partition number). Without
// wipeFilesystem, partition "any" keeps an existing filesystem of the
// format and leaves a device holding any other untouched, Ignition's
// wipeFilesystem: false; with it, "none" and overwrite format the device
// whatever it holds.
func fsSetup(fss []spec.Filesystem) *yaml.Node {
	seq := yaml11.Sequence()
	for _, fs := range fss {
		e := yaml11.Mapping("device", yaml11.String(fs.DevicePath()), "filesystem", yaml11.String(fs.Format))
		if fs.Label != "" {
			yaml11.AddPair(e, "label", yaml11.String(fs.Label))
		}
		partition, opts := "any", fs.Options
		if fs.WipeFilesystem {
			partition = "none"
			if flag := forceFlag(fs.Format); flag != "" {
				opts = append([]string{flag}, opts...)
			}
		}
		yaml11.AddPair(e, "partition", yaml11.String(partition))
		yaml11.AddPair(e, "overwrite", yaml11.BoolNode(fs.WipeFilesystem))
		if fs.Format == spec.FormatVFAT && fs.Label != "" {
			yaml11.AddPair(e, "cmd", yaml11.String(vfatCommand(opts)))
		} else if len(opts) > 0 {
			yaml11.AddPair(e, "extra_opts", yaml11.Flow(yaml11.Strings(opts)))
		}
		seq.Content = append(seq.Content, e)
	}
	return seq
}

// swapUnits writes a .swap unit for each swap filesystem of spec.storage
// (the same units the Ignition rendering enables) and returns the
// commands that enable them.
func swapUnits(st *spec.Storage, files *yaml.Node, claim func(p, field string) bool) (run []*yaml.Node) {
	if st == nil {
		return nil
	}
	for i, fs := range st.Filesystems {
		if fs.Format != spec.FormatSwap {
			continue
		}
		dev := fs.SwapDevice()
		name := systemd.SwapUnitName(dev)
		p := path.Join(systemd.UnitDir, name)
		if !claim(p, fmt.Sprintf("spec.storage.filesystems[%d]", i)) {
			continue
		}
		files.Content = append(files.Content, fileEntry(p, []byte(systemd.SwapUnit(dev)), 0o644, "", false, false))
		run = append(run, argv("systemctl", "enable", "--now", name))
	}
	return run
}

// udevRefresh is what runcmd does before the mount and swap units start
// when fs_setup made file systems: ask udev to probe every block device
// again and wait for it. udev learns of a new file system from the close
// of the device it watches, and misses it when the close comes while it
// is still handling the partition's own event (the many sgdisk calls of
// disk_setup queue a storm of them); the device then keeps no LABEL= link
// and its mount unit waits for it in vain. Ignition triggers a uevent
// after making file systems for the same reason; cloud-init 22.4 only
// settles. Two commands, not `trigger --settle`, for systemd before 238.
func udevRefresh(st *spec.Storage) []*yaml.Node {
	if st == nil || len(st.Filesystems) == 0 {
		return nil
	}
	return []*yaml.Node{
		argv("udevadm", "trigger", "--action=change", "--subsystem-match=block"),
		argv("udevadm", "settle"),
	}
}
