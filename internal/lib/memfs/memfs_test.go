package memfs

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

var when = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// TestFS: the tree passes fstest.TestFS, implied parents have DirMode and
// the zero time, entries keep their modes and times, and a later entry of
// the same path replaces the earlier one.
func TestFS(t *testing.T) {
	m, err := New([]Entry{
		{Path: "openstack/latest/meta_data.json", Data: []byte("{}"), Mode: 0o444},
		{Path: "user-data", Data: []byte("old"), Mode: 0o444},
		{Path: "user-data", Data: []byte("#cloud-config\n"), Mode: 0o640, ModTime: when},
		{Path: "empty", Mode: fs.ModeDir | 0o700, ModTime: when},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(m, "openstack/latest/meta_data.json", "user-data", "empty"); err != nil {
		t.Fatal(err)
	}
	if fi, err := m.Stat("openstack/latest"); err != nil || fi.Mode() != DirMode || !fi.ModTime().IsZero() {
		t.Errorf("implied directory: %v, %v", fi, err)
	}
	if fi, err := m.Stat("empty"); err != nil || fi.Mode() != fs.ModeDir|0o700 || !fi.ModTime().Equal(when) {
		t.Errorf("named directory: %v, %v", fi, err)
	}
	if b, err := m.ReadFile("user-data"); err != nil || string(b) != "#cloud-config\n" {
		t.Errorf("later entry: %q, %v", b, err)
	}
	if fi, err := m.Stat("user-data"); err != nil || fi.Mode() != 0o640 || !fi.ModTime().Equal(when) {
		t.Errorf("user-data: %v, %v", fi, err)
	}
	if _, err := m.ReadFile("openstack"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("ReadFile of a directory: %v", err)
	}
}

// TestConflicts: a path cannot be a file and a directory, whichever comes
// first, nor invalid; every such entry is named, and the rest are served.
func TestConflicts(t *testing.T) {
	m, err := New([]Entry{
		{Path: "a", Data: []byte("file"), Mode: 0o444},
		{Path: "a/b", Data: []byte("below a file"), Mode: 0o444},
		{Path: "c/d", Data: []byte("x"), Mode: 0o444},
		{Path: "c", Data: []byte("file over a directory"), Mode: 0o444},
		{Path: "e", Mode: fs.ModeDir | 0o555},
		{Path: "e", Data: []byte("file over a named directory"), Mode: 0o444},
		{Path: "../up", Data: []byte("x"), Mode: 0o444},
		{Path: "ok", Data: []byte("ok"), Mode: 0o444},
	})
	for _, want := range []string{`"a" is both`, `"c" is both`, `"e" is both`, `"../up" is not a valid path`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %s", err, want)
		}
	}
	if err := fstest.TestFS(m, "a", "c/d", "e", "ok"); err != nil {
		t.Error(err)
	}
	if b, err := m.ReadFile("a"); err != nil || string(b) != "file" {
		t.Errorf("a: %q, %v", b, err)
	}
}
