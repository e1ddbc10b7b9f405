package iso9660

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits that keep a hostile image from costing more than its own size.
const (
	maxEntries  = 1 << 20 // files and directories in one image
	maxDepth    = 64      // directory nesting
	maxCEHops   = 32      // continuation areas per record, as Linux allows
	maxNameLen  = 1024    // bytes of one Rock Ridge name
	maxVDescs   = 64      // volume descriptors before the terminator
	systemAreas = 16
)

// The Reader is the same kind of file system in iso9660 and vfat.
var _ interface {
	fs.ReadDirFS
	fs.ReadFileFS
	fs.StatFS
} = (*Reader)(nil)

// A Reader reads an ISO 9660 image and serves its tree as an [io/fs.FS] (with ReadDir, ReadFile and Stat). It
// prefers Rock Ridge names (when the root carries SP and an RRIP ER entry),
// then Joliet, then the primary names with their ";1" versions and trailing
// dots removed.
//
// The reader is strict: anything it does not understand or that is out of
// bounds is an error wrapping [ErrFormat] rather than a guess. It only
// supports 2048-byte sectors, single-extent files and no interleaving, which
// covers the images this package, genisoimage and xorriso write. Directory
// sectors may be visited only once, so loops are errors, and the work and
// memory spent are bounded by the image size.
//
// A Reader is safe for concurrent use if the underlying [io.ReaderAt] is.
type Reader struct {
	// Label is the primary volume identifier, trailing spaces and NULs
	// removed.
	Label string
	// JolietLabel is the Joliet volume identifier, or "" without Joliet.
	JolietLabel string
	// JolietLevel is 1, 2 or 3 when a Joliet SVD is present, else 0.
	JolietLevel int
	// RockRidge is the identifier of the Rock Ridge ER entry, such as
	// "RRIP_1991A" or "IEEE_P1282", or "" when the image has no Rock Ridge.
	RockRidge string
	// UUID is what libblkid reports as the UUID: the PVD modification date
	// as "YYYY-MM-DD-HH-MM-SS-cc" (the creation date when unset).
	UUID string
	// VolumeSize is the volume space size from the PVD, in bytes.
	VolumeSize int64

	ra      io.ReaderAt
	size    int64
	root    *entry
	visited map[uint32]struct{} // directory sectors read
	count   int
	skip    int // SUSP LEN_SKP from the root's SP entry
	rr      bool
	joliet  bool
}

// entry is one node of the tree read from the image.
type entry struct {
	name  string
	mode  fs.FileMode
	size  int64
	off   int64 // byte offset of the data
	mtime time.Time
	kids  []*entry // sorted by name
}

// NewReader reads the volume descriptors and the whole directory tree of
// the image of size bytes in r. File contents are read on demand.
func NewReader(r io.ReaderAt, size int64) (*Reader, error) {
	if size < (systemAreas+2)*sectorSize {
		return nil, fmt.Errorf("%w: %d bytes is too small for an ISO 9660 image", ErrFormat, size)
	}
	rd := &Reader{ra: r, size: size}
	pvd, svd, err := rd.readDescriptors()
	if err != nil {
		return nil, err
	}
	if err := rd.readVolume(pvd, svd); err != nil {
		return nil, err
	}
	rd.visited = make(map[uint32]struct{})
	rootExt, rootLen, rootPX, err := rd.chooseTree(pvd, svd)
	if err != nil {
		return nil, err
	}
	rd.root = &entry{mode: fs.ModeDir | 0o555}
	if rd.rr && rootPX.px {
		rd.root.mode = fs.ModeDir | fs.FileMode(rootPX.mode&0o777)
	}
	if err := rd.readDir(rd.root, rootExt, rootLen, 0); err != nil {
		return nil, err
	}
	return rd, nil
}

// readDescriptors reads the volume descriptor set up to its terminator and
// returns the primary volume descriptor and the Joliet supplementary one
// (nil if there is none), setting JolietLevel.
func (r *Reader) readDescriptors() (pvd, svd []byte, err error) {
	sec := make([]byte, sectorSize)
	for i := int64(systemAreas); ; i++ {
		if i >= systemAreas+maxVDescs || (i+1)*sectorSize > r.size {
			return nil, nil, fmt.Errorf("%w: no volume descriptor set terminator", ErrFormat)
		}
		if err := r.readAt(sec, i*sectorSize); err != nil {
			return nil, nil, err
		}
		if string(sec[1:6]) != "CD001" || sec[6] != 1 {
			return nil, nil, fmt.Errorf("%w: bad volume descriptor at sector %d", ErrFormat, i)
		}
		if sec[0] == 255 {
			break
		}
		switch {
		case sec[0] == 1 && pvd == nil:
			pvd = slices.Clone(sec)
		case sec[0] == 2 && svd == nil && sec[88] == '%' && sec[89] == '/':
			switch sec[90] {
			case '@':
				r.JolietLevel = 1
			case 'C':
				r.JolietLevel = 2
			case 'E':
				r.JolietLevel = 3
			default:
				continue
			}
			svd = slices.Clone(sec)
		}
	}
	if pvd == nil {
		return nil, nil, fmt.Errorf("%w: no primary volume descriptor", ErrFormat)
	}
	return pvd, svd, nil
}

// readVolume reads the volume's block size, labels, size and UUID from
// its descriptors, and refuses a truncated image.
func (r *Reader) readVolume(pvd, svd []byte) error {
	if binary.LittleEndian.Uint16(pvd[128:]) != sectorSize {
		return fmt.Errorf("%w: logical block size %d is not 2048", ErrFormat, binary.LittleEndian.Uint16(pvd[128:]))
	}
	r.Label = trimID(string(pvd[40:72]))
	r.VolumeSize = int64(binary.LittleEndian.Uint32(pvd[80:])) * sectorSize
	if r.VolumeSize > r.size {
		// A kernel refuses to read past the device; a truncated copy
		// would fail on the guest, not here.
		return fmt.Errorf("%w: the volume is %d bytes but the image only %d: truncated", ErrFormat, r.VolumeSize, r.size)
	}
	r.UUID = blkidUUID(pvd[830:847])
	if r.UUID == "" {
		r.UUID = blkidUUID(pvd[813:830])
	}
	if svd != nil {
		r.JolietLabel = trimID(decodeUCS2(svd[40:72]))
	}
	return nil
}

// chooseTree decides which tree names the files: the
// primary tree with Rock Ridge, else the Joliet tree, else the plain
// primary tree. It returns that tree's root extent and length, and the
// root's own Rock Ridge entries.
//
// Rock Ridge is announced by SP at the start of the root's "." System
// Use area and an ER entry naming RRIP.
func (r *Reader) chooseTree(pvd, svd []byte) (rootExt, rootLen uint32, rootPX suspInfo, err error) {
	rootExt, rootLen, err = r.rootRecord(pvd[156:190])
	if err != nil {
		return 0, 0, rootPX, err
	}
	sec := make([]byte, sectorSize)
	if err := r.readAt(sec, int64(rootExt)*sectorSize); err != nil {
		return 0, 0, rootPX, err
	}
	if dl := int(sec[0]); dl >= 34+lenSP && sec[32] == 1 && sec[33] == 0 {
		su := sec[34:dl]
		if string(su[:2]) == "SP" && su[2] == lenSP && su[4] == 0xBE && su[5] == 0xEF {
			r.skip = int(su[6])
			var info suspInfo
			if err := r.parseSUSP(su, &info); err != nil {
				return 0, 0, rootPX, err
			}
			r.RockRidge = info.er
			rootPX = info
		}
	}
	switch {
	case r.RockRidge == "RRIP_1991A" || r.RockRidge == "IEEE_P1282" || r.RockRidge == "IEEE_1282":
		r.rr = true
	case svd != nil:
		r.joliet = true
		if rootExt, rootLen, err = r.rootRecord(svd[156:190]); err != nil {
			return 0, 0, rootPX, err
		}
	}
	return rootExt, rootLen, rootPX, nil
}

func (r *Reader) readAt(p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > r.size {
		return fmt.Errorf("%w: read of %d bytes at %d past the end (%d)", ErrFormat, len(p), off, r.size)
	}
	n, err := r.ra.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (r *Reader) rootRecord(b []byte) (extent, length uint32, err error) {
	if b[0] != 34 || b[25]&2 == 0 || b[32] != 1 || b[33] != 0 {
		return 0, 0, fmt.Errorf("%w: bad root directory record", ErrFormat)
	}
	return binary.LittleEndian.Uint32(b[2:]), binary.LittleEndian.Uint32(b[10:]), nil
}

// readDir reads the directory at extent into d, then its subdirectories.
func (r *Reader) readDir(d *entry, extent, length uint32, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: directories nested more than %d deep", ErrFormat, maxDepth)
	}
	nsec := (int64(length) + sectorSize - 1) / sectorSize
	if nsec == 0 || int64(extent)+nsec > r.size/sectorSize {
		return fmt.Errorf("%w: directory extent %d+%d outside the image", ErrFormat, extent, length)
	}
	sec := make([]byte, sectorSize)
	var subdirs []*entry
	var subext, sublen []uint32
	seen := 0
	for s := int64(0); s < nsec; s++ {
		// A sector is marked when it is read, so the set never outgrows
		// what the image really holds, whatever size the caller claims.
		abs := uint32(int64(extent) + s)
		if _, ok := r.visited[abs]; ok {
			return fmt.Errorf("%w: directory sector %d used twice (a loop?)", ErrFormat, abs)
		}
		r.visited[abs] = struct{}{}
		if err := r.readAt(sec, int64(abs)*sectorSize); err != nil {
			return err
		}
		lim := int(min(sectorSize, int64(length)-s*sectorSize))
		for p := 0; p < lim; {
			l := int(sec[p])
			if l == 0 {
				break // the rest of the sector is padding
			}
			if l < 34 || p+l > lim {
				return fmt.Errorf("%w: bad directory record at sector %d offset %d", ErrFormat, int64(extent)+s, p)
			}
			rec := sec[p : p+l]
			p += l
			seen++
			e, ext, err := r.record(rec, seen)
			if err != nil {
				return err
			}
			if e == nil {
				continue
			}
			r.count++
			if r.count > maxEntries {
				return fmt.Errorf("%w: more than %d entries", ErrFormat, maxEntries)
			}
			d.kids = append(d.kids, e)
			if e.mode.IsDir() {
				subdirs = append(subdirs, e)
				subext = append(subext, ext)
				sublen = append(sublen, uint32(e.size))
				e.size = 0
			}
		}
	}
	if seen < 2 {
		return fmt.Errorf("%w: directory at sector %d lacks \".\" and \"..\"", ErrFormat, extent)
	}
	slices.SortFunc(d.kids, func(a, b *entry) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(d.kids); i++ {
		if d.kids[i].name == d.kids[i-1].name {
			return fmt.Errorf("%w: name %q twice in one directory", ErrFormat, d.kids[i].name)
		}
	}
	for i, sd := range subdirs {
		if err := r.readDir(sd, subext[i], sublen[i], depth+1); err != nil {
			return err
		}
	}
	return nil
}

// record parses one directory record; nth counts from 1. It returns nil
// for "." and ".." and for associated files.
func (r *Reader) record(rec []byte, nth int) (*entry, uint32, error) {
	lenFI := int(rec[32])
	if 33+lenFI > len(rec) {
		return nil, 0, fmt.Errorf("%w: identifier overruns its directory record", ErrFormat)
	}
	id := rec[33 : 33+lenFI]
	dot := lenFI == 1 && id[0] <= 1
	if (nth <= 2) != dot || (dot && int(id[0]) != nth-1) {
		return nil, 0, fmt.Errorf("%w: directory does not start with \".\" and \"..\"", ErrFormat)
	}
	if dot {
		return nil, 0, nil
	}
	flags := rec[25]
	if flags&0x80 != 0 {
		return nil, 0, fmt.Errorf("%w: multi-extent files are not supported", ErrFormat)
	}
	if flags&0x04 != 0 {
		return nil, 0, nil // associated file (a resource fork): not part of the tree
	}
	extent := binary.LittleEndian.Uint32(rec[2:]) + uint32(rec[1])
	size := int64(binary.LittleEndian.Uint32(rec[10:]))
	e := &entry{size: size, off: int64(extent) * sectorSize, mtime: recordTime(rec[18:25])}
	isDir := flags&0x02 != 0
	e.mode = 0o444
	if isDir {
		e.mode = fs.ModeDir | 0o555
	} else if e.off+size > r.size {
		return nil, 0, fmt.Errorf("%w: file extent %d+%d outside the image", ErrFormat, extent, size)
	}

	var name string
	switch {
	case r.rr:
		su := 33 + lenFI + (1 - lenFI&1) + r.skip
		var info suspInfo
		if su < len(rec) {
			if err := r.parseSUSP(rec[su:], &info); err != nil {
				return nil, 0, err
			}
		}
		if info.name != nil {
			name = string(info.name)
		} else {
			name = primaryName(id)
		}
		if info.px {
			e.mode = e.mode&fs.ModeDir | fs.FileMode(info.mode&0o777)
		}
	case r.joliet:
		if lenFI%2 != 0 {
			return nil, 0, fmt.Errorf("%w: odd-length Joliet identifier", ErrFormat)
		}
		name = decodeUCS2(id)
		if i := strings.LastIndexByte(name, ';'); i >= 0 {
			name = name[:i]
		}
	default:
		name = primaryName(id)
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || !utf8.ValidString(name) {
		return nil, 0, fmt.Errorf("%w: invalid file name %q", ErrFormat, name)
	}
	e.name = name
	return e, extent, nil
}

// primaryName turns "USER_DAT.;1" into "USER_DAT": version and a trailing
// dot removed, case kept.
func primaryName(id []byte) string {
	if i := bytes.IndexByte(id, ';'); i >= 0 {
		id = id[:i]
	}
	id = bytes.TrimSuffix(id, []byte("."))
	return string(id)
}

type suspInfo struct {
	name []byte
	mode uint32
	px   bool
	er   string
}

// parseSUSP reads the System Use entries in su, following CE continuation
// areas, into info.
func (r *Reader) parseSUSP(su []byte, info *suspInfo) error {
	var ce []byte
	for hop := 0; ; hop++ {
		var next struct {
			block, off, len uint32
			ok              bool
		}
	entries:
		for len(su) >= 4 {
			l := int(su[2])
			if l < 4 || l > len(su) {
				break
			}
			body := su[4:l]
			switch string(su[:2]) {
			case "ST":
				break entries
			case "CE":
				if l >= lenCE {
					next.block = binary.LittleEndian.Uint32(body[0:])
					next.off = binary.LittleEndian.Uint32(body[8:])
					next.len = binary.LittleEndian.Uint32(body[16:])
					next.ok = true
				}
			case "NM":
				if len(body) >= 1 && body[0]&0x06 == 0 {
					if len(info.name)+len(body)-1 > maxNameLen {
						return fmt.Errorf("%w: Rock Ridge name longer than %d bytes", ErrFormat, maxNameLen)
					}
					info.name = append(info.name, body[1:]...)
				}
			case "PX":
				if len(body) >= 8 {
					info.mode = binary.LittleEndian.Uint32(body)
					info.px = true
				}
			case "ER":
				if len(body) >= 4 && info.er == "" {
					n := int(body[0])
					if 4+n <= len(body) {
						info.er = string(body[4 : 4+n])
					}
				}
			}
			su = su[l:]
		}
		if !next.ok {
			return nil
		}
		// Linux refuses continuation areas that cross a sector; so do we.
		if hop >= maxCEHops || next.off >= sectorSize || next.len > sectorSize-next.off {
			return fmt.Errorf("%w: bad continuation area", ErrFormat)
		}
		if ce == nil {
			ce = make([]byte, sectorSize)
		}
		su = ce[:next.len]
		if err := r.readAt(su, int64(next.block)*sectorSize+int64(next.off)); err != nil {
			return err
		}
	}
}

func trimID(s string) string { return strings.TrimRight(s, " \x00") }

// decodeUCS2 decodes big-endian UCS-2 (UTF-16 surrogates are accepted).
func decodeUCS2(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.BigEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// recordTime decodes a 7-byte directory record date.
func recordTime(b []byte) time.Time {
	zone := time.UTC
	if off := int(int8(b[6])); off != 0 {
		zone = time.FixedZone("", off*15*60)
	}
	return time.Date(1900+int(b[0]), time.Month(b[1]), int(b[2]), int(b[3]), int(b[4]), int(b[5]), 0, zone)
}

// blkidUUID formats a 17-byte volume descriptor date the way libblkid does,
// or returns "" for an unset or malformed date.
func blkidUUID(b []byte) string {
	unset := true
	for _, c := range b[:16] {
		if c < '0' || c > '9' {
			return ""
		}
		if c != '0' {
			unset = false
		}
	}
	if unset {
		return ""
	}
	s := string(b[:16])
	return s[0:4] + "-" + s[4:6] + "-" + s[6:8] + "-" + s[8:10] + "-" + s[10:12] + "-" + s[12:14] + "-" + s[14:16]
}

// Open opens the named file or directory. It implements [io/fs.FS]; the
// files it returns implement [io.ReaderAt] and [io.Seeker] too.
func (r *Reader) Open(name string) (fs.File, error) {
	e, err := r.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if e.mode.IsDir() {
		return &openDir{e: e}, nil
	}
	return &openFile{e: e, SectionReader: io.NewSectionReader(r.ra, e.off, e.size)}, nil
}

// ReadDir returns the entries of the named directory sorted by name. It
// implements [io/fs.ReadDirFS].
func (r *Reader) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := r.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !e.mode.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	list := make([]fs.DirEntry, len(e.kids))
	for i, k := range e.kids {
		list[i] = k
	}
	return list, nil
}

// ReadFile returns the contents of the named file. It implements
// [io/fs.ReadFileFS], as vfat's Reader does.
func (r *Reader) ReadFile(name string) ([]byte, error) {
	e, err := r.lookup("readfile", name)
	if err != nil {
		return nil, err
	}
	if e.mode.IsDir() {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: errors.New("is a directory")}
	}
	// NewReader checked that the extent lies inside the image, so size is
	// bounded by the image's.
	b := make([]byte, e.size)
	if err := r.readAt(b, e.off); err != nil {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: err}
	}
	return b, nil
}

// Stat returns the named file's or directory's [io/fs.FileInfo]. It
// implements [io/fs.StatFS], as vfat's Reader does.
func (r *Reader) Stat(name string) (fs.FileInfo, error) {
	e, err := r.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (r *Reader) lookup(op, name string) (*entry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	e := r.root
	if name == "." {
		return e, nil
	}
	for comp := range strings.SplitSeq(name, "/") {
		i, ok := slices.BinarySearchFunc(e.kids, comp, func(k *entry, s string) int { return strings.Compare(k.name, s) })
		if !ok || !e.mode.IsDir() {
			return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		e = e.kids[i]
	}
	return e, nil
}

// entry is its own fs.FileInfo and fs.DirEntry.
func (e *entry) Name() string {
	if e.name == "" {
		return "."
	}
	return e.name
}
func (e *entry) Size() int64                { return e.size }
func (e *entry) Mode() fs.FileMode          { return e.mode }
func (e *entry) ModTime() time.Time         { return e.mtime }
func (e *entry) IsDir() bool                { return e.mode.IsDir() }
func (e *entry) Sys() any                   { return nil }
func (e *entry) Type() fs.FileMode          { return e.mode.Type() }
func (e *entry) Info() (fs.FileInfo, error) { return e, nil }
func (e *entry) String() string             { return fs.FormatFileInfo(e) }

type openFile struct {
	e *entry
	*io.SectionReader
}

func (f *openFile) Stat() (fs.FileInfo, error) { return f.e, nil }
func (f *openFile) Close() error               { return nil }

type openDir struct {
	e   *entry
	pos int
}

func (d *openDir) Stat() (fs.FileInfo, error) { return d.e, nil }
func (d *openDir) Close() error               { return nil }
func (d *openDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.e.Name(), Err: errors.New("is a directory")}
}

// ReadDir implements [io/fs.ReadDirFile].
func (d *openDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.e.kids[d.pos:]
	if n > 0 && len(rest) == 0 {
		return nil, io.EOF
	}
	if n > 0 && n < len(rest) {
		rest = rest[:n]
	}
	d.pos += len(rest)
	list := make([]fs.DirEntry, len(rest))
	for i, k := range rest {
		list[i] = k
	}
	return list, nil
}
