package vfat

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"testing"
	"time"
)

// treeFromFuzz decodes fuzz input into a list of add operations. Layout,
// repeated: kind byte (even: file, odd: dir), name length, name bytes, and
// for files a content length byte (scaled so that a few inputs span
// several clusters).
func treeFromFuzz(data []byte) []entry {
	var out []entry
	for len(data) >= 2 && len(out) < 64 {
		kind, n := data[0], int(data[1])
		data = data[2:]
		n = min(n, len(data))
		name := string(data[:n])
		data = data[n:]
		if kind&1 == 1 {
			out = append(out, entry{name: name, isDir: true})
			continue
		}
		size := 0
		if len(data) > 0 {
			size = int(data[0]) * (1 + int(kind>>1)%16)
			data = data[1:]
		}
		out = append(out, entry{name: name, content: pattern(size, kind)})
	}
	return out
}

// FuzzWriter writes a tree decoded from the input, reads the image back
// with Open and requires the same files, and requires the same bytes when
// the tree is added in reverse order.
func FuzzWriter(f *testing.F) {
	f.Add([]byte("\x00\x09user-data\x10\x00\x09meta-data\x01\x00\x0enetwork-config\x00"), uint32(0))
	f.Add([]byte("\x00\x1fopenstack/latest/meta_data.json\x40\x02\x10openstack/latest\x00\x01user_data\xff"), uint32(1700000000))
	f.Add([]byte("\x00\x03a+b\x01\x00\x03a,b\x02\x00\x03A+B\x03\x01\x01a\x00\x03a/b\x05"), uint32(7))
	f.Add([]byte("\x1e\x0cÜnïcödé\x80\x00\x07.hidden\x01\x00\x05x.y.z\x01"), uint32(315532800))
	f.Fuzz(func(t *testing.T, data []byte, mod uint32) {
		tree := treeFromFuzz(data)
		opts := Options{Label: "cidata", ModTime: time.Unix(int64(mod), 0).UTC()}
		add := func(w *Writer, list []entry) []entry {
			var ok []entry
			for _, e := range list {
				var err error
				if e.isDir {
					err = w.AddDir(e.name)
				} else {
					err = w.AddFile(e.name, int64(len(e.content)), 0o644, bytes.NewReader(e.content))
				}
				switch {
				case err == nil:
					ok = append(ok, e)
				case errors.Is(err, ErrInvalidName), errors.Is(err, ErrDuplicate):
				default:
					t.Fatalf("add %q: unexpected error %v", e.name, err)
				}
			}
			return ok
		}
		var a bytes.Buffer
		w := NewWriter(&a, opts)
		accepted := add(w, tree)
		if err := w.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		if a.Len()%Align != 0 || a.Len() < MinSize {
			t.Fatalf("image size %d", a.Len())
		}
		im, err := NewReader(bytes.NewReader(a.Bytes()), int64(a.Len()))
		if err != nil {
			t.Fatalf("reading our own image: %v", err)
		}
		if im.Label != "cidata" || im.BootLabel != "cidata" {
			t.Fatalf("labels %q %q", im.Label, im.BootLabel)
		}
		checkTree(t, im, accepted)

		var b bytes.Buffer
		w = NewWriter(&b, opts)
		rev := make([]entry, len(accepted))
		for i, e := range accepted {
			rev[len(rev)-1-i] = e
		}
		add(w, rev)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatal("reverse add order gives different bytes")
		}
	})
}

// FuzzReader feeds arbitrary bytes to Open and, when it accepts them, walks
// and reads everything. It must neither panic nor loop. Each input is used
// twice: as an image, and as a list of 3-byte patches (offset, value) to a
// valid image, which reaches the directory and FAT parsing far more often
// than random bytes do.
func FuzzReader(f *testing.F) {
	img := smallImage(f)
	f.Add(img)
	f.Add(img[:4096])
	f.Add(buildImage(f, Options{Label: "config-2", Size: 24576}, configDriveTree()))
	// A loop in a chain (see TestReaderRejectsCorruption).
	loop := bytes.Clone(img)
	setFAT12(loop, 3, 2)
	f.Add(loop)
	// Patches: FAT12 entry 3 (byte 516) to point at cluster 2, a loop; and
	// the sequence byte of the first LFN entry (root at 0x600, after the
	// label entry) to 0x20.
	f.Add([]byte{0x04, 0x02, 0x20, 0x20, 0x06, 0x20})
	f.Fuzz(func(t *testing.T, data []byte) {
		readAll(t, data)
		patched := bytes.Clone(img)
		for i := 0; i+3 <= len(data); i += 3 {
			off := (int(data[i]) | int(data[i+1])<<8) % len(patched)
			patched[off] = data[i+2]
		}
		readAll(t, patched)
	})
}

func readAll(t *testing.T, data []byte) {
	im, err := NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		if !errors.Is(err, ErrFormat) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		return
	}
	n := 0
	err = fs.WalkDir(im, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > 1<<16 {
			t.Fatal("walk does not end")
		}
		if !d.IsDir() {
			if _, err := fs.ReadFile(im, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk of an accepted image: %v", err)
	}
}
