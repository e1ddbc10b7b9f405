package vfat

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"time"
	"unicode/utf16"
)

// Options control the image. The zero value is valid (no label, FAT epoch
// timestamps, smallest size, derived serial), though a seed needs a Label.
type Options struct {
	// Label is the volume label, typically "cidata" (NoCloud) or "config-2"
	// (ConfigDrive). It is written twice: in the EBPB (blkid LABEL_FATBOOT)
	// and as a volume-label entry in the root directory (blkid LABEL); a
	// label only in the EBPB was missed by cloud-init's ds-identify
	// (cloud-init#3437). At most 11 bytes of printable ASCII, stored as
	// given: the lowercase "cidata" is what every consumer accepts. Empty
	// means no label ("NO NAME" in the EBPB, no root entry).
	Label string
	// ModTime is the one timestamp given to every directory entry. FAT
	// stores local wall-clock time without a zone at 2-second resolution:
	// the fields of ModTime in its own Location are stored. Zero means
	// 1980-01-01 00:00:00, the FAT epoch; times outside 1980–2107 are
	// clamped. Nothing is ever taken from the clock or the environment.
	ModTime time.Time
	// Size is the image size in bytes, a multiple of Align (4096) and at
	// most MaxSize. 0 picks the smallest size that fits the content, but
	// at least MinSize (128 KiB). An explicit Size below MinSize is
	// allowed if the content fits (the smallest volume is 20 KiB).
	Size int64
	// Serial is the volume serial number (blkid's UUID). 0 derives one from
	// a SHA-256 over the label, ModTime and the sorted tree (paths, kinds,
	// sizes). File contents do not enter it: they are only read at Close,
	// after the boot sector has been written.
	Serial uint32
}

// Writer builds a VFAT image. Add entries in any order, then Close writes
// the whole image to the underlying io.Writer in one sequential pass. The
// output depends only on the Options and the set of entries, not on the
// order in which they were added.
type Writer struct {
	w      io.Writer
	opts   Options
	err    error // a bad Options value, reported by every call
	root   *node
	closed bool
}

// node is one file or directory of the tree being built.
type node struct {
	name     string // path element as given
	path     string // full slash-separated path, for error messages
	dir      bool
	size     int64
	open     func() (io.Reader, func() error, error) // file content, called at Close
	children map[string]*node                        // by foldKey

	// Computed by plan.
	sorted  []*node
	short   [11]byte
	long    []uint16 // nil when the 8.3 name alone represents the name
	entries int64    // directories: 32-byte entries, including . and .. or the label
	first   uint32   // first cluster, 0 for empty files
	nclus   int64
}

// NewWriter returns a Writer that writes the image to w when Close is
// called. An invalid Options value is reported by the first Add or Close.
func NewWriter(w io.Writer, opts Options) *Writer {
	wr := &Writer{w: w, opts: opts, root: &node{dir: true, children: map[string]*node{}}}
	if err := checkLabel(opts.Label); err != nil {
		wr.err = pathErr("label", opts.Label, err)
	} else if opts.Size < 0 || opts.Size%Align != 0 || opts.Size > MaxSize {
		wr.err = pathErr("size", ".", fmt.Errorf("%w: Size %d must be a multiple of %d and at most %d", ErrInvalidOptions, opts.Size, Align, MaxSize))
	}
	return wr
}

// labelForbidden are the printable characters a FAT label cannot hold.
const labelForbidden = `"*+,./:;<=>?[\]|`

// checkLabel accepts what both mtools and Windows accept in a FAT label:
// printable ASCII without the characters that are illegal in 8.3 names, and
// no leading space (it would read back as a shorter label).
func checkLabel(l string) error {
	if len(l) > 11 {
		return fmt.Errorf("%w: a volume label has at most 11 bytes", ErrInvalidOptions)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c < 0x20 || c > 0x7E || strings.IndexByte(labelForbidden, c) >= 0 || (i == 0 && c == ' ') {
			return fmt.Errorf("%w: a volume label is printable ASCII without %s and no leading space", ErrInvalidOptions, labelForbidden)
		}
	}
	return nil
}

// splitPath validates a slash-separated relative path and returns its
// elements.
func splitPath(name string) ([]string, error) {
	if !fs.ValidPath(name) || name == "." {
		return nil, ErrInvalidName
	}
	elems := strings.Split(name, "/")
	for _, e := range elems {
		if err := checkName(e); err != nil {
			return nil, err
		}
	}
	return elems, nil
}

// mkdirAll returns the directory for elems, creating missing ones. Existing
// directories are fine (AddDir is idempotent, and AddFile creates parents),
// but a file in the way is a duplicate.
func (w *Writer) mkdirAll(elems []string) (*node, error) {
	d := w.root
	for i, e := range elems {
		k := foldKey(e)
		c := d.children[k]
		if c == nil {
			c = &node{name: e, path: strings.Join(elems[:i+1], "/"), dir: true, children: map[string]*node{}}
			d.children[k] = c
		} else if !c.dir || c.name != e {
			// A file, or the same directory spelled in another case:
			// both would be ambiguous on a case-insensitive file system.
			return nil, pathErr("add", strings.Join(elems[:i+1], "/"), ErrDuplicate)
		}
		d = c
	}
	return d, nil
}

func (w *Writer) check(op, name string) error {
	if w.closed {
		return pathErr(op, name, ErrClosed)
	}
	return w.err
}

// AddDir adds a directory and any missing parents. Adding a directory that
// exists is not an error; adding one where a file exists is ErrDuplicate.
func (w *Writer) AddDir(name string) error {
	if err := w.check("add", name); err != nil {
		return err
	}
	elems, err := splitPath(name)
	if err != nil {
		return pathErr("add", name, err)
	}
	_, err = w.mkdirAll(elems)
	return err
}

// AddFile adds a file of size bytes whose content r delivers. Missing parent
// directories are created. r is read at Close, and must then deliver exactly
// size bytes (ErrSizeMismatch otherwise); a nil r is allowed for size 0. The
// Writer does not close r. mode is there for the shape iso9660's AddFile
// shares: FAT keeps no permission bits, so only its type bits matter, and a
// mode with any (a directory, a symlink, ...) is ErrUnsupportedType.
func (w *Writer) AddFile(name string, size int64, mode fs.FileMode, r io.Reader) error {
	if err := w.check("add", name); err != nil {
		return err
	}
	if mode&fs.ModeType != 0 {
		return pathErr("add", name, fmt.Errorf("%w: mode %v", ErrUnsupportedType, mode))
	}
	if r == nil && size != 0 {
		return pathErr("add", name, fmt.Errorf("%w: nil reader for %d bytes", ErrSizeMismatch, size))
	}
	open := func() (io.Reader, func() error, error) { return r, nil, nil }
	return w.addFile(name, size, open)
}

func (w *Writer) addFile(name string, size int64, open func() (io.Reader, func() error, error)) error {
	elems, err := splitPath(name)
	if err != nil {
		return pathErr("add", name, err)
	}
	if size < 0 || size > 0xFFFFFFFF {
		return pathErr("add", name, fmt.Errorf("%w: file size %d (FAT holds 0 to 4 GiB-1)", ErrTooLarge, size))
	}
	d, err := w.mkdirAll(elems[:len(elems)-1])
	if err != nil {
		return err
	}
	leaf := elems[len(elems)-1]
	k := foldKey(leaf)
	if d.children[k] != nil {
		return pathErr("add", name, ErrDuplicate)
	}
	d.children[k] = &node{name: leaf, path: name, size: size, open: open}
	return nil
}

// AddFS adds every directory and regular file of fsys, under the same
// names. Files are opened and read at Close. Anything else (symlinks,
// devices) is ErrUnsupportedType; names are checked as for AddFile.
func (w *Writer) AddFS(fsys fs.FS) error {
	if err := w.check("add", "."); err != nil {
		return err
	}
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		switch {
		case d.IsDir():
			return w.AddDir(p)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return w.addFile(p, info.Size(), func() (io.Reader, func() error, error) {
				f, err := fsys.Open(p)
				if err != nil {
					return nil, nil, err
				}
				return f, f.Close, nil
			})
		default:
			return pathErr("add", p, ErrUnsupportedType)
		}
	})
}

// Close lays the image out and writes it. Nothing is written when the
// content does not fit or a name cannot be placed. If a reader fails or
// delivers the wrong length, the error names the file and the output is
// incomplete. Close does not close the underlying io.Writer.
func (w *Writer) Close() error {
	if err := w.check("close", "."); err != nil {
		return err
	}
	w.closed = true
	p, err := w.plan()
	if err != nil {
		return err
	}
	return p.write(w.w)
}

// plan is everything Close needs to write the image.
type plan struct {
	g      geometry
	opts   Options
	root   *node
	order  []*node // directories and non-empty files in cluster order
	empty  []*node // empty files: no clusters, but their readers are checked
	serial uint32
	dt     dosTime
}

func (w *Writer) plan() (*plan, error) {
	p := &plan{opts: w.opts, root: w.root, dt: toDOSTime(w.opts.ModTime)}
	if err := prepare(w.root, true, w.opts.Label != ""); err != nil {
		return nil, err
	}
	rootEntries := int64(minRootEntries)
	if n := (w.root.entries + 15) &^ 15; n > rootEntries {
		rootEntries = n
	}

	// Allocation order: a pre-order walk, each directory's clusters before
	// its files, subdirectories after the files. Any fixed order would do;
	// this one keeps a directory next to its contents.
	var walk func(d *node)
	walk = func(d *node) {
		if d != w.root {
			p.order = append(p.order, d)
		}
		for _, c := range d.sorted {
			switch {
			case c.dir:
			case c.size > 0:
				p.order = append(p.order, c)
			default:
				p.empty = append(p.empty, c)
			}
		}
		for _, c := range d.sorted {
			if c.dir {
				walk(c)
			}
		}
	}
	walk(w.root)

	// Clusters needed at each cluster size, computed once: the size search
	// below may try thousands of volume sizes.
	needBySPC := map[int64]int64{}
	for spc := int64(1); spc <= maxSPC; spc *= 2 {
		cb := spc * sectorSize
		for _, x := range p.order {
			needBySPC[spc] += (x.bytes() + cb - 1) / cb
		}
	}
	need := func(spc int64) int64 { return needBySPC[spc] }
	fits := func(total int64) (geometry, bool) { return chooseGeometry(total, rootEntries, need) }

	// The smallest size that fits, not below floor sectors: start from the
	// bound that 512-byte clusters and a one-sector FAT would give and step
	// by Align. A search rather than a formula: which FAT type and cluster
	// size a volume gets depends on its size and the content together.
	smallest := func(floor int64) (int64, bool) {
		t := int64(reservedSectors) + numFATs + rootEntries*dirEntrySize/sectorSize + need(1)
		t = (t + alignSectors - 1) / alignSectors * alignSectors
		for t = max(t, floor); t*sectorSize <= MaxSize; t += alignSectors {
			if _, ok := fits(t); ok {
				return t, true
			}
		}
		return 0, false
	}

	total := w.opts.Size / sectorSize
	if total == 0 {
		t, ok := smallest(MinSize / sectorSize)
		if !ok {
			return nil, pathErr("close", ".", fmt.Errorf("%w: the content needs more than MaxSize (%d bytes)", ErrNoSpace, MaxSize))
		}
		total = t
	}
	g, ok := fits(total)
	if !ok {
		msg := fmt.Sprintf("more than MaxSize (%d bytes)", MaxSize)
		if t, ok := smallest(0); ok {
			msg = fmt.Sprintf("Size %d", t*sectorSize)
		}
		// Name the first entry that overflows the layout the size would get
		// without content, so the caller can see what made it too big.
		culprit := "."
		if gg, ok := chooseGeometry(total, rootEntries, nil); ok {
			var used int64
			for _, x := range p.order {
				used += (x.bytes() + gg.clusterBytes() - 1) / gg.clusterBytes()
				if used > gg.clusters {
					culprit = x.path
					break
				}
			}
		}
		return nil, pathErr("close", culprit, fmt.Errorf("%w in %d bytes: needs %s", ErrNoSpace, w.opts.Size, msg))
	}
	p.g = g

	next := uint32(2)
	for _, x := range p.order {
		x.first = next
		x.nclus = (x.bytes() + g.clusterBytes() - 1) / g.clusterBytes()
		next += uint32(x.nclus)
	}

	p.serial = w.opts.Serial
	if p.serial == 0 {
		p.serial = deriveSerial(p)
	}
	return p, nil
}

// bytes is what a node occupies in the data region before cluster rounding.
func (n *node) bytes() int64 {
	if n.dir {
		return n.entries * dirEntrySize
	}
	return n.size
}

// prepare sorts each directory, gives every entry its 8.3 name and LFN, and
// counts directory entries. Sorting by name makes the result independent of
// the add order; short names are then handed out in that order.
func prepare(d *node, isRoot, hasLabel bool) error {
	d.sorted = make([]*node, 0, len(d.children))
	for _, c := range d.children {
		d.sorted = append(d.sorted, c)
	}
	sort.Slice(d.sorted, func(i, j int) bool { return d.sorted[i].name < d.sorted[j].name })

	names := newShortNamer()
	reserved := make([]bool, len(d.sorted))
	for i, c := range d.sorted {
		c.short, reserved[i] = names.reserve(c.name)
	}
	if isRoot {
		d.entries = 0
		if hasLabel {
			d.entries = 1
		}
	} else {
		d.entries = 2 // . and ..
	}
	for i, c := range d.sorted {
		if !reserved[i] {
			sn, ok := names.generate(c.name)
			if !ok {
				return pathErr("close", c.path, fmt.Errorf("%w: no unique 8.3 alias left in the directory", ErrTooLarge))
			}
			c.short = sn
		}
		c.long = nil
		if !isPlainShort(c.name) {
			c.long = utf16.Encode([]rune(c.name))
		}
		d.entries += 1 + int64(lfnSlots(len(c.long)))
	}
	limit := int64(maxDirEntries)
	if isRoot {
		limit = maxRootEntries
	}
	if d.entries > limit {
		return pathErr("close", d.path, fmt.Errorf("%w: %d directory entries, at most %d", ErrTooLarge, d.entries, limit))
	}
	for _, c := range d.sorted {
		if c.dir {
			if err := prepare(c, false, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// deriveSerial hashes what determines the image apart from file contents.
func deriveSerial(p *plan) uint32 {
	h := sha256.New()
	fmt.Fprintf(h, "vminit vfat\x00%s\x00%d %d\x00", p.opts.Label, p.dt.date, p.dt.time)
	var walk func(d *node)
	walk = func(d *node) {
		for _, c := range d.sorted {
			fmt.Fprintf(h, "%s\x00%t %d\x00", c.path, c.dir, c.size)
			if c.dir {
				walk(c)
			}
		}
	}
	walk(p.root)
	s := binary.LittleEndian.Uint32(h.Sum(nil))
	if s == 0 {
		s = 1 // 0 reads as "no serial" to blkid
	}
	return s
}
