package iso9660

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// TestReaderOnOtherWriters reads images made by genisoimage and xorrisofs,
// so the Reader is checked against writers other than ours: Rock Ridge
// names when present, else Joliet, else the primary names.
func TestReaderOnOtherWriters(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"user-data":                       "#cloud-config\n",
		"meta-data":                       "instance-id: x\n",
		"openstack/latest/meta_data.json": `{"uuid":"x"}`,
	}
	for name, data := range files {
		p := filepath.Join(src, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, tool string
		args       []string
		rr         string
		joliet     int
		names      []string
	}{
		{"genisoimage -J -R", "genisoimage", []string{"-quiet", "-V", "cidata", "-J", "-R"}, "RRIP_1991A", 3,
			[]string{"meta-data", "openstack/latest/meta_data.json", "user-data"}},
		{"genisoimage -J", "genisoimage", []string{"-quiet", "-V", "cidata", "-J"}, "", 3,
			[]string{"meta-data", "openstack/latest/meta_data.json", "user-data"}},
		{"genisoimage", "genisoimage", []string{"-quiet", "-V", "cidata"}, "", 0,
			[]string{"META_DAT", "OPENSTAC/LATEST/META_DAT.JSO", "USER_DAT"}},
		{"xorrisofs -J -R", "xorrisofs", []string{"-quiet", "-V", "cidata", "-J", "-R"}, "RRIP_1991A", 3,
			[]string{"meta-data", "openstack/latest/meta_data.json", "user-data"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tool := testtools.Require(t, c.tool)
			img := filepath.Join(t.TempDir(), "x.iso")
			args := append(append([]string{}, c.args...), "-o", img, src)
			if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			data, err := os.ReadFile(img)
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if r.Label != "cidata" || r.RockRidge != c.rr || r.JolietLevel != c.joliet {
				t.Errorf("label %q, RR %q, Joliet %d", r.Label, r.RockRidge, r.JolietLevel)
			}
			if err := fstest.TestFS(r, c.names...); err != nil {
				t.Fatal(err)
			}
			for i, n := range c.names {
				want := []string{"meta-data", "openstack/latest/meta_data.json", "user-data"}[i]
				if b, err := fs.ReadFile(r, n); err != nil || string(b) != files[want] {
					t.Errorf("%s: %q, %v", n, b, err)
				}
			}
		})
	}
}

func TestReaderRejects(t *testing.T) {
	good := build(t, Options{Label: "cidata"}, nocloudFiles())
	root := int(good[16*2048+156+2])
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	firstFile := func(b []byte) int { // offset of the first named record in the root
		dot := root * 2048
		return dot + int(b[dot]) + int(b[dot+int(b[dot])])
	}
	cases := map[string][]byte{
		"short":        good[:17*2048],
		"truncated":    good[:len(good)-2048], // the volume claims more than the image holds
		"no CD001":     mutate(func(b []byte) { b[16*2048+1] = 'X' }),
		"no PVD":       mutate(func(b []byte) { b[16*2048] = 3 }),
		"block size":   mutate(func(b []byte) { b[16*2048+129] = 2 }),
		"root outside": mutate(func(b []byte) { b[16*2048+156+5] = 0x7f }),
		"root no dots": mutate(func(b []byte) { b[root*2048+int(b[root*2048])+33] = 5 }),
		"loop": mutate(func(b []byte) {
			p := firstFile(b)
			b[p+25] |= 2
			copy(b[p+2:p+18], b[root*2048+2:root*2048+18])
		}),
		"file outside": mutate(func(b []byte) { b[firstFile(b)+13] = 0x7f }),
		"record overruns sector": mutate(func(b []byte) {
			b[firstFile(b)] = 250
		}),
		"name with slash": mutate(func(b []byte) {
			p := firstFile(b)
			i := bytes.Index(b[p:p+int(b[p])], []byte("meta-data"))
			b[p+i+4] = '/'
		}),
		"multi-extent": mutate(func(b []byte) { b[firstFile(b)+25] |= 0x80 }),
		"bad CE": mutate(func(b []byte) {
			i := bytes.Index(b[root*2048:], []byte("CE\x1c\x01"))
			b[root*2048+i+4+8] = 0xff // offset 255+ ...
			b[root*2048+i+4+9] = 0x07 // ... 2047, and 237 bytes do not fit
		}),
	}
	for name, img := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := NewReader(bytes.NewReader(img), int64(len(img))); !errors.Is(err, ErrFormat) {
				t.Errorf("got %v, want ErrFormat", err)
			}
		})
	}
}

// TestSparseImage: FuzzReader's seeds decode to the images they encode.
func TestSparseImage(t *testing.T) {
	for _, fx := range fixtures()[:3] {
		img := fx.build(t)
		if !bytes.Equal(unsparseImage(sparseImage(img)), img) {
			t.Errorf("%s: sparse round trip differs", fx.name)
		}
	}
}

// TestReaderClaimedSize: a size larger than the data must cost nothing in
// proportion to the claim.
func TestReaderClaimedSize(t *testing.T) {
	img := build(t, Options{Label: "cidata"}, nocloudFiles())
	r, err := NewReader(bytes.NewReader(img), 1<<60)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := fs.ReadFile(r, "user-data"); err != nil || string(b) != nocloudFiles()[0].data {
		t.Errorf("user-data: %q, %v", b, err)
	}
	// A directory whose extent lies past the real data fails on reading.
	bad := bytes.Clone(img)
	root := int(bad[16*2048+156+2])
	p := root*2048 + int(bad[root*2048]) + int(bad[root*2048+int(bad[root*2048])])
	bad[p+25] |= 2
	bad[p+5] = 0x40 // extent 2^30
	bad[p+13] = 0x40
	if _, err := NewReader(bytes.NewReader(bad), 1<<60); err == nil {
		t.Error("no error for a directory past the data")
	}
}
