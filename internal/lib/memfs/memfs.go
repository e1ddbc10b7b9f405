// Package memfs is a read-only [io/fs.FS] held in memory, built once from
// a list of entries: a seed's files as seed.(*Seed).FS serves them, and a
// tar archive's as media reads one back. It is what [testing/fstest.MapFS]
// would be, without bringing a testing package into production code, and
// stricter: a path cannot be a file and a directory at once.
package memfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// DirMode is the mode of a directory no entry names, implied by a path
// below it.
const DirMode = fs.ModeDir | 0o555

// Entry is one file or directory.
type Entry struct {
	// Path is slash-separated and valid by [io/fs.ValidPath]; not ".".
	Path string
	// Data is a file's content. The FS shares it: do not modify it while
	// the FS is in use.
	Data []byte
	// Mode is the file's mode: permission bits, plus [io/fs.ModeDir] for a
	// directory. Other type bits are kept as given.
	Mode    fs.FileMode
	ModTime time.Time
}

// FS is the file system New builds. It implements [io/fs.ReadDirFS],
// [io/fs.ReadFileFS] and [io/fs.StatFS], and is safe for concurrent use.
type FS struct{ nodes map[string]*node }

type node struct {
	name     string
	mode     fs.FileMode
	modTime  time.Time
	data     []byte
	children []*node // sorted by name
}

func (n *node) isDir() bool { return n.mode.IsDir() }

// New builds an FS of entries. Parents that no entry names are implied,
// with [DirMode] and the zero time. A later entry replaces an earlier one
// of the same path and kind, as a tar's later member does on extraction.
// An entry whose path is invalid, or that would make a path both a file and
// a directory, is left out and named in the error, which lists every such
// entry; the FS returned holds all the others.
func New(entries []Entry) (*FS, error) {
	m := &FS{nodes: map[string]*node{".": {name: ".", mode: DirMode}}}
	var errs []error
	for _, e := range entries {
		if err := m.add(e); err != nil {
			errs = append(errs, err)
		}
	}
	for p, n := range m.nodes {
		if p != "." {
			parent := m.nodes[path.Dir(p)]
			parent.children = append(parent.children, n)
		}
	}
	for _, n := range m.nodes {
		slices.SortFunc(n.children, func(a, b *node) int { return strings.Compare(a.name, b.name) })
	}
	return m, errors.Join(errs...)
}

// add places e and the parents it implies, or changes nothing and says why.
func (m *FS) add(e Entry) error {
	if !fs.ValidPath(e.Path) || e.Path == "." {
		return fmt.Errorf("%q is not a valid path", e.Path)
	}
	for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
		if n := m.nodes[d]; n != nil && !n.isDir() {
			return fmt.Errorf("%q is both a file and a directory", d)
		}
	}
	if n := m.nodes[e.Path]; n != nil && n.isDir() != e.Mode.IsDir() {
		return fmt.Errorf("%q is both a file and a directory", e.Path)
	}
	for d := path.Dir(e.Path); d != "." && m.nodes[d] == nil; d = path.Dir(d) {
		m.nodes[d] = &node{name: path.Base(d), mode: DirMode}
	}
	m.nodes[e.Path] = &node{name: path.Base(e.Path), mode: e.Mode, modTime: e.ModTime, data: e.Data}
	return nil
}

func (m *FS) lookup(op, name string) (*node, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	n, ok := m.nodes[name]
	if !ok {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// Open implements [io/fs.FS]. Files also implement [io.ReaderAt] and
// [io.Seeker].
func (m *FS) Open(name string) (fs.File, error) {
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		return &openDir{n: n, path: name}, nil
	}
	return &openFile{n: n, Reader: bytes.NewReader(n.data)}, nil
}

// ReadFile implements [io/fs.ReadFileFS]; the bytes are a copy.
func (m *FS) ReadFile(name string) ([]byte, error) {
	n, err := m.lookup("readfile", name)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrInvalid}
	}
	return bytes.Clone(n.data), nil
}

// ReadDir implements [io/fs.ReadDirFS].
func (m *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	return entries(n.children), nil
}

// Stat implements [io/fs.StatFS].
func (m *FS) Stat(name string) (fs.FileInfo, error) {
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return info{n}, nil
}

func entries(children []*node) []fs.DirEntry {
	out := make([]fs.DirEntry, len(children))
	for i, c := range children {
		out[i] = fs.FileInfoToDirEntry(info{c})
	}
	return out
}

// info is a node's fs.FileInfo.
type info struct{ n *node }

func (i info) Name() string       { return i.n.name }
func (i info) Size() int64        { return int64(len(i.n.data)) }
func (i info) Mode() fs.FileMode  { return i.n.mode }
func (i info) ModTime() time.Time { return i.n.modTime }
func (i info) IsDir() bool        { return i.n.isDir() }
func (i info) Sys() any           { return nil }

type openFile struct {
	n *node
	*bytes.Reader
}

func (f *openFile) Stat() (fs.FileInfo, error) { return info{f.n}, nil }
func (f *openFile) Close() error               { return nil }

type openDir struct {
	n    *node
	path string
	pos  int
}

func (d *openDir) Stat() (fs.FileInfo, error) { return info{d.n}, nil }
func (d *openDir) Close() error               { return nil }
func (d *openDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.path, Err: fs.ErrInvalid}
}

// ReadDir implements [io/fs.ReadDirFile].
func (d *openDir) ReadDir(count int) ([]fs.DirEntry, error) {
	rest := d.n.children[d.pos:]
	if count <= 0 {
		d.pos = len(d.n.children)
		return entries(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	rest = rest[:min(count, len(rest))]
	d.pos += len(rest)
	return entries(rest), nil
}
