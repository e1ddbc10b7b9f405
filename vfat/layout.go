package vfat

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
