package iso9660

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tfile is one entry of a test tree: a directory when dir is set, else a
// file with data.
type tfile struct {
	name string
	data string
	dir  bool
	exec bool
}

type fixture struct {
	name  string
	label string
	files []tfile
}

var testTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func nocloudFiles() []tfile {
	return []tfile{
		{name: "user-data", data: "#cloud-config\nhostname: seed\nssh_authorized_keys:\n  - ssh-ed25519 AAAA test\n"},
		{name: "meta-data", data: "instance-id: iid-local01\nlocal-hostname: seed\n"},
		{name: "network-config", data: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n"},
	}
}

// fixtures are the representative images every oracle checks.
func fixtures() []fixture {
	wide := []tfile{}
	for i := range 200 {
		// 63- and 64-character names: 200 of them need several directory
		// sectors in both trees (go-diskfs#295 broke Rock Ridge there).
		// The CJK names are 177 bytes of UTF-8, too long for a directory
		// record, so their NM entries fill several continuation sectors.
		suffix := "-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		n := strings.Repeat("long-name-", 5) + suffix + "-0123.json"
		if i%2 == 1 {
			n = strings.Repeat("語", 57) + suffix + ".txt"
		}
		wide = append(wide, tfile{name: "wide/" + n, data: n + "\n"})
	}
	mib := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	return []fixture{
		{name: "nocloud", label: "cidata", files: nocloudFiles()},
		{name: "configdrive", label: "config-2", files: []tfile{
			{name: "openstack/latest/meta_data.json", data: `{"uuid":"83679162-1378-4288-a2d4-70e13ec132aa","hostname":"cd"}`},
			{name: "openstack/latest/user_data", data: "#cloud-config\n{}\n"},
			{name: "openstack/latest/network_data.json", data: `{"links":[],"networks":[],"services":[]}`},
			{name: "openstack/latest/vendor_data.json", data: "{}"},
			{name: "openstack/content/0000", data: "auto lo\niface lo inet loopback\n"},
		}},
		{name: "deep", label: "deep", files: []tfile{
			{name: "a/b/c/d/e/f/g/leaf.txt", data: "deepest file\n"},
			{name: "a/b/c/d/e/f/g/h", data: "a file at the eighth level\n"},
			{name: "a/b/x/y", dir: true},
			{name: "a/b/c/other", data: "other\n", exec: true},
			{name: "z", dir: true},
		}},
		{name: "wide", label: "wide", files: wide},
		// The only file is empty, so its extent is the end of the data.
		{name: "emptyonly", label: "e", files: []tfile{{name: "empty"}}},
		{name: "special", label: "CIDATA", files: []tfile{
			{name: "empty", data: ""},
			{name: "also-empty", data: ""},
			{name: "one-mib.bin", data: string(mib)},
			{name: "ünïcödé-ñame.txt", data: "unicode\n"},
			{name: "dash-ed/na-me.with.dots.tar.gz", data: "dots\n"},
			{name: "Mixed Case & spaces (1)", data: "mixed\n"},
			{name: "run.sh", data: "#!/bin/sh\necho hi\n", exec: true},
			{name: "日本語/ファイル", data: "cjk\n"},
			{name: "user_data", data: "collides with user-data in the primary tree\n"},
			{name: "user-data", data: "user-data\n"},
			{name: "USER-DATA", data: "upper\n"},
			{name: "x" + strings.Repeat("y", 63), data: "64 characters\n"},
		}},
	}
}

// build writes the files, in the given order, into an image.
func build(t testing.TB, opts Options, files []tfile) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, opts)
	for _, f := range files {
		var err error
		if f.dir {
			err = w.AddDir(f.name)
		} else {
			mode := fs.FileMode(0o644)
			if f.exec {
				mode = 0o755
			}
			err = w.AddFile(f.name, int64(len(f.data)), mode, strings.NewReader(f.data))
		}
		if err != nil {
			t.Fatalf("add %s: %v", f.name, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return buf.Bytes()
}

func (fx fixture) build(t testing.TB) []byte {
	t.Helper()
	return build(t, Options{Label: fx.label, ModTime: testTime}, fx.files)
}

// writeImage stores img in a fresh temporary directory and returns its
// path.
func writeImage(t testing.TB, img []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "seed.iso")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// treeEntry is what an independent reader should see for one path.
type treeEntry struct {
	dir  bool
	mode fs.FileMode // permission bits
	data string
}

// expected returns every path of the tree, implied directories included,
// with the normalised modes the Writer promises.
func expected(files []tfile) map[string]treeEntry {
	m := map[string]treeEntry{}
	for _, f := range files {
		for d := path.Dir(f.name); d != "."; d = path.Dir(d) {
			m[d] = treeEntry{dir: true, mode: 0o555}
		}
		switch {
		case f.dir:
			m[f.name] = treeEntry{dir: true, mode: 0o555}
		case f.exec:
			m[f.name] = treeEntry{mode: 0o555, data: f.data}
		default:
			m[f.name] = treeEntry{mode: 0o444, data: f.data}
		}
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkExtracted compares a directory extracted by an external tool with
// the expected tree: the same paths, the same contents.
func checkExtracted(t *testing.T, tool, dir string, want map[string]treeEntry) {
	t.Helper()
	got := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		got[rel] = true
		w, ok := want[rel]
		if !ok {
			t.Errorf("%s extracted unexpected %q", tool, rel)
			return nil
		}
		if d.IsDir() != w.dir {
			t.Errorf("%s: %q is dir=%v, want %v", tool, rel, d.IsDir(), w.dir)
			return nil
		}
		if !w.dir {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if string(b) != w.data {
				t.Errorf("%s: %q has %d bytes that differ from the %d written", tool, rel, len(b), len(w.data))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: walk: %v", tool, err)
	}
	for _, k := range sortedKeys(want) {
		if !got[k] {
			t.Errorf("%s did not extract %q", tool, k)
		}
	}
}

// makeRemovable lets t.TempDir's cleanup delete trees that an extractor
// created with the image's read-only directory modes.
func makeRemovable(t *testing.T, dir string) {
	t.Cleanup(func() {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
}
