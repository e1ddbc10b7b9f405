package iso9660

import (
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"
)

// bufSize is the write granularity. Metadata and small files collect in
// one buffer, so a whole seed reaches the destination in one Write; large
// files pass through it in 256 KiB pieces, which keeps syscalls few and
// memory flat.
const bufSize = 256 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// out is a sequential writer with a reused buffer. After the first error
// every method is a no-op and err holds the error.
type out struct {
	w   io.Writer
	buf []byte
	n   int   // bytes buffered
	off int64 // bytes flushed
	err error
}

func (o *out) pos() int64 { return o.off + int64(o.n) }

func (o *out) flush() {
	if o.n == 0 || o.err != nil {
		o.n = 0
		return
	}
	k, err := o.w.Write(o.buf[:o.n])
	if err == nil && k != o.n {
		err = io.ErrShortWrite
	}
	o.off += int64(k)
	o.n = 0
	o.err = err
}

// grow returns the next k zeroed bytes of output to fill in; k <= bufSize.
func (o *out) grow(k int) []byte {
	if o.n+k > len(o.buf) {
		o.flush()
	}
	b := o.buf[o.n : o.n+k]
	clear(b)
	o.n += k
	return b
}

// zeros writes k zero bytes.
func (o *out) zeros(k int64) {
	for k > 0 {
		c := int(min(k, int64(len(o.buf))))
		o.grow(c)
		k -= int64(c)
	}
}

// padTo writes zeros up to byte position p.
func (o *out) padTo(p int64) { o.zeros(p - o.pos()) }

// padSector writes zeros up to the next sector boundary.
func (o *out) padSector() {
	if r := o.pos() % sectorSize; r != 0 {
		o.zeros(sectorSize - r)
	}
}

// record returns room for a directory record of l bytes, first moving to
// the next sector if the record would cross a sector boundary.
func (o *out) record(l int) []byte {
	if rem := sectorSize - o.pos()%sectorSize; int64(l) > rem {
		o.zeros(rem)
	}
	return o.grow(l)
}

// readFrom copies exactly size bytes from r and returns how many it got.
func (o *out) readFrom(r io.Reader, size int64) (int64, error) {
	var got int64
	for got < size && o.err == nil {
		if o.n == len(o.buf) {
			o.flush()
		}
		c := int(min(size-got, int64(len(o.buf)-o.n)))
		k, err := io.ReadFull(r, o.buf[o.n:o.n+c])
		o.n += k
		got += int64(k)
		if err != nil {
			return got, err
		}
	}
	return got, o.err
}

// at checks that the output is where the layout said a region starts. A
// mismatch is a bug in this package, never in the input.
func (o *out) at(sector uint32, what, path string) error {
	if o.err != nil {
		return o.err
	}
	if p := o.pos(); p != int64(sector)*sectorSize {
		return fmt.Errorf("iso9660: internal error: %s %q at byte %d, want sector %d", what, path, p, sector)
	}
	return nil
}

func (w *Writer) write() error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	o := &w.out
	*o = out{w: w.dst, buf: *bp}
	l := &w.l

	o.zeros(16 * sectorSize) // system area
	w.volumeDescriptor(o.grow(sectorSize), false)
	w.volumeDescriptor(o.grow(sectorSize), true)
	term := o.grow(sectorSize)
	term[0] = 255
	copy(term[1:6], "CD001")
	term[6] = 1

	if err := o.at(l.ptL, "path tables", ""); err != nil {
		return err
	}
	w.pathTable(false, binary.LittleEndian)
	w.pathTable(false, binary.BigEndian)
	w.pathTable(true, binary.LittleEndian)
	w.pathTable(true, binary.BigEndian)

	for _, d := range l.pdirs {
		if err := o.at(d.extent, "directory", d.path); err != nil {
			return err
		}
		w.primaryDir(d)
	}

	if err := o.at(l.ceStart, "continuation area", ""); err != nil {
		return err
	}
	w.continuationArea()

	for _, d := range l.jdirs {
		if err := o.at(d.jextent, "Joliet directory", d.path); err != nil {
			return err
		}
		w.jolietDir(d)
	}

	for _, d := range l.jdirs {
		for _, k := range d.kids {
			if k.isDir {
				continue
			}
			if err := o.at(k.extent, "file", k.path); err != nil {
				return err
			}
			if err := w.fileData(k); err != nil {
				return err
			}
			o.padSector()
		}
	}
	if err := o.at(l.dataEnd, "end of data", ""); err != nil {
		return err
	}
	o.padTo(int64(l.total) * sectorSize)
	o.flush()
	return o.err
}

func (w *Writer) fileData(k *node) error {
	o := &w.out
	r := k.r
	if k.fsys != nil {
		f, err := k.fsys.Open(k.path)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	got, err := o.readFrom(r, k.size)
	if o.err != nil {
		return o.err
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &fs.PathError{Op: "write", Path: k.path, Err: fmt.Errorf("%w: reader yielded %d bytes, want %d", ErrSizeMismatch, got, k.size)}
	}
	if err != nil {
		return &fs.PathError{Op: "read", Path: k.path, Err: err}
	}
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	if n > 0 {
		return &fs.PathError{Op: "write", Path: k.path, Err: fmt.Errorf("%w: reader yielded more than %d bytes", ErrSizeMismatch, k.size)}
	}
	if err != io.EOF {
		return &fs.PathError{Op: "read", Path: k.path, Err: err}
	}
	return nil
}

// volumeDescriptor fills the PVD or, with joliet, the Joliet SVD (ECMA-119
// 8.4 and 8.5). Identifiers are padded with spaces, never NUL, and carry no
// host or version strings; the expiration and effective dates are left
// unset, as xorriso does.
func (w *Writer) volumeDescriptor(b []byte, joliet bool) {
	l := &w.l
	b[0] = 1
	if joliet {
		b[0] = 2
	}
	copy(b[1:6], "CD001")
	b[6] = 1
	spaces := fillSpaces
	if joliet {
		spaces = fillUCS2Spaces
	}
	spaces(b[8:40])  // system identifier
	spaces(b[40:72]) // volume identifier
	if joliet {
		putUCS2(b[40:], w.opts.Label)
	} else {
		copy(b[40:], w.opts.Label)
	}
	put733(b[80:], l.total)
	if joliet {
		copy(b[88:], "%/E") // UCS-2 level 3
	}
	put723(b[120:], 1) // volume set size
	put723(b[124:], 1) // volume sequence number
	put723(b[128:], sectorSize)
	root := &w.root
	if joliet {
		put733(b[132:], l.jptSize)
		binary.LittleEndian.PutUint32(b[140:], l.jptL)
		binary.BigEndian.PutUint32(b[148:], l.jptM)
		w.dirRecord(b[156:190], 0, root.jextent, root.jsecs*sectorSize, true)
	} else {
		put733(b[132:], l.ptSize)
		binary.LittleEndian.PutUint32(b[140:], l.ptL)
		binary.BigEndian.PutUint32(b[148:], l.ptM)
		w.dirRecord(b[156:190], 0, root.extent, root.psecs*sectorSize, true)
	}
	spaces(b[190:702]) // volume set, publisher, preparer, application
	// Copyright, abstract and bibliographic file identifiers: 37 bytes
	// each, so in Joliet each is 18 UCS-2 spaces and a zero byte.
	spaces(b[702:739])
	spaces(b[739:776])
	spaces(b[776:813])
	copy(b[813:830], l.date17[:]) // creation
	copy(b[830:847], l.date17[:]) // modification: libblkid's UUID
	copy(b[847:863], "0000000000000000")
	copy(b[864:880], "0000000000000000")
	b[881] = 1 // file structure version
}

func fillSpaces(b []byte) {
	for i := range b {
		b[i] = ' '
	}
}

// fillUCS2Spaces pads a Joliet field with U+0020. The 37-byte file
// identifier fields end in a lone zero byte.
func fillUCS2Spaces(b []byte) {
	for i := 0; i+1 < len(b); i += 2 {
		b[i] = 0
		b[i+1] = ' '
	}
}

// dirRecord fills a directory record (ECMA-119 9.1) whose length is
// len(b): the fixed 33 bytes and a one-byte identifier id, 0 for "." and 1
// for "..". recordHead overwrites the identifier for named entries.
func (w *Writer) dirRecord(b []byte, id byte, extent, length uint32, dir bool) {
	b[0] = byte(len(b))
	put733(b[2:], extent)
	put733(b[10:], length)
	copy(b[18:25], w.l.date7[:])
	if dir {
		b[25] = 2
	}
	put723(b[28:], 1)
	b[32] = 1
	b[33] = id
}

// recordHead fills a record's fixed part and identifier, and returns the
// offset at which System Use starts.
func (w *Writer) recordHead(b []byte, id string, extent, length uint32, dir bool) int {
	w.dirRecord(b, 0, extent, length, dir)
	b[32] = byte(len(id))
	copy(b[33:], id)
	return 33 + len(id) + (1 - len(id)&1)
}

func (w *Writer) primaryDir(d *node) {
	o := &w.out
	root := &w.root
	parent := d.parent
	if parent == nil {
		parent = root
	}
	if d == root {
		b := o.record(lenRootDot)
		w.dirRecord(b, 0, d.extent, d.psecs*sectorSize, true)
		p := 34
		// SP must be the first entry of the root's "." record: Linux,
		// libarchive and the BSDs look for Rock Ridge only there.
		copy(b[p:], []byte{'S', 'P', lenSP, 1, 0xBE, 0xEF, 0})
		p += lenSP
		p += w.rockRidge(b[p:], d, 0x81)
		putCE(b[p:], w.l.ceStart, 0, uint32(lenER))
	} else {
		b := o.record(lenDotRR)
		w.dirRecord(b, 0, d.extent, d.psecs*sectorSize, true)
		w.rockRidge(b[34:], d, 0x81)
	}
	b := o.record(lenDotRR)
	w.dirRecord(b, 1, parent.extent, parent.psecs*sectorSize, true)
	w.rockRidge(b[34:], parent, 0x81)

	for _, k := range d.pkids {
		b := o.record(int(k.prec))
		extent, length := k.extent, uint32(k.size)
		if k.isDir {
			length = k.psecs * sectorSize
		}
		p := w.recordHead(b, k.pid, extent, length, k.isDir)
		p += w.rockRidge(b[p:], k, 0x89)
		if k.nmCE {
			off := int64(w.l.ceStart)*sectorSize + int64(k.ceOff)
			putCE(b[p:], uint32(off/sectorSize), uint32(off%sectorSize), uint32(lenNM+len(k.name)))
		} else {
			putNM(b[p:], k.name)
		}
	}
	o.padSector()
}

// rockRidge writes the RR, PX and TF entries that every primary record
// carries and returns their length. RR is optional in RRIP 1.10 (xorriso
// omits it) but genisoimage writes it, and its flags must then list PX or TF
// or Linux stops reading Rock Ridge for the file.
func (w *Writer) rockRidge(b []byte, n *node, rrFlags byte) int {
	copy(b, "RR")
	b[2] = lenRR
	b[3] = 1
	b[4] = rrFlags
	b = b[lenRR:]

	// PX, RRIP 1.10: mode, links, uid, gid. No serial number: that is the
	// 44-byte 1.12 form, whose zero serials made libarchive see hard links
	// in go-diskfs images (go-diskfs#223).
	mode, nlink := uint32(0o100444), uint32(1)
	if n.isDir {
		mode, nlink = 0o40555, 2+n.nsub
	} else if n.exec {
		mode = 0o100555
	}
	copy(b, "PX")
	b[2] = lenPX
	b[3] = 1
	put733(b[4:], mode)
	put733(b[12:], nlink)
	put733(b[20:], 0) // uid
	put733(b[28:], 0) // gid
	b = b[lenPX:]

	// TF: modify, access and attributes, the set genisoimage and xorriso
	// write, all from Options.ModTime.
	copy(b, "TF")
	b[2] = lenTF
	b[3] = 1
	b[4] = 0x0E
	for i := 0; i < 3; i++ {
		copy(b[5+7*i:], w.l.date7[:])
	}
	return suBase
}

func putCE(b []byte, block, offset, length uint32) int {
	copy(b, "CE")
	b[2] = lenCE
	b[3] = 1
	put733(b[4:], block)
	put733(b[12:], offset)
	put733(b[20:], length)
	return lenCE
}

func putNM(b []byte, name string) int {
	copy(b, "NM")
	b[2] = byte(lenNM + len(name))
	b[3] = 1
	b[4] = 0
	copy(b[5:], name)
	return lenNM + len(name)
}

// continuationArea writes the ER entry followed by the NM entries too long
// for their records, at the offsets layout chose.
func (w *Writer) continuationArea() {
	o := &w.out
	l := &w.l
	b := o.grow(lenER)
	copy(b, "ER")
	b[2] = byte(lenER)
	b[3] = 1
	b[4] = byte(len(erID))
	b[5] = byte(len(erDesc))
	b[6] = byte(len(erSrc))
	b[7] = 1
	p := 8
	p += copy(b[p:], erID)
	p += copy(b[p:], erDesc)
	copy(b[p:], erSrc)
	base := int64(l.ceStart) * sectorSize
	for _, d := range l.pdirs {
		for _, k := range d.pkids {
			if k.nmCE {
				o.padTo(base + int64(k.ceOff))
				putNM(o.grow(lenNM+len(k.name)), k.name)
			}
		}
	}
	o.padTo(base + int64(l.ceSecs)*sectorSize)
}

func (w *Writer) jolietDir(d *node) {
	o := &w.out
	parent := d.parent
	if parent == nil {
		parent = &w.root
	}
	w.dirRecord(o.record(lenDot), 0, d.jextent, d.jsecs*sectorSize, true)
	w.dirRecord(o.record(lenDot), 1, parent.jextent, parent.jsecs*sectorSize, true)
	for _, k := range d.kids {
		b := o.record(int(k.jrec))
		extent, length := k.extent, uint32(k.size)
		if k.isDir {
			extent, length = k.jextent, k.jsecs*sectorSize
		}
		w.dirRecord(b, 0, extent, length, k.isDir)
		b[32] = 2 * k.jlen
		putUCS2(b[33:], k.name)
	}
	o.padSector()
}

// pathTable writes one path table (ECMA-119 9.4): directories in
// breadth-first order, each with its parent's 1-based number. Records may
// cross sector boundaries; the table is padded to a whole sector.
func (w *Writer) pathTable(joliet bool, order binary.ByteOrder) {
	o := &w.out
	dirs := w.l.pdirs
	if joliet {
		dirs = w.l.jdirs
	}
	for _, d := range dirs {
		parent := d.parent
		if parent == nil {
			parent = d
		}
		var lenDI int
		var extent uint32
		var pnum uint16
		if joliet {
			lenDI, extent, pnum = 2*int(d.jlen), d.jextent, parent.jnum
		} else {
			lenDI, extent, pnum = len(d.pid), d.extent, parent.pnum
		}
		if d.parent == nil {
			lenDI = 1
		}
		b := o.grow(int(ptRecLen(lenDI)))
		b[0] = byte(lenDI)
		order.PutUint32(b[2:], extent)
		order.PutUint16(b[6:], pnum)
		if d.parent != nil {
			if joliet {
				putUCS2(b[8:], d.name)
			} else {
				copy(b[8:], d.pid)
			}
		}
	}
	o.padSector()
}

func put723(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b, v)
	binary.BigEndian.PutUint16(b[2:], v)
}

func put733(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}

// putDate17 writes a volume descriptor date: "YYYYMMDDHHMMSScc" and a zero
// GMT offset. t is UTC.
func putDate17(b *[17]byte, t time.Time) {
	digits := func(b []byte, v int) {
		for i := len(b) - 1; i >= 0; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
	}
	digits(b[0:4], t.Year())
	digits(b[4:6], int(t.Month()))
	digits(b[6:8], t.Day())
	digits(b[8:10], t.Hour())
	digits(b[10:12], t.Minute())
	digits(b[12:14], t.Second())
	digits(b[14:16], t.Nanosecond()/1e7)
	b[16] = 0
}
