package iso9660

import (
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"
)

// Options configures a [Writer].
type Options struct {
	// Label is the volume identifier, written to the primary volume
	// descriptor and, as UCS-2BE, to the Joliet one. libblkid reports the
	// Joliet label whenever the two differ, so they are always the same.
	// Required: 1 to 16 characters (the Joliet limit) from A-Z, a-z, 0-9, '_'
	// and '-'. Lower case and '-' are not ECMA-119 d-characters, but every
	// reader accepts them and the seed labels "cidata" and "config-2" need
	// them.
	Label string

	// ModTime is the one timestamp used for every date in the image: the
	// volume descriptors (whose modification date libblkid reports as the
	// UUID), every directory record and every Rock Ridge TF entry. Pass the
	// build's SOURCE_DATE_EPOCH for reproducible images. The zero value means
	// the Unix epoch, never the current time. It must lie in the years
	// 1900-2155 that a directory record can hold, and is written as UTC.
	ModTime time.Time

	// Alignment pads the image to a multiple of this many bytes. 0 means
	// 4096, which QEMU needs on storage with 4 KiB sectors. It must be a
	// positive multiple of 2048; 1<<20 suits some cloud disk APIs.
	Alignment int64
}

// A Writer builds one ISO 9660 image. Add entries with [Writer.AddFile],
// [Writer.AddDir] and [Writer.AddFS], then call [Writer.Close], which lays
// out the image and writes all of it to the underlying [io.Writer] in one
// sequential pass. Nothing is written before Close.
//
// Entries are sorted before layout, so the order in which they are added
// does not change the output. Owners are always uid/gid 0. Files get mode
// 0444, or 0555 when added with any execute bit; directories get 0555. The
// host's owners, modes and times are never used.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	dst   io.Writer
	opts  Options
	err   error // sticky: bad options or a failed Close
	done  bool
	root  node
	index map[string]*node // full path -> node, for duplicate checks
	ndir  int              // directories, the root not counted

	// Filled by Close.
	l   layout
	out out
}

// NewWriter returns a Writer that will write an image to w when closed.
// Invalid options are reported, wrapped in [ErrInvalidOptions], by every
// later method call.
func NewWriter(w io.Writer, opts Options) *Writer {
	zw := &Writer{dst: w, opts: opts}
	zw.root.isDir = true
	zw.root.explicit = true
	zw.err = zw.checkOptions()
	return zw
}

func (w *Writer) checkOptions() error {
	o := &w.opts
	if o.Label == "" || len(o.Label) > 16 {
		return fmt.Errorf("%w: label %q must have 1 to 16 characters", ErrInvalidOptions, o.Label)
	}
	for i := 0; i < len(o.Label); i++ {
		c := o.Label[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: label %q may only hold A-Z, a-z, 0-9, '_' and '-'", ErrInvalidOptions, o.Label)
		}
	}
	if o.ModTime.IsZero() {
		o.ModTime = time.Unix(0, 0)
	}
	o.ModTime = o.ModTime.UTC()
	if y := o.ModTime.Year(); y < 1900 || y > 2155 {
		return fmt.Errorf("%w: ModTime %v outside the years 1900-2155", ErrInvalidOptions, o.ModTime)
	}
	if o.Alignment == 0 {
		o.Alignment = 4096
	}
	if o.Alignment < 0 || o.Alignment%sectorSize != 0 {
		return fmt.Errorf("%w: Alignment %d is not a positive multiple of 2048", ErrInvalidOptions, o.Alignment)
	}
	return nil
}

// node is one file or directory of the tree being built. Layout results
// live here too, so that Close allocates little beyond the tree itself.
type node struct {
	name   string // this component, the Rock Ridge and Joliet name
	path   string // full slash-separated path, for error messages
	parent *node
	kids   []*node // sorted by name at Close: Joliet order and data order
	pkids  []*node // kids sorted by primary identifier
	pid    string  // primary identifier

	isDir    bool
	explicit bool // added by AddDir rather than implied by a file
	exec     bool
	size     int64
	r        io.Reader
	fsys     fs.FS // set by AddFS: open path in fsys at Close

	jlen  uint8  // name length in UCS-2 characters
	prec  uint8  // length of this node's record in the primary parent
	jrec  uint8  // length of this node's record in the Joliet parent
	nmCE  bool   // the NM entry lives in the continuation area
	ceOff uint32 // byte offset of the NM entry inside the continuation area
	nsub  uint32 // number of subdirectories, for nlink

	extent  uint32 // file data, or the primary directory extent
	jextent uint32 // Joliet directory extent
	psecs   uint32 // primary directory size in sectors
	jsecs   uint32 // Joliet directory size in sectors
	pnum    uint16 // path table number, primary tree
	jnum    uint16 // path table number, Joliet tree
}

// AddDir adds a directory, so that it exists even if no file is added
// below it. Parents are implied, and adding a directory that an earlier file
// implied is not a duplicate. name is a slash-separated relative path such
// as "openstack/content". Errors are as for [Writer.AddFile].
func (w *Writer) AddDir(name string) error {
	if err := w.usable(); err != nil {
		return err
	}
	n, err := w.add(name, true)
	if err != nil {
		return err
	}
	n.explicit = true
	return nil
}

// AddFile adds a regular file of size bytes whose contents r yields. r is
// not read until Close, which reads exactly size bytes from it and then
// checks that it is at EOF, so a large file streams through without being
// held in memory. Parent directories are implied. Of mode only the
// permission bits matter: any execute bit makes the file 0555, otherwise it
// is 0444; a mode with type bits (a directory, a symlink, ...) is refused
// with [ErrUnsupportedType].
//
// name is a slash-separated relative path such as
// "openstack/latest/meta_data.json". The errors, each an *[io/fs.PathError]
// naming the file, wrap [ErrInvalidName], [ErrDuplicate], [ErrTooDeep],
// [ErrTooLarge] or [ErrUnsupportedType]; they leave the Writer usable.
func (w *Writer) AddFile(name string, size int64, mode fs.FileMode, r io.Reader) error {
	if err := w.usable(); err != nil {
		return err
	}
	if mode&fs.ModeType != 0 {
		return &fs.PathError{Op: "add", Path: name, Err: fmt.Errorf("%w: mode %v", ErrUnsupportedType, mode)}
	}
	if size < 0 || size > maxFileSize {
		return &fs.PathError{Op: "add", Path: name, Err: fmt.Errorf("%w: file size %d not in [0, 4 GiB)", ErrTooLarge, size)}
	}
	if r == nil {
		return &fs.PathError{Op: "add", Path: name, Err: fmt.Errorf("%w: nil reader", ErrSizeMismatch)}
	}
	n, err := w.add(name, false)
	if err != nil {
		return err
	}
	n.size = size
	n.r = r
	n.exec = mode&0o111 != 0
	return nil
}

// AddFS adds every directory and regular file of fsys, walked from its root
// like [archive/tar.Writer.AddFS]. Files are opened one at a time during
// Close, and must still have the size they had when AddFS ran. Only the
// execute bits of a file's mode are kept (see [Writer]); modification times
// are ignored in favour of [Options.ModTime]. Anything else, such as a
// symlink, fails with [ErrUnsupportedType]. Entries added before an error
// stay added.
func (w *Writer) AddFS(fsys fs.FS) error {
	if err := w.usable(); err != nil {
		return err
	}
	return fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if d.IsDir() {
			return w.AddDir(name)
		}
		if !d.Type().IsRegular() {
			return &fs.PathError{Op: "add", Path: name, Err: fmt.Errorf("%w: %v", ErrUnsupportedType, d.Type())}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return &fs.PathError{Op: "add", Path: name, Err: fmt.Errorf("%w: %v", ErrUnsupportedType, info.Mode().Type())}
		}
		size := info.Size()
		if size > maxFileSize {
			return &fs.PathError{Op: "add", Path: name, Err: fmt.Errorf("%w: file size %d not in [0, 4 GiB)", ErrTooLarge, size)}
		}
		n, err := w.add(name, false)
		if err != nil {
			return err
		}
		n.size = size
		n.fsys = fsys
		n.exec = info.Mode()&0o111 != 0
		return nil
	})
}

func (w *Writer) usable() error {
	if w.done {
		return ErrClosed
	}
	return w.err
}

// add validates name and inserts its node, creating implied parents. A
// rejected name changes nothing, not even implied parents.
func (w *Writer) add(name string, isDir bool) (*node, error) {
	// Validate every component before touching the tree.
	depth := 0
	for comp := range strings.SplitSeq(name, "/") {
		if _, ok := checkComponent(comp); !ok {
			return nil, &fs.PathError{Op: "add", Path: name, Err: fmt.Errorf("%w: component %q", ErrInvalidName, comp)}
		}
		depth++
	}
	dirDepth := depth
	if !isDir {
		dirDepth--
	}
	if dirDepth > maxDirDepth {
		return nil, &fs.PathError{Op: "add", Path: name, Err: fmt.Errorf("%w: more than %d directory levels", ErrTooDeep, maxDirDepth+1)}
	}

	if w.index == nil {
		w.index = make(map[string]*node)
	}
	parent := &w.root
	level := 0
	start := 0
	// Walk down the part of the path that exists.
	for {
		end, last := nextComponent(name, start)
		n := w.index[name[:end]]
		if n == nil {
			break
		}
		if last {
			if isDir && n.isDir && !n.explicit {
				return n, nil
			}
			return nil, &fs.PathError{Op: "add", Path: name, Err: ErrDuplicate}
		}
		if !n.isDir {
			return nil, &fs.PathError{Op: "add", Path: name, Err: fmt.Errorf("%w: %q is a file", ErrDuplicate, name[:end])}
		}
		parent = n
		level++
		start = end + 1
	}
	// Path table parent numbers are 16 bits, and the root is one of them.
	if w.ndir+dirDepth-level > 0xfffe {
		return nil, &fs.PathError{Op: "add", Path: name, Err: fmt.Errorf("%w: more than 65,535 directories", ErrTooLarge)}
	}
	// Everything from here down is new.
	for {
		end, last := nextComponent(name, start)
		comp := name[start:end]
		jlen, _ := checkComponent(comp)
		n := &node{name: comp, path: name[:end], parent: parent, isDir: isDir || !last, jlen: uint8(jlen)}
		parent.kids = append(parent.kids, n)
		w.index[n.path] = n
		if n.isDir {
			w.ndir++
			parent.nsub++
		}
		if last {
			return n, nil
		}
		parent = n
		start = end + 1
	}
}

// Close lays out the image and writes all of it to the underlying writer,
// reading each file's contents in turn. It does not close the underlying
// writer. If a file's reader fails or yields the wrong number of bytes,
// Close returns an *[io/fs.PathError] naming that file (wrapping
// [ErrSizeMismatch] for a size mismatch); the output written so far is then
// incomplete and must be discarded.
func (w *Writer) Close() error {
	if w.done {
		return ErrClosed
	}
	w.done = true
	if w.err != nil {
		return w.err
	}
	if err := w.layout(); err != nil {
		w.err = err
		return err
	}
	w.err = w.write()
	w.index = nil
	return w.err
}

// nextComponent returns where the path component of name that starts at
// start ends, and whether it is the last one.
func nextComponent(name string, start int) (end int, last bool) {
	end = strings.IndexByte(name[start:], '/')
	if end < 0 {
		return len(name), true
	}
	return start + end, false
}
