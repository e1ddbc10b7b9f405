// Package iso9660 writes and reads the small ISO 9660 images that carry
// cloud-init (NoCloud "cidata", ConfigDrive "config-2") and Ignition seeds.
//
// A [Writer] takes a tree of files and streams one image to an [io.Writer]
// in a single sequential pass. The image carries three name spaces over the
// same file extents, because each consumer of a seed reads a different one:
//
//   - Rock Ridge (RRIP 1.10, ER "RRIP_1991A") for Linux, the BSDs and macOS.
//     cloud-init opens "user-data" and "meta-data" by their exact names and has
//     no fallback to the 8.3 names, so Rock Ridge is what makes a seed work.
//   - Joliet level 3 for Windows (cloudbase-init), which has no Rock Ridge.
//   - Level-1 style upper-case 8.3 names ("USER_DAT.;1") in the primary tree,
//     which only exist because ECMA-119 requires them.
//
// It also writes L and M path tables for both trees (libarchive, and so
// cloudbase-init's raw-disk path through bsdtar, reject an image without
// them), pads the image to a 4 KiB multiple (QEMU refuses unaligned images on
// 4Kn storage) and is reproducible: every date comes from [Options.ModTime],
// owners are 0, modes are normalised, identifiers carry no host or version
// strings, and records are sorted, so the same tree gives the same bytes
// whatever order it was added in. blkid's UUID for an ISO is the PVD
// modification date, so it is deterministic too.
//
// # Why not an existing library
//
// The package is hand-written because no Go library was correct on all of the
// points above: go-diskfs v1.9.4 and kdomanski/iso9660 v0.4.0 both need a
// staging directory and stamp the clock's time into the image, go-diskfs
// writes the Rock Ridge ER that macOS and older BSDs reject, and
// kdomanski/iso9660 writes no Rock Ridge, Joliet or path tables
// (docs/design.md has the record). Nothing here needs cgo, a temporary
// directory or an external program.
//
// # Limits
//
// Seeds need none of these, so they are left out: El Torito boot records,
// symlinks and device files, files of 4 GiB or more (multi-extent), and
// Rock Ridge directory relocation (trees deeper than 8 levels are refused).
// cloudbase-init's raw-disk path reads only the low 16 bits of the volume
// size, so images meant for it should stay under 128 MiB; the Writer does not
// enforce that.
//
// A small [Reader] (see [NewReader]) reads such images back as an [io/fs.FS]
// with ReadDir, ReadFile and Stat. It is strict and bounds-checked so that
// it can be pointed at untrusted images; vminit uses it for "vminit inspect"
// and for round-trip tests.
//
// # Its twin, vfat
//
// Package vfat writes and reads FAT images in the same shape, as
// [archive/zip] and [archive/tar] share theirs: [NewWriter](w, [Options]),
// then [Writer.AddFile](name, size, mode, r), [Writer.AddDir] and
// [Writer.AddFS] in any order, then [Writer.Close], which streams the image
// in one pass; [NewReader](r, size) returns a Reader that is an
// [io/fs.ReadDirFS], [io/fs.ReadFileFS] and [io/fs.StatFS]. The same mistake
// gives the error of the same name in both, wrapped in an *[io/fs.PathError]
// naming the file: [ErrInvalidName], [ErrDuplicate], [ErrTooLarge],
// [ErrSizeMismatch], [ErrUnsupportedType], [ErrInvalidOptions], [ErrClosed]
// and [ErrFormat]. What differs is each format's own: [ErrTooDeep] here and
// ErrNoSpace there (a FAT image has a size to run out of); an ISO file keeps
// its execute bits, a FAT file none; and AddFile refuses a nil reader here,
// where vfat takes one for an empty file.
package iso9660

// Source files, the same split in iso9660 and vfat: writer.go is writing's
// API (Options, Writer, the Add methods, Close) and the tree they build;
// layout.go, what Close computes before it writes a byte; encode.go, the
// bytes of the laid-out image; names.go, the name rules; reader.go, the
// Reader; errors.go, the errors both packages share by name. vfat adds
// dostime.go, FAT's timestamps.
