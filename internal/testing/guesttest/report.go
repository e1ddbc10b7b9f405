package guesttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The markers around a guest's report on its console, and the prefix of its
// lines.
const (
	ReportBegin = "-----BEGIN VMINIT GUEST REPORT-----"
	ReportEnd   = "-----END VMINIT GUEST REPORT-----"
	linePrefix  = "VMR|"
)

// Section is one "## NAME ARGS" part of a report.
type Section struct {
	Name  string
	Args  []string
	Lines []string
}

// Text is the section's lines joined with newlines.
func (s Section) Text() string { return strings.Join(s.Lines, "\n") }

// Report is what a guest printed about itself after its agent ran.
type Report struct {
	Sections []Section
}

// ParseReport reads the last complete report in a console transcript.
func ParseReport(console []byte) (*Report, error) {
	var (
		cur   *Report
		last  *Report
		sc    = bufio.NewScanner(bytes.NewReader(console))
		inRep bool
	)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.Contains(line, ReportBegin):
			cur, inRep = &Report{}, true
		case strings.Contains(line, ReportEnd) && inRep:
			last, inRep = cur, false
		case inRep:
			i := strings.Index(line, linePrefix)
			if i < 0 {
				continue // a kernel or journal message
			}
			line = line[i+len(linePrefix):]
			if name, ok := strings.CutPrefix(line, "## "); ok {
				f := strings.Fields(name)
				if len(f) == 0 {
					continue
				}
				cur.Sections = append(cur.Sections, Section{Name: f[0], Args: f[1:]})
				continue
			}
			if n := len(cur.Sections); n > 0 {
				cur.Sections[n-1].Lines = append(cur.Sections[n-1].Lines, line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if last == nil {
		return nil, fmt.Errorf("no complete guest report on the console (%q ... %q)", ReportBegin, ReportEnd)
	}
	return last, nil
}

// Section returns the first section named name (and, when given, whose
// first argument is arg).
func (r *Report) Section(name string, arg ...string) (Section, bool) {
	for _, s := range r.Sections {
		if s.Name != name {
			continue
		}
		if len(arg) > 0 && (len(s.Args) == 0 || s.Args[0] != arg[0]) {
			continue
		}
		return s, true
	}
	return Section{}, false
}

// Text returns a section's text, "" when absent.
func (r *Report) Text(name string) string {
	s, _ := r.Section(name)
	return s.Text()
}

// Agent is "cloud-init" or "ignition".
func (r *Report) Agent() string {
	s, _ := r.Section("agent")
	if len(s.Args) == 0 {
		return ""
	}
	return s.Args[0]
}

// Boot is the disk's boot count: 1 on the first boot.
func (r *Report) Boot() int {
	s, _ := r.Section("boot")
	if len(s.Args) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(s.Args[0])
	return n
}

// File is a path in the guest as the report saw it.
type File struct {
	Path         string
	Mode         string // octal, "644"
	Owner, Group string
	Type         string // stat's %F: "regular file", "directory", "symbolic link"
	Content      string // for regular files up to 8 KiB
}

// File returns what the report says of path.
func (r *Report) File(path string) (File, bool) {
	s, ok := r.Section("file", path)
	if !ok || len(s.Args) < 5 {
		return File{}, false
	}
	f := File{Path: path, Mode: s.Args[1], Owner: s.Args[2], Group: s.Args[3], Type: strings.Join(s.Args[4:], " ")}
	if len(s.Lines) > 0 {
		// The report ends a file that lacks a final newline with one.
		f.Content = strings.Join(s.Lines, "\n") + "\n"
	}
	return f, true
}

// Unit returns the systemctl show properties of a unit (Id, UnitFileState,
// ActiveState, SubState, Result, DropInPaths).
func (r *Report) Unit(name string) (map[string]string, bool) {
	s, _ := r.Section("units")
	for _, l := range s.Lines {
		p := parseProps(l)
		if p["Id"] == name {
			return p, true
		}
	}
	return nil, false
}

func parseProps(l string) map[string]string {
	p := map[string]string{}
	last := ""
	for _, f := range strings.Fields(l) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || strings.ContainsAny(k, "/.") {
			if last != "" {
				p[last] += " " + f
			}
			continue
		}
		p[k], last = v, k
	}
	return p
}

// User is a line of the guest's passwd.
type User struct {
	Name, UID, GID, Gecos, Home, Shell string
}

// User returns the passwd entry of name.
func (r *Report) User(name string) (User, bool) {
	s, _ := r.Section("passwd")
	for _, l := range s.Lines {
		f := strings.Split(l, ":")
		if len(f) == 7 && f[0] == name {
			return User{Name: f[0], UID: f[2], GID: f[3], Gecos: f[4], Home: f[5], Shell: f[6]}, true
		}
	}
	return User{}, false
}

// GroupMembers returns the members of group name, and whether it exists.
func (r *Report) GroupMembers(name string) ([]string, bool) {
	s, _ := r.Section("group")
	for _, l := range s.Lines {
		f := strings.Split(l, ":")
		if len(f) == 4 && f[0] == name {
			if f[3] == "" {
				return nil, true
			}
			return strings.Split(f[3], ","), true
		}
	}
	return nil, false
}

// BlockDevice is a disk, partition or other block device as the report's
// lsblk section shows it (lsblk -J -b: sizes in bytes).
type BlockDevice struct {
	Name       string        `json:"name"`
	Path       string        `json:"path"`
	Type       string        `json:"type"` // "disk", "part", "rom"
	Size       int64         `json:"size"`
	PTType     string        `json:"pttype"`    // of a disk and its partitions: "gpt", "dos"
	PartLabel  string        `json:"partlabel"` // a GPT partition's name
	PartType   string        `json:"parttype"`  // a GPT type GUID (lower case), an MBR type ("0x83")
	FSType     string        `json:"fstype"`    // "ext4", "xfs", "btrfs", "vfat", "swap"
	Label      string        `json:"label"`     // the file system's label
	UUID       string        `json:"uuid"`      // the file system's UUID
	FSSize     int64         `json:"fssize"`    // bytes, of a mounted file system
	MountPoint string        `json:"mountpoint"`
	Children   []BlockDevice `json:"children"`
}

// BlockDevices returns the block devices of the report's lsblk section,
// partitions as their disk's Children.
func (r *Report) BlockDevices() ([]BlockDevice, error) {
	s, ok := r.Section("lsblk")
	if !ok {
		return nil, fmt.Errorf("the report has no lsblk section (a guest built before storage was reported)")
	}
	var v struct {
		BlockDevices []BlockDevice `json:"blockdevices"`
	}
	if err := json.Unmarshal([]byte(s.Text()), &v); err != nil {
		return nil, fmt.Errorf("lsblk section: %w", err)
	}
	return v.BlockDevices, nil
}

// BlockDevice returns the device at path ("/dev/vdb2"), a disk or one of
// its partitions.
func (r *Report) BlockDevice(path string) (BlockDevice, bool) {
	devs, _ := r.BlockDevices()
	var find func([]BlockDevice) (BlockDevice, bool)
	find = func(l []BlockDevice) (BlockDevice, bool) {
		for _, d := range l {
			if d.Path == path {
				return d, true
			}
			if c, ok := find(d.Children); ok {
				return c, true
			}
		}
		return BlockDevice{}, false
	}
	return find(devs)
}

// Swap is an active swap area (swapon --show).
type Swap struct {
	Name string // "/dev/vdb2", "/swapfile"
	Type string // "partition", "file"
	Size int64  // bytes
}

// Swaps returns the swap areas active when the report was printed.
func (r *Report) Swaps() []Swap {
	s, _ := r.Section("swaps")
	var swaps []Swap
	for _, l := range s.Lines {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		swaps = append(swaps, Swap{Name: f[0], Type: f[1], Size: size})
	}
	return swaps
}
