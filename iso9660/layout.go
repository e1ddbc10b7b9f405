package iso9660

import (
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"
)

const (
	sectorSize = 2048
	// firstFreeSector follows the system area (0-15), the PVD (16), the
	// Joliet SVD (17) and the terminator (18).
	firstFreeSector = 19
	// minSectors is the smallest volume written: 0x11000 bytes. libarchive
	// rejects a volume of 20 sectors or fewer, and busybox's volume_id
	// (findfs and blkid in CirrOS and busybox initramfs images) reads a
	// 0x11000-byte buffer before it probes iso9660 and gives up on a
	// shorter device, so a smaller seed has no label there (found by booting
	// a 30-sector seed under QEMU: findfs LABEL=cidata found nothing).
	minSectors = 0x11000 / sectorSize
	// maxRecord: a directory record length is one byte, and kept even.
	maxRecord = 254

	// Sizes of the System Use entries (SUSP 1.10, RRIP 1.10).
	lenSP  = 7
	lenRR  = 5
	lenPX  = 36 // RRIP 1.10; 1.12's 44-byte PX adds a serial number
	lenTF  = 5 + 3*7
	lenCE  = 28
	lenNM  = 5 // plus the name
	suBase = lenRR + lenPX + lenTF

	erID   = "RRIP_1991A"
	erDesc = "THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS"
	erSrc  = "PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE PUBLISHER IDENTIFIER IN PRIMARY VOLUME DESCRIPTOR FOR CONTACT INFORMATION."
	lenER  = 8 + len(erID) + len(erDesc) + len(erSrc) // 237

	// Sizes of the records of "." and "..": 33 bytes and a 1-byte
	// identifier, plus System Use entries in the primary tree.
	lenDot     = 34
	lenRootDot = lenDot + lenSP + suBase + lenCE // SP first, ER through CE
	lenDotRR   = lenDot + suBase + 1             // padded to even
)

// layout holds what Close computes before writing a byte.
type layout struct {
	pdirs, jdirs []*node // directories in path table order, per tree
	ptSize       uint32  // primary path table size in bytes
	jptSize      uint32  // Joliet path table size in bytes
	ptL, ptM     uint32  // primary path table locations
	jptL, jptM   uint32  // Joliet path table locations
	ceStart      uint32  // first sector of the continuation area
	ceSecs       uint32
	dataStart    uint32 // first sector of file data
	dataEnd      uint32 // sector after the last file
	total        uint32 // volume space size in sectors, after padding
	date7        [7]byte
	date17       [17]byte
}

func sectors(n int64) int64 { return (n + sectorSize - 1) / sectorSize }

// recLen returns the length of a directory record with an identifier of
// lenFI bytes and su bytes of System Use: 33 fixed bytes, the identifier, a
// pad byte when lenFI is even, then System Use, then a pad to even length.
func recLen(lenFI, su int) int {
	n := 33 + lenFI + (1 - lenFI&1) + su
	return n + n&1
}

// packRecord returns the position after placing a record of l bytes at
// byte position pos, moving it to the next sector if it would cross a sector
// boundary: ECMA-119 forbids that for directory records, and Linux for
// continuation areas.
func packRecord(pos int64, l int) int64 {
	if rem := sectorSize - pos%sectorSize; int64(l) > rem {
		pos += rem
	}
	return pos + int64(l)
}

// layout computes, before a byte is written, where everything goes: the
// order of both trees, the size of every path table and directory, then
// the sectors of each, in the order they are written.
func (w *Writer) layout() error {
	l := &w.l
	t := w.opts.ModTime
	l.date7 = [7]byte{byte(t.Year() - 1900), byte(t.Month()), byte(t.Day()), byte(t.Hour()), byte(t.Minute()), byte(t.Second()), 0}
	putDate17(&l.date17, t)

	w.orderTrees()
	w.sizePathTables()
	w.sizePrimaryDirs()
	w.sizeJolietDirs()
	cur, err := w.placeMetadata()
	if err != nil {
		return err
	}
	return w.placeFiles(cur)
}

// orderTrees numbers the directories of both trees in path table order
// (breadth-first) and gives every node its primary identifier.
//
// Joliet tree order: breadth-first, children by name. Sorting by the UTF-8
// name is sorting by UCS-2 code units, because every name is in the BMP.
// The primary identifiers are assigned in this order so that collision
// suffixes do not depend on the order of Add calls.
func (w *Writer) orderTrees() {
	l := &w.l
	ndirs := w.ndir + 1
	l.jdirs = make([]*node, 1, ndirs)
	l.jdirs[0] = &w.root
	for i := 0; i < len(l.jdirs); i++ {
		d := l.jdirs[i]
		d.jnum = uint16(i + 1)
		slices.SortFunc(d.kids, func(a, b *node) int { return strings.Compare(a.name, b.name) })
		assignPrimaryIDs(d)
		for _, k := range d.kids {
			if k.isDir {
				l.jdirs = append(l.jdirs, k)
			}
		}
	}
	l.pdirs = make([]*node, 1, ndirs)
	l.pdirs[0] = &w.root
	for i := 0; i < len(l.pdirs); i++ {
		d := l.pdirs[i]
		d.pnum = uint16(i + 1)
		for _, k := range d.pkids {
			if k.isDir {
				l.pdirs = append(l.pdirs, k)
			}
		}
	}
}

// sizePathTables sizes the primary and Joliet path tables.
func (w *Writer) sizePathTables() {
	l := &w.l
	for _, d := range l.pdirs {
		l.ptSize += ptRecLen(len(d.pid))
		l.jptSize += ptRecLen(2 * int(d.jlen))
	}
	// The root is one byte (0x00) in both trees.
	l.ptSize += ptRecLen(1) - ptRecLen(0)
	l.jptSize += ptRecLen(1) - ptRecLen(0)
}

// sizePrimaryDirs sizes every record and directory of the primary tree,
// with their Rock Ridge entries, and the continuation area. The ER entry
// (237 bytes) never fits in the root's "." record, so it always starts the
// area.
func (w *Writer) sizePrimaryDirs() {
	l := &w.l
	ce := int64(lenER)
	for _, d := range l.pdirs {
		dot := lenDotRR
		if d == &w.root {
			dot = lenRootDot
		}
		pos := packRecord(0, dot)
		pos = packRecord(pos, lenDotRR)
		for _, k := range d.pkids {
			su := suBase + lenNM + len(k.name)
			n := recLen(len(k.pid), su)
			if n > maxRecord {
				// Names longer than the record can hold move to the
				// continuation area, which Linux, libarchive and the BSDs
				// all follow. A CE area must not cross a sector (Linux
				// rejects it), so it is packed like directory records.
				n = recLen(len(k.pid), suBase+lenCE)
				k.nmCE = true
				ce = packRecord(ce, lenNM+len(k.name))
				k.ceOff = uint32(ce) - uint32(lenNM+len(k.name))
			}
			k.prec = uint8(n)
			pos = packRecord(pos, n)
		}
		d.psecs = uint32(sectors(pos))
	}
	l.ceSecs = uint32(sectors(ce))
}

// sizeJolietDirs sizes every record and directory of the Joliet tree.
func (w *Writer) sizeJolietDirs() {
	for _, d := range w.l.jdirs {
		pos := packRecord(0, lenDot)
		pos = packRecord(pos, lenDot)
		for _, k := range d.kids {
			k.jrec = uint8(recLen(2*int(k.jlen), 0))
			pos = packRecord(pos, int(k.jrec))
		}
		d.jsecs = uint32(sectors(pos))
	}
}

// placeMetadata allocates the sectors of the path tables, primary
// directories, continuation area and Joliet directories, in that order,
// and returns the first sector after them. Metadata first keeps a seed's
// directories together at the start, as genisoimage and xorriso do.
func (w *Writer) placeMetadata() (int64, error) {
	l := &w.l
	cur := int64(firstFreeSector)
	l.ptL = uint32(cur)
	cur += sectors(int64(l.ptSize))
	l.ptM = uint32(cur)
	cur += sectors(int64(l.ptSize))
	l.jptL = uint32(cur)
	cur += sectors(int64(l.jptSize))
	l.jptM = uint32(cur)
	cur += sectors(int64(l.jptSize))
	for _, d := range l.pdirs {
		d.extent = uint32(cur)
		cur += int64(d.psecs)
	}
	l.ceStart = uint32(cur)
	cur += int64(l.ceSecs)
	for _, d := range l.jdirs {
		d.jextent = uint32(cur)
		cur += int64(d.jsecs)
	}
	if cur > math.MaxUint32 {
		return 0, fmt.Errorf("%w: image of more than 2^32 sectors", ErrTooLarge)
	}
	return cur, nil
}

// placeFiles allocates the files' data from sector cur on, in Joliet tree
// order, and sizes the volume: at least minSectors, padded to
// Options.Alignment.
func (w *Writer) placeFiles(cur int64) error {
	l := &w.l
	l.dataStart = uint32(cur)
	emptyAtEnd := false
	for _, d := range l.jdirs {
		for _, k := range d.kids {
			if k.isDir {
				continue
			}
			// An empty file points at the next free sector and occupies
			// none, as with genisoimage.
			k.extent = uint32(cur)
			cur += sectors(k.size)
			emptyAtEnd = k.size == 0
			if cur > math.MaxUint32 {
				return &fs.PathError{Op: "write", Path: k.path, Err: fmt.Errorf("%w: image of more than 2^32 sectors", ErrTooLarge)}
			}
		}
	}
	l.dataEnd = uint32(cur)
	total := max(cur, minSectors)
	if emptyAtEnd {
		// Keep even an empty file's extent inside the volume.
		total = max(total, cur+1)
	}
	align := w.opts.Alignment / sectorSize
	total = (total + align - 1) / align * align
	if total > math.MaxUint32 {
		return fmt.Errorf("%w: image of more than 2^32 sectors", ErrTooLarge)
	}
	l.total = uint32(total)
	return nil
}

// ptRecLen is the length of a path table record with an identifier of n
// bytes: 8 fixed bytes, the identifier, and a pad byte when n is odd.
func ptRecLen(n int) uint32 { return uint32(8 + n + n&1) }

// assignPrimaryIDs gives d's children unique primary identifiers and sorts
// them into d.pkids. d.kids must already be sorted by name.
func assignPrimaryIDs(d *node) {
	if len(d.kids) == 0 {
		return
	}
	var used map[string]bool // allocated only for more than one child
	var next map[string]int  // collision counters, per natural identifier
	for _, k := range d.kids {
		id := primaryID(k.name, k.isDir, 0)
		if len(d.kids) > 1 {
			if used == nil {
				used = make(map[string]bool, len(d.kids))
			}
			if used[primaryKey(id, k.isDir)] {
				if next == nil {
					next = make(map[string]int)
				}
				natural := id
				n := next[natural]
				for {
					n++
					id = primaryID(k.name, k.isDir, n)
					if !used[primaryKey(id, k.isDir)] {
						break
					}
				}
				next[natural] = n
			}
			used[primaryKey(id, k.isDir)] = true
		}
		k.pid = id
	}
	if len(d.kids) == 1 {
		d.pkids = d.kids
		return
	}
	d.pkids = slices.Clone(d.kids)
	slices.SortFunc(d.pkids, func(a, b *node) int { return comparePrimary(a.pid, b.pid) })
}
