package vfat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// oemName is fixed so the output carries no tool or host identity.
// "MSWIN4.1" is the value the Microsoft FAT specification calls the most
// compatible; some old drivers look at it.
const oemName = "MSWIN4.1"

// bootCode replaces the boot program at offset 62: int 18h ("no bootable
// disk, try the next device"), then halt forever. The jump at offset 0
// lands here if a BIOS ever tries to boot the image.
var bootCode = []byte{0xCD, 0x18, 0xF4, 0xEB, 0xFD}

// zeros backs padding writes.
var zeros [32 << 10]byte

// countingWriter tracks the offset so that padding can be checked.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	c.err = err
	return n, err
}

func (c *countingWriter) zero(n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := c.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func (p *plan) bootSector() []byte {
	g := &p.g
	b := make([]byte, sectorSize)
	copy(b[0:], []byte{0xEB, 0x3C, 0x90})
	copy(b[3:11], oemName)
	le := binary.LittleEndian
	le.PutUint16(b[11:], sectorSize)
	b[13] = byte(g.spc)
	le.PutUint16(b[14:], reservedSectors)
	b[16] = numFATs
	le.PutUint16(b[17:], uint16(g.rootEntries))
	if g.totalSectors <= 0xFFFF {
		le.PutUint16(b[19:], uint16(g.totalSectors))
	} else {
		le.PutUint32(b[32:], uint32(g.totalSectors))
	}
	b[21] = mediaFixed
	le.PutUint16(b[22:], uint16(g.fatSectors))
	// CHS geometry is meaningless for an image; fixed values (those
	// mkfs.fat uses for small files) keep the output host-independent.
	le.PutUint16(b[24:], 16) // sectors per track
	le.PutUint16(b[26:], 2)  // heads
	// b[28:32] hidden sectors: 0, the volume is not inside a partition.
	b[36] = 0x80 // drive number: fixed disk, matching media 0xF8
	b[38] = 0x29 // extended boot signature: serial, label and type follow
	le.PutUint32(b[39:], p.serial)
	copy(b[43:54], label11(p.opts.Label))
	if g.fat16 {
		copy(b[54:62], "FAT16   ")
	} else {
		copy(b[54:62], "FAT12   ")
	}
	copy(b[62:], bootCode)
	b[510], b[511] = 0x55, 0xAA
	return b
}

// label11 is the space-padded 11-byte label field; "NO NAME" is the
// conventional value for an unlabelled volume.
func label11(l string) []byte {
	if l == "" {
		l = "NO NAME"
	}
	b := []byte("           ")
	copy(b, l)
	return b
}

func (p *plan) fat() []byte {
	g := &p.g
	b := make([]byte, g.fatSectors*sectorSize)
	set := func(n uint32, v uint32) {
		if g.fat16 {
			binary.LittleEndian.PutUint16(b[2*n:], uint16(v))
			return
		}
		off := n + n/2
		if n&1 == 0 {
			b[off] = byte(v)
			b[off+1] = b[off+1]&0xF0 | byte(v>>8)&0x0F
		} else {
			b[off] = b[off]&0x0F | byte(v<<4)
			b[off+1] = byte(v >> 4)
		}
	}
	eoc := uint32(0xFFF)
	if g.fat16 {
		eoc = 0xFFFF
	}
	// Entry 0 holds the media byte, entry 1 an end-of-chain mark (for FAT16
	// its top bits also say "cleanly unmounted, no I/O errors").
	set(0, eoc&^0xFF|mediaFixed)
	set(1, eoc)
	for _, x := range p.order {
		for i := int64(0); i < x.nclus; i++ {
			c := x.first + uint32(i)
			if i == x.nclus-1 {
				set(c, eoc)
			} else {
				set(c, c+1)
			}
		}
	}
	return b
}

// putEntry writes the LFN entries (if any) and the 8.3 entry for n into dst
// and returns the number of bytes used.
func (p *plan) putEntry(dst []byte, n *node) int {
	off := 0
	if n.long != nil {
		putLFN(dst, n.long, lfnChecksum(n.short))
		off = lfnSlots(len(n.long)) * dirEntrySize
	}
	attr := byte(attrArchive)
	size := uint32(n.size)
	if n.dir {
		attr, size = attrDir, 0
	}
	p.putShort(dst[off:off+dirEntrySize], n.short, attr, n.first, size)
	return off + dirEntrySize
}

func (p *plan) putShort(e []byte, name [11]byte, attr byte, cluster uint32, size uint32) {
	le := binary.LittleEndian
	copy(e[0:11], name[:])
	e[11] = attr
	// e[12] NT case flags: 0, names that are not upper-case carry an LFN.
	// e[13] creation time in 10 ms units: 0, ModTime has 2 s resolution.
	le.PutUint16(e[14:], p.dt.time) // created
	le.PutUint16(e[16:], p.dt.date)
	le.PutUint16(e[18:], p.dt.date) // last access
	le.PutUint16(e[20:], uint16(cluster>>16))
	le.PutUint16(e[22:], p.dt.time) // modified
	le.PutUint16(e[24:], p.dt.date)
	le.PutUint16(e[26:], uint16(cluster))
	le.PutUint32(e[28:], size)
}

func (p *plan) rootDir() []byte {
	b := make([]byte, p.g.rootEntries*dirEntrySize)
	off := 0
	if p.opts.Label != "" {
		var l [11]byte
		copy(l[:], label11(p.opts.Label))
		p.putShort(b[:dirEntrySize], l, attrVolumeID, 0, 0)
		off = dirEntrySize
	}
	for _, c := range p.root.sorted {
		off += p.putEntry(b[off:], c)
	}
	return b
}

func (p *plan) subDir(d *node, parent uint32) []byte {
	b := make([]byte, d.nclus*p.g.clusterBytes())
	p.putShort(b[0:32], pack11(".", ""), attrDir, d.first, 0)
	p.putShort(b[32:64], pack11("..", ""), attrDir, parent, 0) // 0 means the root
	off := 64
	for _, c := range d.sorted {
		off += p.putEntry(b[off:], c)
	}
	return b
}

func (p *plan) write(out io.Writer) error {
	w := &countingWriter{w: out}
	g := &p.g
	werr := func(err error) error { return pathErr("write", ".", err) }

	// Empty files have no data to place, but a reader that is not in fact
	// empty is still the caller's mistake; check them before any output.
	for _, x := range p.empty {
		if err := p.copyFile(w, x); err != nil {
			return err
		}
	}

	if _, err := w.Write(p.bootSector()); err != nil {
		return werr(err)
	}
	fat := p.fat()
	for range numFATs {
		if _, err := w.Write(fat); err != nil {
			return werr(err)
		}
	}
	if _, err := w.Write(p.rootDir()); err != nil {
		return werr(err)
	}

	parents := map[*node]uint32{}
	for _, c := range p.root.sorted {
		parents[c] = 0
	}
	for _, x := range p.order {
		if want := g.dataStart()*sectorSize + int64(x.first-2)*g.clusterBytes(); w.n != want {
			return werr(fmt.Errorf("internal error: %s at offset %d, planned %d", x.path, w.n, want))
		}
		if x.dir {
			for _, c := range x.sorted {
				parents[c] = x.first
			}
			if _, err := w.Write(p.subDir(x, parents[x])); err != nil {
				return werr(err)
			}
			continue
		}
		if err := p.copyFile(w, x); err != nil {
			return err
		}
		if err := w.zero(x.nclus*g.clusterBytes() - x.size); err != nil {
			return werr(err)
		}
	}
	if err := w.zero(g.totalSectors*sectorSize - w.n); err != nil {
		return werr(err)
	}
	return nil
}

// copyFile streams exactly x.size bytes and checks that the reader then
// ends: a longer or shorter source would silently corrupt the image.
func (p *plan) copyFile(w *countingWriter, x *node) error {
	r, closeFn, err := x.open()
	if err != nil {
		return pathErr("write", x.path, err)
	}
	if closeFn != nil {
		defer closeFn()
	}
	if r == nil { // AddFile allows a nil reader for an empty file
		return nil
	}
	n, err := io.CopyN(w, r, x.size)
	if w.err != nil {
		return pathErr("write", x.path, w.err)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return pathErr("write", x.path, fmt.Errorf("%w: got %d bytes, declared %d", ErrSizeMismatch, n, x.size))
		}
		return pathErr("write", x.path, err)
	}
	var one [1]byte
	for range 100 { // a reader may return (0, nil) a few times; not forever
		k, err := r.Read(one[:])
		if k > 0 {
			return pathErr("write", x.path, fmt.Errorf("%w: more than the declared %d bytes", ErrSizeMismatch, x.size))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return pathErr("write", x.path, err)
		}
	}
	return pathErr("write", x.path, io.ErrNoProgress)
}
