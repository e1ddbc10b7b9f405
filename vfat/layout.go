package vfat

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"unicode/utf16"
)

// Image sizes.
const (
	// MinSize is the smallest image the writer chooses by itself: 128 KiB,
	// cloud-localds's vfat default.
	MinSize = 128 << 10
	// Align is the granularity of every image size: QEMU refuses raw images
	// that are not a multiple of the host's 4 KiB request alignment
	// (kubevirt#5785).
	Align = 4096
)

// On-disk constants shared by the writer and the reader.
const (
	sectorSize      = 512
	reservedSectors = 1 // boot sector only; FAT12/16 need no FSInfo
	numFATs         = 2
	minRootEntries  = 512 // what mkfs.fat uses for hard-disk media
	maxRootEntries  = 65520
	mediaFixed      = 0xF8
	dirEntrySize    = 32
	maxDirEntries   = 65536 // entry indexes are 16-bit in every FAT driver

	// Windows and Linux both decide the FAT type from the cluster count,
	// not from the BPB string: fewer than 4085 clusters is FAT12, fewer than
	// 65525 FAT16 (the Microsoft specification; Linux fs/fat agrees). The
	// reader uses exactly these limits.
	maxFAT12Clusters = 4084
	maxFAT16Clusters = 65524

	// The writer keeps 16 clusters away from both thresholds, as the
	// Microsoft specification advises, because not every reader draws the
	// line in the same place: libblkid reports VERSION=FAT16 for exactly
	// 4084 clusters, where the kernel mounts FAT12 (measured with
	// util-linux blkid; its test is "count < 0xFF4").
	writerMaxFAT12 = maxFAT12Clusters - 16
	writerMinFAT16 = maxFAT12Clusters + 1 + 16
	writerMaxFAT16 = maxFAT16Clusters - 16

	alignSectors = Align / sectorSize

	// maxSPC caps clusters at 32 KiB; 64 KiB clusters are not readable
	// everywhere.
	maxSPC = 64
)

// MaxSize is the largest image the writer produces (2,146,877,440 bytes):
// FAT16 with 32 KiB clusters, rounded down to Align. Bigger seeds would
// need FAT32, which no seed consumer requires. TestMaxSize checks the value
// against the layout rules.
const MaxSize = 2146877440

const (
	attrReadOnly = 0x01
	attrHidden   = 0x02
	attrSystem   = 0x04
	attrVolumeID = 0x08
	attrDir      = 0x10
	attrArchive  = 0x20
	attrLFN      = attrReadOnly | attrHidden | attrSystem | attrVolumeID
)

// geometry is the complete layout of one image.
type geometry struct {
	totalSectors int64
	spc          int64 // sectors per cluster
	rootEntries  int64
	fatSectors   int64
	clusters     int64 // number of data clusters
	fat16        bool
}

func (g *geometry) clusterBytes() int64 { return g.spc * sectorSize }
func (g *geometry) rootSectors() int64  { return g.rootEntries * dirEntrySize / sectorSize }
func (g *geometry) rootStart() int64    { return reservedSectors + numFATs*g.fatSectors }
func (g *geometry) dataStart() int64    { return g.rootStart() + g.rootSectors() }

// fatBytes is the number of bytes that n FAT entries occupy.
func fatBytes(n int64, fat16 bool) int64 {
	if fat16 {
		return 2 * n
	}
	return (3*n + 1) / 2
}

// fit computes the FAT size and cluster count for a given sector count,
// cluster size and FAT width. ok is false when the result is not a valid
// volume of that FAT type.
//
// The FAT must cover clusters+2 entries, and the clusters are what is left
// after the FATs; the smallest FAT that satisfies both is found by starting
// from an upper bound and shrinking while it still fits.
func fit(total, spc, rootEntries int64, fat16 bool) (g geometry, ok bool) {
	rootSecs := rootEntries * dirEntrySize / sectorSize
	avail := total - reservedSectors - rootSecs
	if avail <= numFATs {
		return g, false
	}
	count := func(fs int64) int64 { return (avail - numFATs*fs) / spc }
	fits := func(fs int64) bool {
		c := count(fs)
		return c >= 1 && fatBytes(c+2, fat16) <= fs*sectorSize
	}
	fs := (fatBytes(avail/spc+2, fat16) + sectorSize - 1) / sectorSize
	if fs < 1 {
		fs = 1
	}
	if !fits(fs) {
		return g, false
	}
	for fs > 1 && fits(fs-1) {
		fs--
	}
	c := count(fs)
	lo, hi := int64(1), int64(writerMaxFAT12)
	if fat16 {
		lo, hi = writerMinFAT16, writerMaxFAT16
	}
	if c < lo || c > hi {
		return g, false
	}
	return geometry{total, spc, rootEntries, fs, c, fat16}, true
}

// chooseGeometry picks the layout for a volume of total sectors whose
// content needs need(spc) clusters at spc sectors per cluster (nil: no
// content). Policy: the first candidate that is a valid volume and holds
// the content, trying FAT12 with clusters of 512 B to 4 KiB, then FAT16
// with 512 B to 32 KiB. So small seeds are FAT12 (what cloud-localds
// produces and consumers expect), FAT16 is used only when FAT12 cannot
// hold the content, and the smallest clusters win because seed files are
// tiny.
func chooseGeometry(total, rootEntries int64, need func(spc int64) int64) (geometry, bool) {
	for _, fat16 := range []bool{false, true} {
		maxS := int64(8)
		if fat16 {
			maxS = maxSPC
		}
		for spc := int64(1); spc <= maxS; spc *= 2 {
			g, ok := fit(total, spc, rootEntries, fat16)
			if ok && (need == nil || need(spc) <= g.clusters) {
				return g, true
			}
		}
	}
	return geometry{}, false
}

// maxImageSectors finds the largest Align-multiple volume that has a
// geometry: FAT16 with maxSPC and writerMaxFAT16 clusters plus overhead is
// an estimate, so search down from a little above it (every larger volume
// would need more clusters or bigger ones).
func maxImageSectors() int64 {
	fs := (fatBytes(writerMaxFAT16+2, true) + sectorSize - 1) / sectorSize
	t := reservedSectors + numFATs*fs + minRootEntries*dirEntrySize/sectorSize + (writerMaxFAT16+1)*maxSPC
	t -= t % alignSectors
	for t > 0 {
		if _, ok := chooseGeometry(t, minRootEntries, nil); ok {
			return t
		}
		t -= alignSectors
	}
	return 0
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

// plan lays the volume out: the clusters in allocation order, the
// smallest volume that holds them (or the one Options.Size asks for), and
// the first cluster of each entry.
func (w *Writer) plan() (*plan, error) {
	p := &plan{opts: w.opts, root: w.root, dt: toDOSTime(w.opts.ModTime)}
	if err := prepare(w.root, true, w.opts.Label != ""); err != nil {
		return nil, err
	}
	rootEntries := int64(minRootEntries)
	if n := (w.root.entries + 15) &^ 15; n > rootEntries {
		rootEntries = n
	}
	p.orderClusters(w.root)
	s := newSizer(p.order, rootEntries)
	total := w.opts.Size / sectorSize
	if total == 0 {
		t, ok := s.smallest(MinSize / sectorSize)
		if !ok {
			return nil, pathErr("close", ".", fmt.Errorf("%w: the content needs more than MaxSize (%d bytes)", ErrNoSpace, MaxSize))
		}
		total = t
	}
	g, ok := s.fits(total)
	if !ok {
		return nil, s.noSpace(total, w.opts.Size)
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

// orderClusters puts d's tree into allocation order (p.order), and its
// empty files, which get no clusters, into p.empty. The order is a
// pre-order walk, each directory's clusters before its files,
// subdirectories after the files. Any fixed order would do; this one keeps
// a directory next to its contents.
func (p *plan) orderClusters(d *node) {
	if d != p.root {
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
			p.orderClusters(c)
		}
	}
}

// sizer finds a volume size for content: the nodes in allocation order
// and the root directory's entries.
type sizer struct {
	order       []*node
	rootEntries int64
	// needBySPC is the clusters needed at each cluster size (sectors per
	// cluster), computed once: smallest may try thousands of volume sizes.
	needBySPC map[int64]int64
}

func newSizer(order []*node, rootEntries int64) *sizer {
	s := &sizer{order: order, rootEntries: rootEntries, needBySPC: map[int64]int64{}}
	for spc := int64(1); spc <= maxSPC; spc *= 2 {
		cb := spc * sectorSize
		for _, x := range order {
			s.needBySPC[spc] += (x.bytes() + cb - 1) / cb
		}
	}
	return s
}

func (s *sizer) need(spc int64) int64 { return s.needBySPC[spc] }

// fits returns the geometry of a volume of total sectors, if the content
// fits in one.
func (s *sizer) fits(total int64) (geometry, bool) {
	return chooseGeometry(total, s.rootEntries, s.need)
}

// smallest returns the smallest size that fits, not below floor sectors:
// it starts from the bound that 512-byte clusters and a one-sector FAT
// would give and steps by Align. A search rather than a formula: which FAT
// type and cluster size a volume gets depends on its size and the content
// together.
func (s *sizer) smallest(floor int64) (int64, bool) {
	t := int64(reservedSectors) + numFATs + s.rootEntries*dirEntrySize/sectorSize + s.need(1)
	t = (t + alignSectors - 1) / alignSectors * alignSectors
	for t = max(t, floor); t*sectorSize <= MaxSize; t += alignSectors {
		if _, ok := s.fits(t); ok {
			return t, true
		}
	}
	return 0, false
}

// noSpace is the error of content that does not fit in total sectors
// (size bytes, as asked): it says what size would do, and names the first
// entry that overflows the layout the size would get without content, so
// the caller can see what made it too big.
func (s *sizer) noSpace(total, size int64) error {
	msg := fmt.Sprintf("more than MaxSize (%d bytes)", MaxSize)
	if t, ok := s.smallest(0); ok {
		msg = fmt.Sprintf("Size %d", t*sectorSize)
	}
	culprit := "."
	if gg, ok := chooseGeometry(total, s.rootEntries, nil); ok {
		var used int64
		for _, x := range s.order {
			used += (x.bytes() + gg.clusterBytes() - 1) / gg.clusterBytes()
			if used > gg.clusters {
				culprit = x.path
				break
			}
		}
	}
	return pathErr("close", culprit, fmt.Errorf("%w in %d bytes: needs %s", ErrNoSpace, size, msg))
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
