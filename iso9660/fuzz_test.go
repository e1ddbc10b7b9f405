package iso9660

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// FuzzWriter derives a tree from the input, writes it, and reads it back
// with the package's Reader: every accepted entry must come back with its
// name, mode and contents, the image must be aligned, and adding the same
// entries in reverse order must give the same bytes. Rejected names are
// fine as long as the error is one of the package's sentinels.
//
// spec holds one entry per line: a trailing '/' makes a directory, a
// leading '!' an executable file. data is shared out among the files.
func FuzzWriter(f *testing.F) {
	f.Add("user-data\nmeta-data\nnetwork-config", []byte("#cloud-config\ninstance-id: x\nversion: 2\n"))
	f.Add("openstack/latest/meta_data.json\nopenstack/latest/user_data\nopenstack/content/0000\nopenstack/latest/", []byte(`{"uuid":"x"}`))
	f.Add("a/b/c/d/e/f/g/h\na/b/c/d/e/f/g/h/i\n!run.sh\nempty\nz/", []byte("xyz"))
	f.Add("ünïcödé\n日本語/ファイル\nUSER-DATA\nuser_data\nuser-data\n"+strings.Repeat("語", 64), []byte("abc"))
	f.Add("a\na\na/b\n../x\n/abs\nx:y\nq?\n", []byte{})
	f.Add(strings.Repeat("long-name-long-name-long-name-long-name-long-name-long-nam\n", 40), []byte("0123456789"))
	f.Fuzz(func(t *testing.T, spec string, data []byte) {
		lines := strings.Split(spec, "\n")
		if len(lines) > 64 {
			lines = lines[:64]
		}
		var entries []tfile
		for _, l := range lines {
			e := tfile{name: l}
			if n, ok := strings.CutSuffix(l, "/"); ok && n != "" {
				e = tfile{name: n, dir: true}
			} else if n, ok := strings.CutPrefix(l, "!"); ok {
				e = tfile{name: n, exec: true}
			}
			entries = append(entries, e)
		}
		nfiles := 0
		for _, e := range entries {
			if !e.dir {
				nfiles++
			}
		}
		k := 0
		for i := range entries {
			if !entries[i].dir {
				entries[i].data = string(data[k*len(data)/nfiles : (k+1)*len(data)/nfiles])
				k++
			}
		}

		add := func(w *Writer, e tfile) error {
			if e.dir {
				return w.AddDir(e.name)
			}
			mode := fs.FileMode(0o644)
			if e.exec {
				mode = 0o755
			}
			return w.AddFile(e.name, int64(len(e.data)), mode, strings.NewReader(e.data))
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, Options{Label: "fuzz"})
		var accepted []tfile
		for _, e := range entries {
			err := add(w, e)
			switch {
			case err == nil:
				accepted = append(accepted, e)
			case errors.Is(err, ErrInvalidName), errors.Is(err, ErrDuplicate), errors.Is(err, ErrTooDeep):
			default:
				t.Fatalf("add %q: unexpected error %v", e.name, err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		img := buf.Bytes()
		if len(img)%4096 != 0 {
			t.Fatalf("image of %d bytes", len(img))
		}

		var again bytes.Buffer
		w = NewWriter(&again, Options{Label: "fuzz"})
		for _, e := range slices.Backward(accepted) {
			if err := add(w, e); err != nil {
				// A directory first implied and later added explicitly
				// is a duplicate in the other order; that is fine.
				if !e.dir || !errors.Is(err, ErrDuplicate) {
					t.Fatalf("re-adding %q: %v", e.name, err)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(img, again.Bytes()) {
			t.Fatal("the add order changed the image")
		}

		r, err := NewReader(bytes.NewReader(img), int64(len(img)))
		if err != nil {
			t.Fatal(err)
		}
		want := expected(accepted)
		seen := 0
		err = fs.WalkDir(r, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == "." {
				return err
			}
			seen++
			e, ok := want[p]
			info, _ := d.Info()
			if !ok || info.IsDir() != e.dir || info.Mode().Perm() != e.mode {
				t.Fatalf("read back %q (%v), want %+v", p, info.Mode(), e)
			}
			if !e.dir {
				b, err := fs.ReadFile(r, p)
				if err != nil || string(b) != e.data {
					t.Fatalf("%q: contents differ (%v)", p, err)
				}
			}
			return nil
		})
		if err != nil || seen != len(want) {
			t.Fatalf("read back %d entries, want %d (%v)", seen, len(want), err)
		}
	})
}

// FuzzReader feeds garbage to the Reader: it may fail, but must not panic,
// loop or allocate beyond the image's size, and whatever tree it returns
// must be walkable and readable.
//
// Most of an image is zeros, and mutating those finds little, so the input
// is sparse: a sequence of (sector, 16-bit big-endian length, bytes)
// records that unsparseImage lays out. Small inputs also keep the fuzzer's
// minimisation, which is quadratic in the input size, short.
func FuzzReader(f *testing.F) {
	for _, fx := range fixtures() {
		if fx.name == "nocloud" || fx.name == "configdrive" || fx.name == "deep" {
			f.Add(sparseImage(fx.build(f)))
		}
	}
	// A directory that contains itself.
	loop := fixtures()[0].build(f)
	root := int(loop[16*2048+156+2])
	dot := loop[root*2048:]
	p := int(dot[0]) + int(dot[int(dot[0])])
	dot[p+25] |= 2 // meta-data becomes a directory ...
	copy(dot[p+2:p+10], dot[2:10])
	copy(dot[p+10:p+18], dot[10:18]) // ... whose extent is the root's
	f.Add(sparseImage(loop))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		img := unsparseImage(in)
		r, err := NewReader(bytes.NewReader(img), int64(len(img)))
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("error %v wraps neither ErrFormat nor ErrUnexpectedEOF", err)
			}
			return
		}
		// Many records may share one large extent; reading each in full
		// would make an exec quadratic, so stop reading after a budget.
		budget := int64(256 << 10)
		fs.WalkDir(r, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatalf("walk %q: %v", p, err)
			}
			if info, _ := d.Info(); !d.IsDir() && info.Size() <= budget {
				budget -= info.Size()
				b, err := fs.ReadFile(r, p)
				if err != nil {
					t.Fatalf("read %q: %v", p, err)
				}
				info, _ := d.Info()
				if int64(len(b)) != info.Size() {
					t.Fatalf("%q: read %d bytes of %d", p, len(b), info.Size())
				}
			}
			return nil
		})
	})
}

// sparseImage encodes the non-zero sectors of an image of at most 256
// sectors for FuzzReader, trailing zeros trimmed.
func sparseImage(img []byte) []byte {
	var out []byte
	for s := 0; s*2048 < len(img) && s < 256; s++ {
		sec := bytes.TrimRight(img[s*2048:(s+1)*2048], "\x00")
		if len(sec) > 0 {
			out = append(out, byte(s), byte(len(sec)>>8), byte(len(sec)))
			out = append(out, sec...)
		}
	}
	// The last sector, so that the image keeps its size.
	return append(out, byte(len(img)/2048-1), 0, 0)
}

// unsparseImage decodes sparseImage's format; whatever the input, the
// image has at least 19 sectors and at most 256.
func unsparseImage(in []byte) []byte {
	last := 18
	for p := in; len(p) >= 3; {
		n := min(int(p[1])<<8|int(p[2]), 2048, len(p)-3)
		last = max(last, int(p[0]))
		p = p[3+n:]
	}
	img := make([]byte, (last+1)*2048)
	for len(in) >= 3 {
		s, n := int(in[0]), min(int(in[1])<<8|int(in[2]), 2048, len(in)-3)
		copy(img[s*2048:], in[3:3+n])
		in = in[3+n:]
	}
	return img
}
