package spec

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const storageDoc = specHeader + `spec:
  mounts:
    - {device: LABEL=data, path: /var/lib/data}
  storage:
    disks:
      - device: /dev/disk/by-id/virtio-data
        wipeTable: false
        partitions:
          - {label: data, size: 10GiB}
          - {number: 2, label: swap, type: swap}
    filesystems:
      - device: /dev/disk/by-id/virtio-data
        partition: 1
        format: ext4
        label: data
        options: [-m, "0"]
      - {device: /dev/vdc, format: swap, label: swap0, wipeFilesystem: true}
    growRoot: true
    swap: {path: /swapfile, size: 1GiB}
`

// TestStorageDecodes: spec.storage decodes the same on the fast and the
// careful path, and Default numbers and types the partitions.
func TestStorageDecodes(t *testing.T) {
	checkFastDecode(t, []byte(storageDoc))
	inst, err := Parse([]byte(storageDoc), "")
	if err != nil {
		t.Fatal(err)
	}
	st := inst.Spec.Storage
	yes := true
	want := &Storage{
		Disks: []Disk{{Device: "/dev/disk/by-id/virtio-data", Partitions: []Partition{
			{Number: 1, Label: "data", Size: "10GiB", Type: "linux"},
			{Number: 2, Label: "swap", Type: "swap"},
		}}},
		Filesystems: []Filesystem{
			{Device: "/dev/disk/by-id/virtio-data", Partition: 1, Format: "ext4", Label: "data", Options: []string{"-m", "0"}},
			{Device: "/dev/vdc", Format: "swap", Label: "swap0", WipeFilesystem: true},
		},
		GrowRoot: &yes,
		Swap:     &SwapFile{Path: "/swapfile", Size: "1GiB"},
	}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("decoded\n%#v\nwant\n%#v", st, want)
	}
	if got := st.Filesystems[0].DevicePath(); got != "/dev/disk/by-id/virtio-data-part1" {
		t.Errorf("DevicePath = %q", got)
	}
}

// TestStorageErrors: every problem of spec.storage at once, each naming
// its field and line.
func TestStorageErrors(t *testing.T) {
	doc := specHeader + `spec:
  mounts:
    - {device: LABEL=sw, path: /mnt/sw}
    - {device: LABEL=db, path: /db, type: ext4}
  storage:
    disks:
      - device: vdb
        partitions:
          - {number: 129, size: 10GB}
          - {label: "a b", size: 5%, type: nonsense}
          - {number: 2, size: 1GiB}
      - device: /dev/vdc
        partitions:
          - {size: rest}
          - {size: 1GiB}
    filesystems:
      - {device: /dev/vdd, format: ntfs}
      - {device: /dev/vde, format: xfs, label: db, options: [""]}
      - {device: /dev/vde, format: ext4, label: seventeen-chars-x}
      - {device: /dev/vdf, format: swap, label: sw, partition: -1}
    swap: {path: swapfile, size: 10%}
`
	_, err := Parse([]byte(doc), "")
	got := err.Error()
	for _, want := range []string{
		`7: spec.mounts[0].device: LABEL=sw is a swap filesystem of spec.storage`,
		`8: spec.mounts[1].type: "ext4", but spec.storage makes LABEL=db a xfs filesystem`,
		`11: spec.storage.disks[0].device: "vdb" is not a device`,
		`13: spec.storage.disks[0].partitions[0].number: 129: want 1 to 128`,
		`13: spec.storage.disks[0].partitions[0].size: "10GB" is not a size`,
		`14: spec.storage.disks[0].partitions[1].label: "a b": a GPT partition name`,
		`14: spec.storage.disks[0].partitions[1].type: "nonsense" is not a partition type`,
		`15: spec.storage.disks[0].partitions[2].number: 2 is already spec.storage.disks[0].partitions[1]`,
		`18: spec.storage.disks[1].partitions[0].size: required: only the last partition may take the rest`,
		`21: spec.storage.filesystems[0].format: "ntfs" is not a format`,
		`22: spec.storage.filesystems[1].options[0]: "": one mkfs argument per entry`,
		`23: spec.storage.filesystems[2].device: /dev/vde already has a filesystem, spec.storage.filesystems[1]`,
		`23: spec.storage.filesystems[2].label: "seventeen-chars-x" is 17 bytes; a ext4 label holds at most 16`,
		`24: spec.storage.filesystems[3].partition: -1: want a partition number`,
		`25: spec.storage.swap.path: "swapfile" is not absolute`,
		`25: spec.storage.swap.size: "10%": want the file's size in MiB or GiB`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q", want)
		}
	}
	// The mixed units on disks[0] (5% and 1GiB) too.
	if !strings.Contains(got, "spec.storage.disks[0].partitions: sizes mix shares of the disk") {
		t.Errorf("mixed sizes not reported")
	}
	if t.Failed() {
		t.Log(got)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]Size{"": {}, "rest": {}, "512MiB": {MiB: 512}, "2GiB": {MiB: 2048}, "1TiB": {MiB: 1 << 20}, "25%": {Percent: 25}, "100%": {Percent: 100}} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0MiB", "-1GiB", "+1GiB", "1G", "1.5GiB", "0%", "101%", "+5%", "9999999999TiB", "MiB", "%"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %v; want an error", in, got)
		}
	}
}

func TestPartitionDevice(t *testing.T) {
	for _, c := range []struct {
		disk string
		n    int
		want string
	}{
		{"/dev/vdb", 1, "/dev/vdb1"},
		{"/dev/nvme0n1", 2, "/dev/nvme0n1p2"},
		{"/dev/disk/by-id/virtio-x", 3, "/dev/disk/by-id/virtio-x-part3"},
		{"/dev/disk/by-path/pci-0000:00:05.0", 1, "/dev/disk/by-path/pci-0000:00:05.0-part1"},
		{"/dev/disk/azure/scsi1/lun0", 1, "/dev/disk/azure/scsi1/lun0-part1"},
	} {
		if got := PartitionDevice(c.disk, c.n); got != c.want {
			t.Errorf("PartitionDevice(%q, %d) = %q; want %q", c.disk, c.n, got, c.want)
		}
	}
}

// TestStorageWithUserDataOnly: spec.storage goes into the generated
// #cloud-config, which userDataOnly leaves out.
func TestStorageWithUserDataOnly(t *testing.T) {
	doc := specHeader + "spec:\n  cloudInit: {userData: '#!/bin/sh', userDataOnly: true}\n  storage: {growRoot: true}\n"
	if _, err := Parse([]byte(doc), ""); err == nil || !strings.Contains(err.Error(), "spec.storage: goes into the generated #cloud-config") {
		t.Errorf("%v", err)
	}
}

// FuzzParseSize: a size parses to exactly one of MiB, a share of the
// disk or the rest, within bounds, and is written back as the same size.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"", "rest", "512MiB", "2GiB", "1TiB", "25%", "100%", "0%", "+1GiB", "1G", "9223372036854775807TiB", "00010MiB", "1e3MiB", " 1GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sz, err := ParseSize(s)
		if err != nil {
			return
		}
		switch {
		case sz.MiB < 0 || sz.MiB > maxSizeMiB || sz.Percent < 0 || sz.Percent > 100 || sz.MiB > 0 && sz.Percent > 0:
			t.Fatalf("ParseSize(%q) = %+v", s, sz)
		case sz.Rest() && s != "" && s != "rest":
			t.Fatalf("ParseSize(%q) is the rest of the disk", s)
		}
		again, err := ParseSize(fmt.Sprintf("%dMiB", sz.MiB))
		if sz.MiB > 0 && (err != nil || again != sz) {
			t.Fatalf("ParseSize(%q) = %+v, and its MiB read back %+v, %v", s, sz, again, err)
		}
	})
}

// TestSwapPathRefused: a swap file where the agent's mkswap would destroy
// what is there (a device, a system file) or where a directory is, is an
// error naming the field; ordinary swap file paths pass.
func TestSwapPathRefused(t *testing.T) {
	for _, p := range []string{"/etc/passwd", "/dev/vda", "/dev/vdb", "/dev/disk/by-id/virtio-root", "/usr/bin/bash",
		"/boot/vmlinuz", "/var/lib/dpkg/status", "/proc/kcore", "/tmp/swap", "/home", "/root", "/var"} {
		_, err := Parse([]byte(specHeader+"spec:\n  storage:\n    swap: {path: "+p+", size: 1GiB}\n"), "")
		if err == nil || !strings.Contains(err.Error(), "spec.storage.swap.path: \""+p+"\"") {
			t.Errorf("swap.path %s: %v", p, err)
		}
	}
	for _, p := range []string{"/swapfile", "/swap.img", "/var/swapfile", "/swap/swapfile", "/mnt/swapfile", "/home/swapfile"} {
		if _, err := Parse([]byte(specHeader+"spec:\n  storage:\n    swap: {path: "+p+", size: 1GiB}\n"), ""); err != nil {
			t.Errorf("swap.path %s: %v", p, err)
		}
	}
}
