package seed

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// FS returns a read-only view of the seed as a file system, for writers
// that take an fs.FS (fs.WalkDir, os.CopyFS, an image writer's AddFS).
// Files report mode 0444 and directories 0555, and every modification
// time is the zero time: nothing in the view depends on when it was made.
// The view shares the seed's data; do not modify the seed while using it.
func (s *Seed) FS() fs.FS {
	m := &memFS{nodes: map[string]*node{".": {name: ".", dir: true}}}
	for _, d := range s.dirs() {
		m.nodes[d] = &node{name: path.Base(d), dir: true}
	}
	for _, f := range s.Files {
		if fs.ValidPath(f.Path) {
			m.nodes[f.Path] = &node{name: path.Base(f.Path), data: f.Data}
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
	return m
}

type memFS struct{ nodes map[string]*node }

type node struct {
	name     string
	dir      bool
	data     []byte
	children []*node
}

func (m *memFS) lookup(op, name string) (*node, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	n, ok := m.nodes[name]
	if !ok {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// Open implements fs.FS.
func (m *memFS) Open(name string) (fs.File, error) {
	n, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return &openDir{n: n}, nil
	}
	return &openFile{n: n, r: bytes.NewReader(n.data)}, nil
}

// ReadFile implements fs.ReadFileFS.
func (m *memFS) ReadFile(name string) ([]byte, error) {
	n, err := m.lookup("readfile", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrInvalid}
	}
	return bytes.Clone(n.data), nil
}

// ReadDir implements fs.ReadDirFS.
func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	return entries(n.children), nil
}

// Stat implements fs.StatFS.
func (m *memFS) Stat(name string) (fs.FileInfo, error) {
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

func (i info) Name() string { return i.n.name }
func (i info) Size() int64 {
	if i.n.dir {
		return 0
	}
	return int64(len(i.n.data))
}
func (i info) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i info) ModTime() time.Time { return time.Time{} }
func (i info) IsDir() bool        { return i.n.dir }
func (i info) Sys() any           { return nil }

type openFile struct {
	n *node
	r *bytes.Reader
}

func (f *openFile) Stat() (fs.FileInfo, error) { return info{f.n}, nil }
func (f *openFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *openFile) ReadAt(p []byte, off int64) (int, error) {
	return f.r.ReadAt(p, off)
}
func (f *openFile) Seek(off int64, whence int) (int64, error) { return f.r.Seek(off, whence) }
func (f *openFile) Close() error                              { return nil }

type openDir struct {
	n   *node
	pos int
}

func (d *openDir) Stat() (fs.FileInfo, error) { return info{d.n}, nil }
func (d *openDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.n.name, Err: fs.ErrInvalid}
}
func (d *openDir) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
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
