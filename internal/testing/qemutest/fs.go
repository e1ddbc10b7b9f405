package qemutest

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// View says how the guest kernel mounts an image, and so which of the
// image's name sets the test sees.
type View string

const (
	// ISO9660 attaches the image as a SCSI CD-ROM and mounts it
	// "-t iso9660 -o ro": Rock Ridge names and attributes when present, else
	// Joliet, else plain ISO 9660.
	ISO9660 View = "iso9660"
	// Joliet mounts it "-o ro,norock": the Joliet tree when present (else
	// plain ISO 9660 names, lower-cased, without ";1").
	Joliet View = "joliet"
	// ISO9660Plain mounts it "-o ro,norock,nojoliet": the primary volume
	// descriptor's 8.3-style names only.
	ISO9660Plain View = "iso9660-plain"
	// VFAT attaches the image as a read-only virtio disk and mounts it
	// "-t vfat -o ro" (Debian defaults: utf8, shortname=mixed, codepage 437).
	VFAT View = "vfat"
)

func (v View) fsType() string {
	if v == VFAT {
		return "vfat"
	}
	return "iso9660"
}

func (v View) options() string {
	switch v {
	case Joliet:
		return "ro,norock"
	case ISO9660Plain:
		return "ro,norock,nojoliet"
	}
	return "ro"
}

// Mount is one image to mount in the guest.
type Mount struct {
	Image string // host path; never modified (attached read-only)
	View  View
	// Options are extra mount options appended to the view's, e.g.
	// "check=strict" or "iocharset=iso8859-1". Optional.
	Options string
	// Disk attaches an ISO 9660 image as a virtio disk instead of a CD-ROM
	// (as some clouds attach config drives). VFAT images are always disks.
	Disk bool
	// Label, when set, is looked up with busybox "findfs LABEL=<Label>"
	// (busybox's own volume_id, not the kernel) and FS.LabelFound reports
	// whether it resolved to this image's device. findfs stops at the first
	// device with the label, so give each label to one attached image only.
	Label string
}

// Probe is everything one boot checks: mounts (done one after another, each
// unmounted before the next, so one image can be seen through several views)
// and fw_cfg blobs to read back.
type Probe struct {
	Mounts []Mount
	FwCfg  map[string]string // fw_cfg name -> host file
	// Timeout bounds the boot; zero means DefaultTimeout.
	Timeout time.Duration
}

// File is one file, directory or symlink as the guest kernel presents it.
type File struct {
	Path    string      // slash-separated, relative to the root, no leading "/"
	Mode    fs.FileMode // type and permission bits from stat(2)
	Size    int64
	ModTime time.Time
	UID     int
	GID     int
	Nlink   int
	Data    []byte // content of a regular file
	Link    string // target of a symlink
}

// FS is a mounted file system as the guest kernel presents it.
type FS struct {
	View View
	// Files holds every entry below the root, keyed by File.Path.
	Files map[string]File
	// MountLine is the entry of /proc/mounts: device, mount point, type,
	// options as the kernel reports them.
	MountLine string
	// Dmesg holds the kernel messages logged from the mount to the unmount
	// (warnings about the image show here).
	Dmesg string
	// Device is the guest's device node, e.g. /dev/sr0 or /dev/vda.
	Device string
	// LabelFound reports that Mount.Label resolved to Device; LabelDevice
	// is what it resolved to.
	LabelFound  bool
	LabelDevice string
}

// Paths returns the sorted paths of all entries.
func (f *FS) Paths() []string {
	ps := make([]string, 0, len(f.Files))
	for p := range f.Files {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// Regular returns path -> content of the regular files only.
func (f *FS) Regular() map[string][]byte {
	m := map[string][]byte{}
	for p, e := range f.Files {
		if e.Mode.IsRegular() {
			m[p] = e.Data
		}
	}
	return m
}

// Report is the outcome of Inspect.
type Report struct {
	FS     []*FS             // one per Probe.Mounts, in order
	FwCfg  map[string][]byte // name -> the bytes the guest read
	Result *Result           // the raw boot, for extra records and the console
}

// Inspect boots once and has the guest kernel mount every image of p and
// read every fw_cfg blob. Any failure (missing device, mount error, read
// error, timeout) fails the test with the console log.
func Inspect(t testing.TB, p Probe) *Report {
	t.Helper()
	var m Machine
	m.FwCfg = p.FwCfg
	m.Timeout = p.Timeout
	cdIndex, diskIndex := map[string]int{}, map[string]int{}
	var sc strings.Builder
	for i, mt := range p.Mounts {
		img, err := filepath.Abs(mt.Image)
		if err != nil {
			t.Fatal(err)
		}
		var dev string
		switch {
		case (mt.View == ISO9660 || mt.View == Joliet || mt.View == ISO9660Plain) && !mt.Disk:
			n, ok := cdIndex[img]
			if !ok {
				n = len(m.CDROMs)
				cdIndex[img] = n
				m.CDROMs = append(m.CDROMs, img)
			}
			dev = fmt.Sprintf("qt_cdrom %d", n)
		case mt.View == ISO9660 || mt.View == Joliet || mt.View == ISO9660Plain || mt.View == VFAT:
			n, ok := diskIndex[img]
			if !ok {
				n = len(m.Disks)
				diskIndex[img] = n
				m.Disks = append(m.Disks, img)
			}
			dev = fmt.Sprintf("qt_disk %d", n)
		default:
			t.Fatalf("qemutest: unknown view %q", mt.View)
		}
		opts := mt.View.options()
		if mt.Options != "" {
			opts += "," + mt.Options
		}
		fmt.Fprintf(&sc, "dev=$(%s) || { qt_error 'no device for mount %d (%s)'; exit 1; }\n", dev, i, mt.View)
		if mt.Label != "" {
			fmt.Fprintf(&sc, "findfs LABEL=%s 2>/dev/null | qt_emit label %d\n", shellQuote(mt.Label), i)
		}
		fmt.Fprintf(&sc, "qt_mountdump %d \"$dev\" %s %s || exit 1\n", i, mt.View.fsType(), shellQuote(opts))
	}
	names := make([]string, 0, len(p.FwCfg))
	for name := range p.FwCfg {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := "/sys/firmware/qemu_fw_cfg/by_name/" + name + "/raw"
		fmt.Fprintf(&sc, "qt_emit_file %s fwcfg %s || exit 1\n", shellQuote(f), shellQuote(name))
	}
	m.Script = sc.String()

	res := MustRun(t, m)
	rep := &Report{FwCfg: map[string][]byte{}, Result: res}
	for i, mt := range p.Mounts {
		tag := strconv.Itoa(i)
		f := &FS{View: mt.View, Files: map[string]File{}}
		for _, r := range res.Records {
			switch {
			case r.Kind == "mount" && r.Name == tag:
				f.MountLine = strings.TrimSpace(string(r.Data))
			case r.Kind == "dmesg" && r.Name == tag:
				f.Dmesg = string(r.Data)
			case r.Kind == "label" && r.Name == tag:
				f.LabelDevice = strings.TrimSpace(string(r.Data))
			case r.Kind == "entry" && len(r.Fields) > 0 && r.Fields[0] == tag:
				e, err := parseEntry(r)
				if err != nil {
					t.Fatalf("qemutest: %s: %v", mt.Image, err)
				}
				f.Files[e.Path] = e
			}
		}
		if f.MountLine == "" {
			t.Fatalf("qemutest: no mount record for %s (%s)\n%s", mt.Image, mt.View, res.ConsoleTail(40))
		}
		f.Device, _, _ = strings.Cut(f.MountLine, " ")
		f.LabelFound = f.LabelDevice != "" && f.LabelDevice == f.Device
		rep.FS = append(rep.FS, f)
	}
	for _, name := range names {
		r := res.Find("fwcfg", name)
		if r == nil || r.Status != 0 {
			t.Fatalf("qemutest: guest could not read fw_cfg %q\n%s", name, res.ConsoleTail(40))
		}
		rep.FwCfg[name] = r.Data
	}
	return rep
}

// DumpFS boots once, mounts image through each view in turn and returns what
// the guest kernel shows, one FS per view. With no view given it uses
// ISO9660 for a file ending in ".iso" and VFAT otherwise.
func DumpFS(t testing.TB, image string, views ...View) []*FS {
	t.Helper()
	if len(views) == 0 {
		if strings.HasSuffix(strings.ToLower(image), ".iso") {
			views = []View{ISO9660}
		} else {
			views = []View{VFAT}
		}
	}
	var p Probe
	for _, v := range views {
		p.Mounts = append(p.Mounts, Mount{Image: image, View: v})
	}
	return Inspect(t, p).FS
}

// ReadFwCfg boots once with hostFile passed as "-fw_cfg name=<name>" and
// returns the bytes the guest reads from
// /sys/firmware/qemu_fw_cfg/by_name/<name>/raw.
func ReadFwCfg(t testing.TB, name, hostFile string) []byte {
	t.Helper()
	return Inspect(t, Probe{FwCfg: map[string]string{name: hostFile}}).FwCfg[name]
}

// parseEntry decodes an "entry" record: fields tag, st_mode (hex), size,
// mtime, uid, gid, nlink.
func parseEntry(r Record) (File, error) {
	if len(r.Fields) != 7 || r.Status != 0 {
		return File{}, fmt.Errorf("bad or failed entry record for %q: fields %q, read status %d", r.Name, r.Fields, r.Status)
	}
	var n [6]int64
	for i, s := range r.Fields[1:] {
		base := 10
		if i == 0 {
			base = 16
		}
		v, err := strconv.ParseInt(s, base, 64)
		if err != nil {
			return File{}, fmt.Errorf("entry %q: field %q: %v", r.Name, s, err)
		}
		n[i] = v
	}
	e := File{
		Path:    r.Name,
		Mode:    unixMode(uint32(n[0])),
		Size:    n[1],
		ModTime: time.Unix(n[2], 0).UTC(),
		UID:     int(n[3]),
		GID:     int(n[4]),
		Nlink:   int(n[5]),
	}
	switch {
	case e.Mode.IsRegular():
		e.Data = r.Data
	case e.Mode&fs.ModeSymlink != 0:
		e.Link = string(r.Data)
	}
	return e, nil
}

// unixMode converts a stat(2) st_mode to an fs.FileMode.
func unixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & 0o170000 {
	case 0o040000:
		mode |= fs.ModeDir
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	}
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
