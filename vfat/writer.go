package vfat

import (
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"
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
