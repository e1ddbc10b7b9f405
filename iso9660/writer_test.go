package iso9660

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
	"unicode/utf16"
)

func TestRoundTrip(t *testing.T) {
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			img := fx.build(t)
			r, err := NewReader(bytes.NewReader(img), int64(len(img)))
			if err != nil {
				t.Fatal(err)
			}
			if r.Label != fx.label || r.JolietLabel != fx.label || r.JolietLevel != 3 || r.RockRidge != "RRIP_1991A" {
				t.Errorf("got label %q, Joliet %q level %d, RR %q", r.Label, r.JolietLabel, r.JolietLevel, r.RockRidge)
			}
			if r.UUID != "2024-05-06-07-08-09-00" {
				t.Errorf("UUID %q", r.UUID)
			}
			if r.VolumeSize != int64(len(img)) {
				t.Errorf("volume size %d, image %d bytes", r.VolumeSize, len(img))
			}
			want := expected(fx.files)
			var paths []string
			for _, p := range sortedKeys(want) {
				if !want[p].dir {
					paths = append(paths, p)
				}
			}
			if err := fstest.TestFS(r, paths...); err != nil {
				t.Fatal(err)
			}
			got := 0
			err = fs.WalkDir(r, ".", func(p string, d fs.DirEntry, err error) error {
				if err != nil || p == "." {
					return err
				}
				got++
				w, ok := want[p]
				info, _ := d.Info()
				switch {
				case !ok:
					t.Errorf("unexpected %q", p)
				case info.IsDir() != w.dir || info.Mode().Perm() != w.mode:
					t.Errorf("%q: mode %v, want dir=%v perm %v", p, info.Mode(), w.dir, w.mode)
				case !info.ModTime().Equal(testTime):
					t.Errorf("%q: time %v", p, info.ModTime())
				case !w.dir:
					b, err := fs.ReadFile(r, p)
					if err != nil || string(b) != w.data {
						t.Errorf("%q: contents differ (%v)", p, err)
					}
				}
				return nil
			})
			if err != nil || got != len(want) {
				t.Errorf("walked %d entries, want %d (%v)", got, len(want), err)
			}
		})
	}
}

func TestReproducible(t *testing.T) {
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			a := fx.build(t)
			shuffled := slices.Clone(fx.files)
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			slices.Reverse(shuffled[:len(shuffled)/2])
			b := build(t, Options{Label: fx.label, ModTime: testTime}, shuffled)
			if !bytes.Equal(a, b) {
				t.Fatal("the add order changed the image")
			}
			// A different ModTime must show up, in a different blkid UUID.
			c := build(t, Options{Label: fx.label, ModTime: testTime.Add(time.Second)}, fx.files)
			if bytes.Equal(a, c) {
				t.Fatal("ModTime did not change the image")
			}
			// A zone does not change the instant, so not the bytes either.
			d := build(t, Options{Label: fx.label, ModTime: testTime.In(time.FixedZone("X", 3600))}, fx.files)
			if !bytes.Equal(a, d) {
				t.Fatal("the time zone of ModTime changed the image")
			}
		})
	}
}

func TestZeroModTimeIsEpoch(t *testing.T) {
	img := build(t, Options{Label: "cidata"}, nocloudFiles())
	r, err := NewReader(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	if r.UUID != "1970-01-01-00-00-00-00" {
		t.Errorf("UUID %q, want the epoch", r.UUID)
	}
}

func TestSizeAndAlignment(t *testing.T) {
	seed := build(t, Options{Label: "cidata"}, nocloudFiles())
	// genisoimage writes 368 KiB for the same seed. A small
	// seed is exactly the 0x11000 bytes busybox's volume_id needs to see a
	// label: smaller would be invisible to it, larger wasted.
	if len(seed) != 0x11000 {
		t.Errorf("3-file seed is %d bytes, want %d", len(seed), 0x11000)
	}
	for _, align := range []int64{0, 2048, 4096, 1 << 20} {
		for _, fx := range fixtures() {
			img := build(t, Options{Label: fx.label, Alignment: align}, fx.files)
			want := align
			if align == 0 {
				want = 4096
			}
			if int64(len(img))%want != 0 {
				t.Errorf("%s align %d: %d bytes", fx.name, align, len(img))
			}
			if vs := int64(binary.LittleEndian.Uint32(img[16*2048+80:])) * 2048; vs != int64(len(img)) || vs < 21*2048 {
				t.Errorf("%s align %d: volume size %d bytes, file %d bytes", fx.name, align, vs, len(img))
			}
		}
	}
	empty := build(t, Options{Label: "empty"}, nil)
	if n := binary.LittleEndian.Uint32(empty[16*2048+80:]); n < 21 {
		t.Errorf("empty image has %d sectors; libarchive needs more than 20", n)
	}
}

// TestVolumeDescriptors checks the PVD and SVD fields that readers and
// reproducibility depend on (ECMA-119 8.4 and 8.5, Joliet).
func TestVolumeDescriptors(t *testing.T) {
	img := build(t, Options{Label: "config-2", ModTime: testTime}, fixtures()[1].files)
	pvd := img[16*2048 : 17*2048]
	svd := img[17*2048 : 18*2048]
	term := img[18*2048 : 19*2048]
	vs := binary.LittleEndian.Uint32(pvd[80:])
	for _, vd := range [][]byte{pvd, svd} {
		if string(vd[1:7]) != "CD001\x01" || vd[881] != 1 {
			t.Errorf("bad header %q", vd[:7])
		}
		check733(t, "volume size", vd[80:], vs)
		check723(t, "block size", vd[128:], 2048)
		check723(t, "volume set size", vd[120:], 1)
		if string(vd[813:830]) != "2024050607080900\x00" || string(vd[830:847]) != "2024050607080900\x00" {
			t.Errorf("creation/modification dates %q %q", vd[813:830], vd[830:847])
		}
		if string(vd[847:864]) != "0000000000000000\x00" {
			t.Errorf("expiration date set: %q", vd[847:864])
		}
		lpt := binary.LittleEndian.Uint32(vd[140:])
		mpt := binary.BigEndian.Uint32(vd[148:])
		// libarchive's isPVD: L path table in [18, volume size).
		if lpt < 18 || lpt >= vs || mpt < 18 || mpt >= vs {
			t.Errorf("path tables at %d and %d, volume %d sectors", lpt, mpt, vs)
		}
		if vd[156] != 34 {
			t.Errorf("root record length %d", vd[156])
		}
		if !bytes.Equal(vd[1395:], make([]byte, 653)) || !bytes.Equal(vd[72:80], make([]byte, 8)) {
			t.Error("reserved fields not zero")
		}
	}
	if pvd[0] != 1 || svd[0] != 2 || term[0] != 255 || string(term[1:7]) != "CD001\x01" {
		t.Errorf("descriptor types %d %d %d", pvd[0], svd[0], term[0])
	}
	if string(pvd[40:72]) != "config-2"+strings.Repeat(" ", 24) {
		t.Errorf("PVD label %q", pvd[40:72])
	}
	// Every identifier is padded with spaces, never NUL, and names no host
	// or tool.
	for _, f := range [][2]int{{8, 40}, {190, 702}, {702, 813}} {
		if s := string(pvd[f[0]:f[1]]); strings.Trim(s, " ") != "" {
			t.Errorf("PVD bytes %d-%d: %q", f[0], f[1], s)
		}
	}
	if string(svd[88:91]) != "%/E" {
		t.Errorf("Joliet escape %q", svd[88:91])
	}
	if got := string(utf16.Decode(u16(svd[40:72]))); got != "config-2"+strings.Repeat(" ", 8) {
		t.Errorf("SVD label %q", got)
	}
	// The 37-byte file identifier fields are padded each on its own: 18
	// UCS-2 spaces and a zero byte, as genisoimage and xorriso write them.
	for _, f := range [][2]int{{8, 40}, {190, 702}, {702, 738}, {739, 775}, {776, 812}} {
		if got := string(utf16.Decode(u16(svd[f[0]:f[1]]))); strings.Trim(got, " ") != "" {
			t.Errorf("SVD bytes %d-%d: %q", f[0], f[1], got)
		}
	}
	// The application use area and unused tail are zero; the data end at
	// the last byte of the volume.
	if len(img) != int(vs)*2048 {
		t.Errorf("file %d bytes, volume %d sectors", len(img), vs)
	}
}

// TestRockRidgeEntries checks the raw SUSP/RRIP entries (SUSP 1.12, RRIP 1.10).
func TestRockRidgeEntries(t *testing.T) {
	img := build(t, Options{Label: "cidata", ModTime: testTime}, append(nocloudFiles(), tfile{name: "sub/x", data: "x"}))
	pvd := img[16*2048:]
	root := binary.LittleEndian.Uint32(pvd[156+2:])
	dot := img[root*2048:]
	su := dot[34:dot[0]]
	if string(su[:7]) != "SP\x07\x01\xbe\xef\x00" {
		t.Fatalf("root . does not start with SP: %q", su[:7])
	}
	entries := suEntries(t, su)
	ce, ok := entries["CE"]
	if !ok {
		t.Fatal("no CE in root .")
	}
	blk, off, n := binary.LittleEndian.Uint32(ce[4:]), binary.LittleEndian.Uint32(ce[12:]), binary.LittleEndian.Uint32(ce[20:])
	check733(t, "CE block", ce[4:], blk)
	if off+n > 2048 {
		t.Fatalf("CE area crosses a sector: %d+%d", off, n)
	}
	er := img[blk*2048+off : blk*2048+off+n]
	wantER := "ER\xed\x01\x0a\x54\x87\x01" + "RRIP_1991A" +
		"THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS" +
		"PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE PUBLISHER IDENTIFIER IN PRIMARY VOLUME DESCRIPTOR FOR CONTACT INFORMATION."
	if string(er) != wantER || len(er) != 237 {
		t.Errorf("ER entry (%d bytes):\n%q\nwant\n%q", len(er), er, wantER)
	}
	px := entries["PX"]
	if len(px) != 36 {
		t.Fatalf("PX is %d bytes, want RRIP 1.10's 36", len(px))
	}
	check733(t, "root mode", px[4:], 0o40555)
	check733(t, "root nlink", px[12:], 3) // ".", "..", and sub's ".."
	check733(t, "uid", px[20:], 0)
	check733(t, "gid", px[28:], 0)
	tf := entries["TF"]
	d7 := string([]byte{124, 5, 6, 7, 8, 9, 0})
	if string(tf[:5]) != "TF\x1a\x01\x0e" || string(tf[5:]) != d7+d7+d7 {
		t.Errorf("TF %q", tf)
	}
	if rr := entries["RR"]; string(rr) != "RR\x05\x01\x81" {
		t.Errorf("RR %q", rr)
	}
	// The records after "." and "..": PX, TF and NM with the real name.
	names := map[string]string{}
	for p := int(dot[0]); p < 2048 && dot[p] != 0; p += int(dot[p]) {
		rec := dot[p : p+int(dot[p])]
		lenFI := int(rec[32])
		id := string(rec[33 : 33+lenFI])
		if id == "\x01" {
			continue
		}
		e := suEntries(t, rec[33+lenFI+(1-lenFI&1):])
		nm := e["NM"]
		if len(nm) < 5 || nm[4] != 0 {
			t.Fatalf("%q: NM %q", id, nm)
		}
		names[id] = string(nm[5:])
		mode := binary.LittleEndian.Uint32(e["PX"][4:])
		if rec[25]&2 != 0 && mode != 0o40555 || rec[25]&2 == 0 && mode != 0o100444 {
			t.Errorf("%q: mode %o", id, mode)
		}
		if rr := e["RR"]; string(rr) != "RR\x05\x01\x89" {
			t.Errorf("%q: RR %q", id, rr)
		}
	}
	want := map[string]string{"META_DAT.;1": "meta-data", "NETWORK_.;1": "network-config", "USER_DAT.;1": "user-data", "SUB": "sub"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("primary names -> NM: %v, want %v", names, want)
	}
}

func suEntries(t *testing.T, su []byte) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for len(su) >= 4 && su[2] >= 4 && int(su[2]) <= len(su) {
		m[string(su[:2])] = su[:su[2]]
		su = su[su[2]:]
	}
	if len(su) > 1 || len(su) == 1 && su[0] != 0 {
		t.Errorf("trailing System Use bytes %q", su)
	}
	return m
}

// TestDirectoryStructure walks both trees raw: records never cross a
// sector, directory lengths are whole sectors, records are sorted, nlink is
// 2 + subdirectories, and the path tables match the directories.
func TestDirectoryStructure(t *testing.T) {
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			img := fx.build(t)
			for _, sector := range []int{16, 17} {
				vd := img[sector*2048:]
				joliet := sector == 17
				dirs := map[uint32]string{} // extent -> path
				volSize := binary.LittleEndian.Uint32(vd[80:])
				var walk func(extent, length uint32, p string, parent uint32)
				walk = func(extent, length uint32, p string, parent uint32) {
					dirs[extent] = p
					if length%2048 != 0 || length == 0 {
						t.Errorf("%s: directory length %d", p, length)
					}
					var ids []string
					subdirs := 0
					var selfNlink uint32
					data := img[extent*2048 : extent*2048+length]
					for s := 0; s < len(data); s += 2048 {
						sec := data[s : s+2048]
						for q := 0; q < 2048 && sec[q] != 0; q += int(sec[q]) {
							l := int(sec[q])
							if q+l > 2048 || l%2 != 0 {
								t.Fatalf("%s: record of %d bytes at %d crosses the sector or is odd", p, l, q)
							}
							rec := sec[q : q+l]
							lenFI := int(rec[32])
							id := rec[33 : 33+lenFI]
							ext := binary.LittleEndian.Uint32(rec[2:])
							check733(t, "extent", rec[2:], ext)
							check733(t, "length", rec[10:], binary.LittleEndian.Uint32(rec[10:]))
							if !joliet {
								e := suEntries(t, rec[33+lenFI+(1-lenFI&1):])
								if px := e["PX"]; len(px) == 36 && lenFI == 1 && id[0] == 0 {
									selfNlink = binary.LittleEndian.Uint32(px[12:])
								}
							}
							if lenFI == 1 && id[0] <= 1 {
								if len(ids) != int(id[0]) || s != 0 {
									t.Errorf("%s: . and .. not first", p)
								}
								if id[0] == 1 && ext != parent {
									t.Errorf("%s: .. points at %d, parent is %d", p, ext, parent)
								}
								ids = append(ids, string(id))
								continue
							}
							name := string(id)
							if joliet {
								name = string(utf16.Decode(u16(id)))
							}
							ids = append(ids, name)
							// Every extent, even an empty file's, lies inside
							// the volume (libarchive checks the end).
							if size := binary.LittleEndian.Uint32(rec[10:]); ext >= volSize || ext+(size+2047)/2048 > volSize {
								t.Errorf("%s%s: extent %d+%d outside %d sectors", p, name, ext, size, volSize)
							}
							if rec[25]&2 != 0 {
								subdirs++
								walk(ext, binary.LittleEndian.Uint32(rec[10:]), p+name+"/", extent)
							}
						}
					}
					sorted := slices.IsSortedFunc(ids[2:], comparePrimary)
					if joliet {
						sorted = slices.IsSorted(ids[2:])
					}
					if !sorted {
						t.Errorf("%s: records not sorted: %q", p, ids)
					}
					if !joliet && selfNlink != uint32(2+subdirs) {
						t.Errorf("%s: nlink %d with %d subdirectories", p, selfNlink, subdirs)
					}
				}
				root := binary.LittleEndian.Uint32(vd[156+2:])
				walk(root, binary.LittleEndian.Uint32(vd[156+10:]), "/", root)

				// Both path tables list every directory exactly once, in
				// breadth-first order with correct parents.
				ptSize := binary.LittleEndian.Uint32(vd[132:])
				for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
					loc := binary.LittleEndian.Uint32(vd[140:])
					if order == binary.BigEndian {
						loc = binary.BigEndian.Uint32(vd[148:])
					}
					pt := img[loc*2048 : loc*2048+ptSize]
					var exts []uint32
					for len(pt) > 0 {
						n := int(pt[0])
						ext := order.Uint32(pt[2:])
						parent := order.Uint16(pt[6:])
						if int(parent) > len(exts)+1 || parent == 0 {
							t.Fatalf("path table parent %d before its entry", parent)
						}
						if _, ok := dirs[ext]; !ok {
							t.Errorf("path table extent %d is not a directory", ext)
						}
						exts = append(exts, ext)
						pt = pt[8+n+n&1:]
					}
					if len(exts) != len(dirs) {
						t.Errorf("path table has %d directories, tree %d", len(exts), len(dirs))
					}
				}
			}
		})
	}
}

func u16(b []byte) []uint16 {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.BigEndian.Uint16(b[2*i:])
	}
	return u
}

func check733(t *testing.T, what string, b []byte, v uint32) {
	t.Helper()
	if binary.LittleEndian.Uint32(b) != v || binary.BigEndian.Uint32(b[4:]) != v {
		t.Errorf("%s: % x, want %d both-endian", what, b[:8], v)
	}
}

func check723(t *testing.T, what string, b []byte, v uint16) {
	t.Helper()
	if binary.LittleEndian.Uint16(b) != v || binary.BigEndian.Uint16(b[2:]) != v {
		t.Errorf("%s: % x, want %d both-endian", what, b[:4], v)
	}
}

func TestPrimaryIDs(t *testing.T) {
	cases := []struct {
		name string
		dir  bool
		n    int
		want string
	}{
		{"user-data", false, 0, "USER_DAT.;1"},
		{"meta_data.json", false, 0, "META_DAT.JSO;1"},
		{"openstack", true, 0, "OPENSTAC"},
		{"a.b.c", false, 0, "A_B.C;1"},
		{".hidden", false, 0, "_HIDDEN.;1"},
		{"ünï", false, 0, "_N_.;1"},
		{"user-data", false, 1, "USER_DA1.;1"},
		{"x", true, 12, "X12"},
		{"dir.with.dots", true, 0, "DIR_WITH"},
	}
	for _, c := range cases {
		if got := primaryID(c.name, c.dir, c.n); got != c.want {
			t.Errorf("primaryID(%q, %v, %d) = %q, want %q", c.name, c.dir, c.n, got, c.want)
		}
	}
	// Names that mangle alike get unique identifiers, deterministically.
	files := []tfile{{name: "user-data"}, {name: "user_data"}, {name: "USER-DATA"}, {name: "user-dat"}, {name: "USER_DAT", dir: true}, {name: "user_da1"}}
	img := build(t, Options{Label: "x"}, files)
	root := binary.LittleEndian.Uint32(img[16*2048+156+2:])
	var ids []string
	for q, sec := 0, img[root*2048:(root+1)*2048]; sec[q] != 0; q += int(sec[q]) {
		ids = append(ids, string(sec[q+33:q+33+int(sec[q+32])]))
	}
	// Assigned in name order: "USER-DATA" keeps the natural "USER_DAT.;1",
	// the directory "USER_DAT" would clash with it (Linux map=normal shows
	// both as "user_dat") and becomes "USER_DA1", and so on.
	want := []string{"\x00", "\x01", "USER_DA1", "USER_DA2.;1", "USER_DA3.;1", "USER_DA4.;1", "USER_DA5.;1", "USER_DAT.;1"}
	if !slices.Equal(ids, want) {
		t.Errorf("identifiers %q, want %q", ids, want)
	}
}

func TestErrors(t *testing.T) {
	long := strings.Repeat("x", 65)
	cases := []struct {
		name  string
		add   func(w *Writer) error
		want  error
		named string
	}{
		{"empty", func(w *Writer) error { return w.AddFile("", 0, 0, strings.NewReader("")) }, ErrInvalidName, ""},
		{"dot", func(w *Writer) error { return w.AddFile("a/./b", 0, 0, strings.NewReader("")) }, ErrInvalidName, "a/./b"},
		{"dotdot", func(w *Writer) error { return w.AddDir("../etc") }, ErrInvalidName, "../etc"},
		{"empty component", func(w *Writer) error { return w.AddFile("a//b", 0, 0, strings.NewReader("")) }, ErrInvalidName, "a//b"},
		{"absolute", func(w *Writer) error { return w.AddFile("/etc/passwd", 0, 0, strings.NewReader("")) }, ErrInvalidName, "/etc/passwd"},
		{"trailing slash", func(w *Writer) error { return w.AddDir("a/") }, ErrInvalidName, "a/"},
		{"65 chars", func(w *Writer) error { return w.AddFile(long, 0, 0, strings.NewReader("")) }, ErrInvalidName, long},
		{"colon", func(w *Writer) error { return w.AddFile("a:b", 0, 0, strings.NewReader("")) }, ErrInvalidName, "a:b"},
		{"semicolon", func(w *Writer) error { return w.AddFile("a;1", 0, 0, strings.NewReader("")) }, ErrInvalidName, "a;1"},
		{"star", func(w *Writer) error { return w.AddFile("a*", 0, 0, strings.NewReader("")) }, ErrInvalidName, "a*"},
		{"question", func(w *Writer) error { return w.AddFile("a?", 0, 0, strings.NewReader("")) }, ErrInvalidName, "a?"},
		{"backslash", func(w *Writer) error { return w.AddFile(`a\b`, 0, 0, strings.NewReader("")) }, ErrInvalidName, `a\b`},
		{"control", func(w *Writer) error { return w.AddFile("a\nb", 0, 0, strings.NewReader("")) }, ErrInvalidName, "a\nb"},
		{"nul", func(w *Writer) error { return w.AddFile("a\x00", 0, 0, strings.NewReader("")) }, ErrInvalidName, "a\x00"},
		{"bad utf-8", func(w *Writer) error { return w.AddFile("a\xff", 0, 0, strings.NewReader("")) }, ErrInvalidName, "a\xff"},
		{"non-BMP", func(w *Writer) error { return w.AddFile("emoji-😀", 0, 0, strings.NewReader("")) }, ErrInvalidName, "emoji-😀"},
		{"duplicate file", func(w *Writer) error {
			w.AddFile("a", 0, 0, strings.NewReader(""))
			return w.AddFile("a", 0, 0, strings.NewReader(""))
		}, ErrDuplicate, "a"},
		{"duplicate dir", func(w *Writer) error { w.AddDir("d"); return w.AddDir("d") }, ErrDuplicate, "d"},
		{"file over dir", func(w *Writer) error {
			w.AddFile("d/x", 0, 0, strings.NewReader(""))
			return w.AddFile("d", 0, 0, strings.NewReader(""))
		}, ErrDuplicate, "d"},
		{"dir over file", func(w *Writer) error { w.AddFile("f", 0, 0, strings.NewReader("")); return w.AddDir("f") }, ErrDuplicate, "f"},
		{"file as parent", func(w *Writer) error {
			w.AddFile("f", 0, 0, strings.NewReader(""))
			return w.AddFile("f/x", 0, 0, strings.NewReader(""))
		}, ErrDuplicate, "f/x"},
		{"too deep dir", func(w *Writer) error { return w.AddDir("1/2/3/4/5/6/7/8") }, ErrTooDeep, "1/2/3/4/5/6/7/8"},
		{"too deep file", func(w *Writer) error { return w.AddFile("1/2/3/4/5/6/7/8/f", 0, 0, strings.NewReader("")) }, ErrTooDeep, "1/2/3/4/5/6/7/8/f"},
		{"4 GiB", func(w *Writer) error { return w.AddFile("big", 1<<32, 0, strings.NewReader("")) }, ErrTooLarge, "big"},
		{"negative size", func(w *Writer) error { return w.AddFile("neg", -1, 0, strings.NewReader("")) }, ErrTooLarge, "neg"},
		{"symlink mode", func(w *Writer) error { return w.AddFile("l", 0, fs.ModeSymlink|0o777, strings.NewReader("")) }, ErrUnsupportedType, "l"},
		{"nil reader", func(w *Writer) error { return w.AddFile("n", 0, 0, nil) }, ErrSizeMismatch, "n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewWriter(io.Discard, Options{Label: "x"})
			err := c.add(w)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Path != c.named || !strings.Contains(err.Error(), c.named) {
				t.Errorf("error %q does not name %q", err, c.named)
			}
			// A rejected entry leaves the Writer usable.
			if err := w.AddFile("ok", 2, 0, strings.NewReader("ok")); err != nil {
				t.Error(err)
			}
			if err := w.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	// Eight directory levels (the root is the first) and a file in the
	// last are fine.
	w := NewWriter(io.Discard, Options{Label: "x"})
	if err := w.AddFile("1/2/3/4/5/6/7/f", 0, 0, strings.NewReader("")); err != nil {
		t.Error(err)
	}
	if err := w.AddDir("1/2/3/4/5/6/7"); err != nil {
		t.Errorf("AddDir of an implied directory: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Error(err)
	}
}

func TestSizeMismatch(t *testing.T) {
	for _, c := range []struct {
		size int64
		data string
	}{{5, "1234"}, {3, "1234"}, {0, "x"}, {1, ""}} {
		w := NewWriter(io.Discard, Options{Label: "x"})
		w.AddFile("first", 1, 0, strings.NewReader("1"))
		if err := w.AddFile("dir/bad", c.size, 0, strings.NewReader(c.data)); err != nil {
			t.Fatal(err)
		}
		err := w.Close()
		if !errors.Is(err, ErrSizeMismatch) || !strings.Contains(err.Error(), "dir/bad") {
			t.Errorf("size %d, %d bytes: got %v", c.size, len(c.data), err)
		}
		if err := w.Close(); !errors.Is(err, ErrClosed) {
			t.Errorf("second Close: %v", err)
		}
	}
	// A failing reader is reported with the file's name.
	w := NewWriter(io.Discard, Options{Label: "x"})
	boom := errors.New("boom")
	w.AddFile("f", 10, 0, io.MultiReader(strings.NewReader("abc"), errReader{boom}))
	if err := w.Close(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "f") {
		t.Errorf("got %v", err)
	}
	// So is a failing destination.
	w = NewWriter(errWriter{boom}, Options{Label: "x"})
	if err := w.Close(); !errors.Is(err, boom) {
		t.Errorf("got %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }

func TestOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{Label: "seventeen-chars-x"},
		{Label: "cid ata"},
		{Label: "cidata.iso"},
		{Label: "cidata", Alignment: 1000},
		{Label: "cidata", Alignment: -2048},
		{Label: "cidata", ModTime: time.Date(1899, 12, 31, 0, 0, 0, 0, time.UTC)},
		{Label: "cidata", ModTime: time.Date(2156, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		w := NewWriter(io.Discard, o)
		if err := w.AddDir("x"); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: AddDir: %v", o, err)
		}
		if err := w.Close(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: Close: %v", o, err)
		}
	}
	w := NewWriter(io.Discard, Options{Label: "x"})
	w.Close()
	if err := w.AddDir("x"); !errors.Is(err, ErrClosed) {
		t.Errorf("AddDir after Close: %v", err)
	}
}

func TestAddFS(t *testing.T) {
	fsys := fstest.MapFS{
		"user-data":                       {Data: []byte("#cloud-config\n")},
		"meta-data":                       {Data: []byte("instance-id: x\n")},
		"openstack/latest/meta_data.json": {Data: []byte("{}"), Mode: 0o600},
		"bin/tool":                        {Data: []byte("#!/bin/sh\n"), Mode: 0o700},
		"emptydir":                        {Mode: fs.ModeDir | 0o700},
	}
	var a, b bytes.Buffer
	w := NewWriter(&a, Options{Label: "cidata", ModTime: testTime})
	if err := w.AddFS(fsys); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// The same tree added file by file gives the same bytes: the source's
	// modes and times are normalised away.
	w = NewWriter(&b, Options{Label: "cidata", ModTime: testTime})
	w.AddFile("user-data", 14, 0o644, strings.NewReader("#cloud-config\n"))
	w.AddFile("meta-data", 15, 0o644, strings.NewReader("instance-id: x\n"))
	w.AddFile("openstack/latest/meta_data.json", 2, 0o644, strings.NewReader("{}"))
	w.AddFile("bin/tool", 10, 0o755, strings.NewReader("#!/bin/sh\n"))
	w.AddDir("emptydir")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("AddFS and AddFile differ")
	}

	w = NewWriter(io.Discard, Options{Label: "x"})
	err := w.AddFS(fstest.MapFS{"link": {Data: []byte("target"), Mode: fs.ModeSymlink}})
	if !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), "link") {
		t.Errorf("symlink: %v", err)
	}

	// A file that changed size between AddFS and Close.
	grow := fstest.MapFS{"f": {Data: []byte("abc")}}
	w = NewWriter(io.Discard, Options{Label: "x"})
	if err := w.AddFS(grow); err != nil {
		t.Fatal(err)
	}
	grow["f"].Data = []byte("abcd")
	if err := w.Close(); !errors.Is(err, ErrSizeMismatch) || !strings.Contains(err.Error(), "f") {
		t.Errorf("grown file: %v", err)
	}
	// A file that disappeared.
	gone := fstest.MapFS{"g": {Data: []byte("abc")}}
	w = NewWriter(io.Discard, Options{Label: "x"})
	w.AddFS(gone)
	delete(gone, "g")
	if err := w.Close(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("vanished file: %v", err)
	}
}

// TestStreaming checks that nothing is written before Close, that Close
// writes sequentially, and that file data is not held in memory.
func TestStreaming(t *testing.T) {
	var cw countWriter
	w := NewWriter(&cw, Options{Label: "big"})
	const size = 64 << 20
	if err := w.AddFile("big.bin", size, 0, io.LimitReader(zeroReader{}, size)); err != nil {
		t.Fatal(err)
	}
	if cw.n != 0 {
		t.Fatal("wrote before Close")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if cw.n < size || cw.n%4096 != 0 {
		t.Errorf("wrote %d bytes", cw.n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("Close allocated %d bytes for a %d-byte file", alloc, size)
	}
	if cw.maxWrite > bufSize {
		t.Errorf("a single Write of %d bytes", cw.maxWrite)
	}
}

type countWriter struct{ n, maxWrite int }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	c.maxWrite = max(c.maxWrite, len(p))
	return len(p), nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestRejectedLeavesNoTrace: a rejected name must not leave the implied
// parents it named behind.
func TestRejectedLeavesNoTrace(t *testing.T) {
	var a, b bytes.Buffer
	w := NewWriter(&a, Options{Label: "x"})
	for _, err := range []error{
		w.AddFile("a/b/../c", 0, 0, strings.NewReader("")),
		w.AddDir("1/2/3/4/5/6/7/8"),
		w.AddFile("d/e/f?", 0, 0, strings.NewReader("")),
	} {
		if err == nil {
			t.Fatal("accepted a bad name")
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := NewWriter(&b, Options{Label: "x"}).Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("rejected names changed the image")
	}
}

// TestAddFSDisk adds a real directory: host modes collapse to 0444/0555,
// and a symlink is refused by name.
func TestAddFSDisk(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "openstack", "latest"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "openstack", "latest", "meta_data.json"), []byte(`{"uuid":"x"}`), 0o600))
	must(os.WriteFile(filepath.Join(dir, "hook.sh"), []byte("#!/bin/sh\n"), 0o750))
	var buf bytes.Buffer
	w := NewWriter(&buf, Options{Label: "config-2"})
	must(w.AddFS(os.DirFS(dir)))
	must(w.Close())
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	must(err)
	for name, mode := range map[string]fs.FileMode{
		"openstack":                       fs.ModeDir | 0o555,
		"openstack/latest/meta_data.json": 0o444,
		"hook.sh":                         0o555,
	} {
		info, err := fs.Stat(r, name)
		if err != nil || info.Mode() != mode {
			t.Errorf("%s: %v, %v; want %v", name, info, err, mode)
		}
	}

	must(os.Symlink("hook.sh", filepath.Join(dir, "link")))
	w = NewWriter(io.Discard, Options{Label: "config-2"})
	if err := w.AddFS(os.DirFS(dir)); !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), "link") {
		t.Errorf("symlink: %v", err)
	}
}
