// Package vfat writes and reads small VFAT (FAT12/FAT16 with long file
// names) images, such as the cloud-init NoCloud seed (label "cidata") and
// the OpenStack ConfigDrive (label "config-2"), in-process and
// byte-reproducibly.
//
// # Writing
//
// NewWriter, then AddFile, AddDir or AddFS in any order, then Close, which
// lays the volume out and writes it to an io.Writer in one sequential pass.
// No temporary files, no seeking, no whole-image buffer: the layout is known
// once all names and sizes are, so the boot sector, both FATs, the root
// directory and then the clusters are streamed in order, and file readers are
// consumed one after another at Close.
//
// What the image contains, and why:
//
//   - 512-byte sectors, 1 reserved sector, 2 FATs, media 0xF8, at least 512
//     root entries (more when the root needs them): the mkfs.fat layout that
//     cloud-localds produces, which every consumer reads.
//   - FAT12 when it can hold the content with clusters of at most 4 KiB,
//     otherwise FAT16 (up to MaxSize, about 2 GiB); the smallest cluster
//     size that works. Windows, Linux and libblkid decide the
//     type from the cluster count, not from the "FAT12   " string at offset
//     54, so the count is chosen to match; it also stays 16 clusters away
//     from the FAT12/FAT16 threshold, where libblkid and the kernel disagree.
//   - The label both in the extended BPB and as a root-directory volume-label
//     entry. blkid reports the first as LABEL_FATBOOT and the second as
//     LABEL; cloud-init's ds-identify once missed seeds that had only the
//     BPB label (cloud-init#3437).
//   - An LFN entry set for every name that is not already an upper-case 8.3
//     name ("user-data" has 9 characters, "meta_data.json" a 4-character
//     extension), with a unique 8.3 alias (USER-D~1) derived in sorted order.
//   - Subdirectories with "." and ".." entries.
//   - A size that is a multiple of 4096 bytes (QEMU rejects raw images that
//     are not, kubevirt#5785); by default the smallest such size that fits,
//     but at least 128 KiB, cloud-localds's default.
//
// # Reproducibility
//
// The bytes depend only on Options and the set of (name, size, content)
// entries: directories are sorted by name, clusters are allocated in a fixed
// walk, every timestamp is Options.ModTime (FAT epoch if zero), the serial
// is Options.Serial or a hash of the tree, the OEM name is fixed, and
// nothing is read from the clock, the environment or the host.
//
// # Reading
//
// NewReader parses and checks a whole FAT12/16 volume and returns a
// *Reader: the two labels, the serial, and an fs.FS over the long names. It
// is strict and bounded: every offset is checked against the image, every
// cluster chain against the FAT (loops and cross-links are errors), and
// walking the tree terminates on any input.
//
// # Why not go-diskfs
//
// go-diskfs v1.9.4, evaluated first, writes images fsck.fat rejects
// (cluster 2 marked used, duplicate 8.3 names) and takes its timestamps
// from the clock or the process environment; docs/design.md has the
// record. So the writer is written here: a boot sector, two FATs, a fixed
// root directory and a data region, small enough to read in one sitting.
// The reader is written here too, to be strict and fuzz-safe rather than a
// general read-write driver.
//
// Not supported: FAT32, exFAT, sector sizes other than 512 when writing,
// NT lower-case flags (names that are not upper-case get LFN entries
// instead), non-ASCII 8.3 aliases (such characters become '_'), and
// writing into an existing image.
//
// # Its twin, iso9660
//
// Package iso9660 writes and reads ISO 9660 images in the same shape, as
// [archive/zip] and [archive/tar] share theirs: [NewWriter](w, [Options]),
// then [Writer.AddFile](name, size, mode, r), [Writer.AddDir] and
// [Writer.AddFS] in any order, then [Writer.Close], which streams the image
// in one pass; [NewReader](r, size) returns a Reader that is an
// [io/fs.ReadDirFS], [io/fs.ReadFileFS] and [io/fs.StatFS]. The same mistake
// gives the error of the same name in both, wrapped in an *[io/fs.PathError]
// naming the file: [ErrInvalidName], [ErrDuplicate], [ErrTooLarge],
// [ErrSizeMismatch], [ErrUnsupportedType], [ErrInvalidOptions], [ErrClosed]
// and [ErrFormat]. What differs is each format's own: [ErrNoSpace] here (a
// FAT image has a size to run out of) and ErrTooDeep there; a FAT file keeps
// no permission bits where an ISO file keeps its execute bits; and AddFile
// takes a nil reader for an empty file here, where iso9660 refuses one.
package vfat

// Source files, the same split in iso9660 and vfat: writer.go is writing's
// API (Options, Writer, the Add methods, Close) and the tree they build;
// layout.go, what Close computes before it writes a byte; encode.go, the
// bytes of the laid-out image; names.go, the name rules; reader.go, the
// Reader; errors.go, the errors both packages share by name. vfat adds
// dostime.go, FAT's timestamps.
