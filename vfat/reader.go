package vfat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf16"
)

// The Reader is the same kind of file system in iso9660 and vfat.
var _ interface {
	fs.ReadDirFS
	fs.ReadFileFS
	fs.StatFS
} = (*Reader)(nil)

// Reader is a FAT12/FAT16 volume opened for reading. It implements fs.FS
// (with ReadDir, ReadFile and Stat) over the long names; lookups are exact
// and case-sensitive, as fs.FS requires, even though FAT itself is not.
//
// NewReader checks the whole volume up front: the BPB, every directory and
// every cluster chain (in range, no loops, no cluster used twice, lengths
// matching file sizes), so that later reads cannot fail on structure and
// walking the tree always terminates.
type Reader struct {
	// Label is the root-directory volume-label entry (blkid's LABEL), with
	// trailing spaces removed; "" if there is none.
	Label string
	// BootLabel is the EBPB label (blkid's LABEL_FATBOOT), trailing spaces
	// removed. Unlabelled volumes usually hold "NO NAME" here.
	BootLabel string
	// Serial is the EBPB volume serial number (blkid's UUID).
	Serial uint32
	// Type is "FAT12" or "FAT16", decided by the cluster count as Windows
	// and Linux do, not by the BPB's type string.
	Type string
	// ClusterSize is the cluster size in bytes.
	ClusterSize int64

	ra        io.ReaderAt
	dataStart int64 // byte offset of cluster 2
	root      *rnode
}

// rnode is one directory entry of the opened image.
type rnode struct {
	name     string
	dir      bool
	size     int64
	mod      time.Time
	first    uint32
	clusters []uint32 // the file's chain; nil for directories and empty files
	children []*rnode // sorted by name
}

// vol holds what parsing needs beyond the Reader.
type vol struct {
	rd       *Reader
	bps      int64
	count    int64 // data clusters; valid numbers are 2..count+1
	fat      []byte
	fat16    bool
	used     []bool // cluster already belongs to a chain
	rootData []byte
}

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// readFull reads len(b) bytes at off, treating a short read as an error
// even if the ReaderAt reports io.EOF.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// NewReader reads the volume in r, whose length is size bytes.
func NewReader(r io.ReaderAt, size int64) (*Reader, error) {
	rd, err := newReader(r, size)
	if err != nil {
		return nil, pathErr("open", ".", err)
	}
	return rd, nil
}

// bootSector is what newReader needs of a boot sector's BIOS Parameter
// Block, in its own units (sectors of bps bytes).
type bootSector struct {
	bps, spc, rsv, nfats, rootEnt, total, fatSz int64
}

// parseBootSector reads the BPB of boot sector bs and refuses what is not
// a FAT12 or FAT16 volume this reader can walk.
func parseBootSector(bs []byte) (bootSector, error) {
	le := binary.LittleEndian
	if bs[510] != 0x55 || bs[511] != 0xAA {
		return bootSector{}, formatErr("no 0x55AA boot signature")
	}
	if bs[0] != 0xEB && bs[0] != 0xE9 {
		return bootSector{}, formatErr("boot sector does not start with a jump")
	}
	b := bootSector{
		bps:     int64(le.Uint16(bs[11:])),
		spc:     int64(bs[13]),
		rsv:     int64(le.Uint16(bs[14:])),
		nfats:   int64(bs[16]),
		rootEnt: int64(le.Uint16(bs[17:])),
		total:   int64(le.Uint16(bs[19:])),
		fatSz:   int64(le.Uint16(bs[22:])),
	}
	if b.total == 0 {
		b.total = int64(le.Uint32(bs[32:]))
	}
	switch {
	case b.bps < 512 || b.bps > 4096 || b.bps&(b.bps-1) != 0:
		return bootSector{}, formatErr("bytes per sector %d", b.bps)
	case b.spc == 0 || b.spc&(b.spc-1) != 0:
		return bootSector{}, formatErr("sectors per cluster %d", b.spc)
	case b.rsv == 0:
		return bootSector{}, formatErr("no reserved sectors")
	case b.nfats == 0:
		return bootSector{}, formatErr("no FATs")
	case b.rootEnt == 0 || b.fatSz == 0:
		return bootSector{}, formatErr("FAT32 or exFAT volumes are not supported")
	case bs[21] < 0xF0 && bs[21] != 0:
		// 0 is tolerated: some old formatters leave it unset.
		return bootSector{}, formatErr("media descriptor %#x", bs[21])
	}
	return b, nil
}

func newReader(r io.ReaderAt, size int64) (*Reader, error) {
	if size < sectorSize {
		return nil, formatErr("image of %d bytes is smaller than a boot sector", size)
	}
	bs := make([]byte, sectorSize)
	if err := readFull(r, bs, 0); err != nil {
		return nil, err
	}
	b, err := parseBootSector(bs)
	if err != nil {
		return nil, err
	}
	rootSecs := (b.rootEnt*dirEntrySize + b.bps - 1) / b.bps
	dataSec := b.rsv + b.nfats*b.fatSz + rootSecs
	if b.total <= dataSec {
		return nil, formatErr("%d sectors leave no data region", b.total)
	}
	if b.total*b.bps > size {
		return nil, formatErr("volume of %d bytes in an image of %d", b.total*b.bps, size)
	}
	count := (b.total - dataSec) / b.spc
	v := &vol{bps: b.bps, count: count}
	rd := &Reader{ra: r, ClusterSize: b.spc * b.bps, dataStart: dataSec * b.bps}
	v.rd = rd
	switch {
	case count == 0:
		return nil, formatErr("no data clusters")
	case count <= maxFAT12Clusters:
		rd.Type = "FAT12"
	case count <= maxFAT16Clusters:
		rd.Type, v.fat16 = "FAT16", true
	default:
		return nil, formatErr("%d clusters means FAT32, which is not supported", count)
	}
	fb := fatBytes(count+2, v.fat16)
	if fb > b.fatSz*b.bps {
		return nil, formatErr("FAT of %d sectors cannot map %d clusters", b.fatSz, count)
	}
	v.fat = make([]byte, fb)
	if err := readFull(r, v.fat, b.rsv*b.bps); err != nil {
		return nil, err
	}
	v.used = make([]bool, count+2)

	if bs[38] == 0x29 || bs[38] == 0x28 {
		rd.Serial = binary.LittleEndian.Uint32(bs[39:])
	}
	if bs[38] == 0x29 {
		rd.BootLabel = strings.TrimRight(decodeShort(bs[43:54]), " ")
	}

	v.rootData = make([]byte, b.rootEnt*dirEntrySize)
	if err := readFull(r, v.rootData, (b.rsv+b.nfats*b.fatSz)*b.bps); err != nil {
		return nil, err
	}
	if err := v.walk(); err != nil {
		return nil, err
	}
	return rd, nil
}

// next returns the FAT entry for cluster c.
func (v *vol) next(c uint32) uint32 {
	if v.fat16 {
		return uint32(binary.LittleEndian.Uint16(v.fat[2*c:]))
	}
	off := c + c/2
	x := uint32(v.fat[off]) | uint32(v.fat[off+1])<<8
	if c&1 == 1 {
		return x >> 4
	}
	return x & 0xFFF
}

// chain follows a cluster chain from first, allowing at most limit
// clusters. Every cluster is marked as used, so a loop or a cross-link with
// another chain is an error and the total work over all chains is bounded
// by the cluster count.
func (v *vol) chain(first uint32, limit int64, what string) ([]uint32, error) {
	eoc := uint32(0xFF8)
	if v.fat16 {
		eoc = 0xFFF8
	}
	var out []uint32
	c := first
	for {
		if c < 2 || int64(c) >= v.count+2 {
			return nil, formatErr("%s: cluster %d out of range", what, c)
		}
		if v.used[c] {
			return nil, formatErr("%s: cluster %d is looped or cross-linked", what, c)
		}
		v.used[c] = true
		out = append(out, c)
		if int64(len(out)) > limit {
			return nil, formatErr("%s: chain longer than %d clusters", what, limit)
		}
		n := v.next(c)
		if n >= eoc {
			return out, nil
		}
		// Free (0), reserved (1) and bad (0xFF7/0xFFF7) values all fail
		// the range check on the next iteration: the largest valid cluster
		// number is below the bad-cluster mark for both FAT widths.
		c = n
	}
}

func (v *vol) walk() error {
	rd := v.rd
	rd.root = &rnode{dir: true}
	type job struct {
		n    *rnode
		data []byte
		path string
	}
	queue := []job{{rd.root, v.rootData, "."}}
	cs := rd.ClusterSize
	maxDirClusters := (maxDirEntries*dirEntrySize + cs - 1) / cs
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		isRoot := j.n == rd.root
		entries, label, err := parseDir(j.data, isRoot)
		if err != nil {
			where := "directory " + j.path
			if isRoot {
				where = "root directory"
			}
			return fmt.Errorf("%s: %w", where, err)
		}
		if isRoot {
			rd.Label = label
		}
		seen := make(map[string]bool, len(entries))
		for _, e := range entries {
			p := path.Join(j.path, e.name)
			if seen[e.name] {
				return formatErr("%s: duplicate name", p)
			}
			seen[e.name] = true
			if e.dir {
				if e.first == 0 {
					return formatErr("%s: directory without a cluster", p)
				}
				cl, err := v.chain(e.first, maxDirClusters, p)
				if err != nil {
					return err
				}
				data := make([]byte, int64(len(cl))*cs)
				for i, c := range cl {
					if err := readFull(rd.ra, data[int64(i)*cs:int64(i+1)*cs], rd.clusterOffset(c)); err != nil {
						return err
					}
				}
				queue = append(queue, job{e, data, p})
			} else if e.size > 0 {
				want := (e.size + cs - 1) / cs
				cl, err := v.chain(e.first, want, p)
				if err != nil {
					return err
				}
				if int64(len(cl)) != want {
					return formatErr("%s: %d bytes in %d clusters", p, e.size, len(cl))
				}
				e.clusters = cl
			} else if e.first != 0 {
				// An empty file owning clusters: drivers accept it, but
				// for a strict reader it is an inconsistency.
				return formatErr("%s: empty file with cluster %d", p, e.first)
			}
			j.n.children = append(j.n.children, e)
		}
		sort.Slice(j.n.children, func(a, b int) bool { return j.n.children[a].name < j.n.children[b].name })
	}
	return nil
}

func (r *Reader) clusterOffset(c uint32) int64 {
	return r.dataStart + int64(c-2)*r.ClusterSize
}

// decodeShort turns 8.3 bytes into a string. Bytes above 0x7F depend on an
// OEM code page the volume does not record; they are read as Latin-1 so
// every name is valid UTF-8.
func decodeShort(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

// parseDir decodes the entries of one directory. It returns files and
// subdirectories (not "." and "..") and, for the root, the volume label.
func parseDir(data []byte, isRoot bool) (out []*rnode, label string, err error) {
	var lfn longName
	haveLabel := false
	for off := 0; off+dirEntrySize <= len(data); off += dirEntrySize {
		e := data[off : off+dirEntrySize]
		switch e[0] {
		case 0x00:
			return out, label, nil // end of directory
		case 0xE5:
			lfn.valid = false // deleted entry
			continue
		}
		attr := e[11]
		if attr&0x3F == attrLFN {
			lfn.add(e)
			continue
		}
		var sn [11]byte
		copy(sn[:], e[0:11])
		long := lfn.take(sn)
		if attr&attrVolumeID != 0 {
			if isRoot && !haveLabel {
				label = strings.TrimRight(decodeShort(sn[:]), " ")
				haveLabel = true
			}
			continue
		}
		if sn[0] == '.' {
			continue // "." and ".." (a short name cannot otherwise start with a dot)
		}
		name := long
		if name == "" {
			name = shortToName(sn, e[12])
		}
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			return nil, "", formatErr("unusable name %q", name)
		}
		le := binary.LittleEndian
		n := &rnode{
			name: name,
			dir:  attr&attrDir != 0,
			mod:  fromDOSTime(le.Uint16(e[24:]), le.Uint16(e[22:])),
			// Offset 20 is the high half of the cluster only on FAT32;
			// FAT12/16 drivers ignore it (OS/2 kept other data there).
			first: uint32(le.Uint16(e[26:])),
		}
		if !n.dir {
			n.size = int64(le.Uint32(e[28:]))
		}
		out = append(out, n)
	}
	return out, label, nil
}

// longName assembles a long file name from the LFN entries that precede
// the short entry it belongs to, last part first.
type longName struct {
	buf   []uint16 // the name being assembled
	sum   byte     // the short name's checksum, as every part records it
	next  int      // next sequence number expected; 0 when complete
	valid bool
}

// add takes one LFN entry; an orphaned or out-of-order part is ignored and
// spoils the name being assembled.
func (l *longName) add(e []byte) {
	seq := int(e[0] & 0x1F)
	switch {
	case e[0]&0x40 != 0 && seq >= 1 && seq <= 20:
		l.buf = make([]uint16, seq*13)
		l.sum, l.next, l.valid = e[13], seq, true
	case l.valid && seq >= 1 && seq == l.next && e[13] == l.sum && e[0]&0x40 == 0:
	default:
		l.valid = false
		return
	}
	for i, o := range lfnCharOffsets {
		l.buf[(seq-1)*13+i] = binary.LittleEndian.Uint16(e[o:])
	}
	l.next--
}

// take returns the long name of the short entry sn, or "" when it has no
// complete one whose checksum matches, and starts over.
func (l *longName) take(sn [11]byte) string {
	complete := l.valid && l.next == 0
	l.valid = false
	if !complete || lfnChecksum(sn) != l.sum {
		return ""
	}
	u := l.buf
	for i, c := range u {
		if c == 0 {
			u = u[:i]
			break
		}
	}
	return string(utf16.Decode(u))
}

// shortToName renders an 8.3 entry, applying the Windows NT lower-case
// flags (0x08 stem, 0x10 extension) that mtools and Linux also honour.
func shortToName(sn [11]byte, flags byte) string {
	if sn[0] == 0x05 {
		sn[0] = 0xE5 // 0xE5 as a first character is stored as 0x05
	}
	lower := func(b []byte, on bool) string {
		s := strings.TrimRight(decodeShort(b), " ")
		if on {
			s = strings.Map(func(r rune) rune {
				if r >= 'A' && r <= 'Z' {
					return r + 'a' - 'A'
				}
				return r
			}, s)
		}
		return s
	}
	base := lower(sn[:8], flags&0x08 != 0)
	ext := lower(sn[8:], flags&0x10 != 0)
	if ext != "" {
		return base + "." + ext
	}
	return base
}

func (r *Reader) lookup(op, name string) (*rnode, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	n := r.root
	if name == "." {
		return n, nil
	}
	for _, elem := range strings.Split(name, "/") {
		if !n.dir {
			return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		i := sort.Search(len(n.children), func(i int) bool { return n.children[i].name >= elem })
		if i == len(n.children) || n.children[i].name != elem {
			return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		n = n.children[i]
	}
	return n, nil
}

// Open implements fs.FS. Files also implement io.ReaderAt and io.Seeker.
func (r *Reader) Open(name string) (fs.File, error) {
	n, err := r.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return &dirFile{n: n, name: name}, nil
	}
	return &file{rd: r, n: n, name: name}, nil
}

// ReadDir implements fs.ReadDirFS.
func (r *Reader) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := r.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	out := make([]fs.DirEntry, len(n.children))
	for i, c := range n.children {
		out[i] = info{c}
	}
	return out, nil
}

// ReadFile implements fs.ReadFileFS.
func (r *Reader) ReadFile(name string) ([]byte, error) {
	n, err := r.lookup("readfile", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: errors.New("is a directory")}
	}
	b := make([]byte, n.size)
	f := &file{rd: r, n: n, name: name}
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return b, nil
}

// Stat implements fs.StatFS.
func (r *Reader) Stat(name string) (fs.FileInfo, error) {
	n, err := r.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return info{n}, nil
}

// info is both the fs.FileInfo and the fs.DirEntry of a node.
type info struct{ n *rnode }

func (i info) Name() string {
	if i.n.name == "" {
		return "."
	}
	return i.n.name
}
func (i info) Size() int64 { return i.n.size }
func (i info) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i info) ModTime() time.Time         { return i.n.mod }
func (i info) IsDir() bool                { return i.n.dir }
func (i info) Sys() any                   { return nil }
func (i info) Type() fs.FileMode          { return i.Mode().Type() }
func (i info) Info() (fs.FileInfo, error) { return i, nil }

type file struct {
	rd   *Reader
	n    *rnode
	name string
	off  int64
}

func (f *file) Stat() (fs.FileInfo, error) { return info{f.n}, nil }
func (f *file) Close() error               { return nil }

func (f *file) Read(b []byte) (int, error) {
	n, err := f.ReadAt(b, f.off)
	f.off += int64(n)
	return n, err
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		offset += f.n.size
	default:
		offset = -1
	}
	if offset < 0 {
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrInvalid}
	}
	f.off = offset
	return offset, nil
}

// ReadAt reads from the file's cluster chain, which NewReader has checked.
func (f *file) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	cs := f.rd.ClusterSize
	n := 0
	for n < len(b) && off < f.n.size {
		c := f.n.clusters[off/cs]
		in := off % cs
		k := min(int64(len(b)-n), cs-in, f.n.size-off)
		if err := readFull(f.rd.ra, b[n:n+int(k)], f.rd.clusterOffset(c)+in); err != nil {
			return n, &fs.PathError{Op: "read", Path: f.name, Err: err}
		}
		n += int(k)
		off += k
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

type dirFile struct {
	n    *rnode
	name string
	pos  int
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return info{d.n}, nil }
func (d *dirFile) Close() error               { return nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errors.New("is a directory")}
}

func (d *dirFile) ReadDir(count int) ([]fs.DirEntry, error) {
	rest := d.n.children[d.pos:]
	if count > 0 {
		if len(rest) == 0 {
			return nil, io.EOF
		}
		rest = rest[:min(count, len(rest))]
	}
	d.pos += len(rest)
	out := make([]fs.DirEntry, len(rest))
	for i, c := range rest {
		out[i] = info{c}
	}
	return out, nil
}
