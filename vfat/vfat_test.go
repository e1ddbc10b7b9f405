package vfat

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// checkTree verifies that im holds exactly the files and directories of
// tree (plus their parents), with the same contents.
func checkTree(t testing.TB, im *Reader, tree []entry) {
	t.Helper()
	want := map[string][]byte{}
	wantDir := map[string]bool{}
	for _, e := range tree {
		if e.isDir {
			wantDir[e.name] = true
		} else {
			want[e.name] = e.content
		}
		for d := parentOf(e.name); d != "."; d = parentOf(d) {
			wantDir[d] = true
		}
	}
	gotFiles, gotDirs := 0, 0
	err := fs.WalkDir(im, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if d.IsDir() {
			gotDirs++
			if !wantDir[p] {
				t.Errorf("unexpected directory %q", p)
			}
			return nil
		}
		gotFiles++
		w, ok := want[p]
		if !ok {
			t.Errorf("unexpected file %q", p)
			return nil
		}
		got, err := fs.ReadFile(im, p)
		if err != nil {
			t.Errorf("read %s: %v", p, err)
		} else if !bytes.Equal(got, w) {
			t.Errorf("%s: content differs (%d bytes, want %d)", p, len(got), len(w))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if gotFiles != len(want) || gotDirs != len(wantDir) {
		t.Errorf("read %d files and %d dirs, want %d and %d", gotFiles, gotDirs, len(want), len(wantDir))
	}
}

func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "."
	}
	return p[:i]
}

func TestRoundTrip(t *testing.T) {
	for _, c := range oracleCases() {
		t.Run(c.name, func(t *testing.T) {
			b := buildImage(t, c.opts, c.tree)
			im, err := NewReader(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			if im.Label != c.opts.Label {
				t.Errorf("Label %q, want %q", im.Label, c.opts.Label)
			}
			wantBoot := c.opts.Label
			if wantBoot == "" {
				wantBoot = "NO NAME"
			}
			if im.BootLabel != wantBoot {
				t.Errorf("BootLabel %q, want %q", im.BootLabel, wantBoot)
			}
			if (im.Type == "FAT16") != c.fat16 {
				t.Errorf("Type %s", im.Type)
			}
			checkTree(t, im, c.tree)
			if err := fstest.TestFS(im, "user-data"); c.name == "nocloud" && err != nil {
				t.Error(err)
			}
		})
	}
}

func TestModTime(t *testing.T) {
	for _, tc := range []struct {
		in, want time.Time
	}{
		{time.Time{}, time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2024, 5, 6, 7, 8, 11, 999, time.UTC), time.Date(2024, 5, 6, 7, 8, 10, 0, time.UTC)},
		// The wall clock in the time's own zone is stored.
		{time.Date(2024, 5, 6, 23, 30, 0, 0, time.FixedZone("X", 5*3600)), time.Date(2024, 5, 6, 23, 30, 0, 0, time.UTC)},
		{time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2107, 12, 31, 23, 59, 58, 0, time.UTC)},
	} {
		b := buildImage(t, Options{Label: "cidata", ModTime: tc.in}, noCloudTree())
		im, err := NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		st, err := im.Stat("user-data")
		if err != nil {
			t.Fatal(err)
		}
		if !st.ModTime().Equal(tc.want) {
			t.Errorf("ModTime(%v) read back as %v, want %v", tc.in, st.ModTime(), tc.want)
		}
	}
}

func TestReproducible(t *testing.T) {
	tree := mixedTree()
	opts := Options{Label: "cidata", ModTime: time.Date(2024, 1, 2, 3, 4, 6, 0, time.UTC)}
	a := buildImage(t, opts, tree)
	rev := make([]entry, len(tree))
	for i, e := range tree {
		rev[len(tree)-1-i] = e
	}
	b := buildImage(t, opts, rev)
	if !bytes.Equal(a, b) {
		t.Fatal("reversed add order gives different bytes")
	}
	// Adding the directories explicitly first changes nothing either.
	withDirs := append([]entry{{name: "a/b/c", isDir: true}, {name: "many", isDir: true}}, tree...)
	if c := buildImage(t, opts, withDirs); !bytes.Equal(a, c) {
		t.Fatal("explicit AddDir gives different bytes")
	}
	opts.ModTime = opts.ModTime.Add(2 * time.Second)
	if d := buildImage(t, opts, tree); bytes.Equal(a, d) {
		t.Fatal("ModTime does not reach the image")
	}
}

func TestSerial(t *testing.T) {
	b := buildImage(t, Options{Label: "cidata", Serial: 0x1234ABCD}, noCloudTree())
	im, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if im.Serial != 0x1234ABCD {
		t.Errorf("Serial %#x", im.Serial)
	}
	b1 := buildImage(t, Options{Label: "cidata"}, noCloudTree())
	b2 := buildImage(t, Options{Label: "config-2"}, noCloudTree())
	i1, _ := NewReader(bytes.NewReader(b1), int64(len(b1)))
	i2, _ := NewReader(bytes.NewReader(b2), int64(len(b2)))
	if i1.Serial == 0 || i1.Serial == i2.Serial {
		t.Errorf("derived serials %#x and %#x", i1.Serial, i2.Serial)
	}
}

func TestSizes(t *testing.T) {
	// Default: 128 KiB for a small seed.
	if b := buildImage(t, Options{Label: "cidata"}, noCloudTree()); len(b) != MinSize {
		t.Errorf("default size %d, want %d", len(b), MinSize)
	}
	// Auto size grows with content and stays 4 KiB aligned.
	b := buildImage(t, Options{Label: "cidata"}, mixedTree())
	if len(b)%Align != 0 || len(b) < 1<<20 {
		t.Errorf("auto size %d", len(b))
	}
	// Explicit sizes are honoured, across the FAT12/FAT16 boundary.
	for _, size := range []int64{MinSize, 1 << 20, 2 << 20, 2<<20 + 4096, 8 << 20, 16 << 20, 16<<20 + 4096, 33 << 20, 70 << 20} {
		b := buildImage(t, Options{Label: "cidata", Size: size}, noCloudTree())
		if int64(len(b)) != size {
			t.Errorf("Size %d gave %d bytes", size, len(b))
		}
		im, err := NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("Size %d: %v", size, err)
		}
		checkTree(t, im, noCloudTree())
	}
	// Too small: a clear error that names the file and the size needed.
	w := NewWriter(io.Discard, Options{Size: MinSize})
	if err := w.AddFile("big.bin", 1<<20, 0o644, bytes.NewReader(make([]byte, 1<<20))); err != nil {
		t.Fatal(err)
	}
	err := w.Close()
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "big.bin") || !strings.Contains(err.Error(), "needs Size 1") {
		t.Errorf("too small: %v", err)
	}
	// Sizes that are not 4 KiB multiples, negative or too large.
	for _, size := range []int64{-4096, 4095, MinSize + 512, MaxSize + Align} {
		w := NewWriter(io.Discard, Options{Size: size})
		if err := w.Close(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Size %d: %v", size, err)
		}
	}
}

func TestMaxSize(t *testing.T) {
	if got := maxImageSectors() * sectorSize; got != MaxSize {
		t.Fatalf("MaxSize is %d, the layout rules give %d", MaxSize, got)
	}
	if _, ok := chooseGeometry(MaxSize/sectorSize+alignSectors, minRootEntries, nil); ok {
		t.Fatal("a volume above MaxSize still has a geometry")
	}
	b := buildImage(t, Options{Size: 20480}, []entry{{name: "user-data", content: []byte("x")}})
	if len(b) != 20480 {
		t.Fatalf("smallest volume: %d bytes", len(b))
	}
	w := NewWriter(io.Discard, Options{Size: 16384})
	if err := w.AddFile("user-data", 1, 0o644, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "needs Size 20480") {
		t.Errorf("16 KiB: %v", err)
	}
}

func TestGeometryInvariants(t *testing.T) {
	for total := int64(40); total*sectorSize <= MaxSize; total += alignSectors * 13 {
		g, ok := chooseGeometry(total, minRootEntries, nil)
		if !ok {
			if total >= 64 {
				t.Fatalf("no geometry for %d sectors", total)
			}
			continue
		}
		if g.fat16 != (g.clusters > maxFAT12Clusters) || g.clusters < 1 ||
			(g.clusters > writerMaxFAT12 && g.clusters < writerMinFAT16) || g.clusters > writerMaxFAT16 {
			t.Fatalf("%d sectors: %+v", total, g)
		}
		if fatBytes(g.clusters+2, g.fat16) > g.fatSectors*sectorSize {
			t.Fatalf("%d sectors: FAT too small: %+v", total, g)
		}
		if g.dataStart()+g.clusters*g.spc > total {
			t.Fatalf("%d sectors: clusters overrun: %+v", total, g)
		}
		// The FAT is as small as possible: one sector less would leave
		// room for more clusters than it can map.
		if fs := g.fatSectors - 1; fs > 0 {
			c := (total - reservedSectors - g.rootSectors() - numFATs*fs) / g.spc
			if fatBytes(c+2, g.fat16) <= fs*sectorSize {
				t.Fatalf("%d sectors: FAT could be smaller: %+v", total, g)
			}
		}
	}
}

func TestShortNames(t *testing.T) {
	tree := []entry{
		{name: "user-data"}, {name: "USER-D~1"}, {name: "user-data2"}, {name: "meta"},
		{name: "META.TXT"}, {name: "a+b"}, {name: "a,b"}, {name: "a;b"},
		{name: ".bashrc"}, {name: "x.tar.gz"}, {name: "名前"},
	}
	for i := range tree {
		tree[i].content = []byte(tree[i].name)
	}
	b := buildImage(t, Options{}, tree)
	p, err := func() (*plan, error) {
		w := NewWriter(io.Discard, Options{})
		for _, e := range tree {
			if err := w.AddFile(e.name, int64(len(e.content)), 0o644, bytes.NewReader(e.content)); err != nil {
				return nil, err
			}
		}
		return w.plan()
	}()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[11]byte]string{}
	got := map[string]string{}
	for _, c := range p.root.sorted {
		if prev, dup := seen[c.short]; dup {
			t.Errorf("%q and %q share short name %q", prev, c.name, c.short)
		}
		seen[c.short] = c.name
		got[c.name] = strings.TrimRight(string(c.short[:8]), " ") + "." + strings.TrimRight(string(c.short[8:]), " ")
		if (c.long == nil) != (c.name == "USER-D~1" || c.name == "META.TXT") {
			t.Errorf("%q: LFN %v", c.name, c.long != nil)
		}
	}
	for name, want := range map[string]string{"USER-D~1": "USER-D~1.", "user-data": "USER-D~2.", "meta": "META.", "META.TXT": "META.TXT", "x.tar.gz": "XTAR~1.GZ", ".bashrc": "BASHRC~1."} {
		if got[name] != want {
			t.Errorf("short name of %q = %q, want %q", name, got[name], want)
		}
	}
	im, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	checkTree(t, im, tree)
}

func TestNameErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"", ErrInvalidName}, {".", ErrInvalidName}, {"/abs", ErrInvalidName}, {"a//b", ErrInvalidName},
		{"a/../b", ErrInvalidName}, {"trailing/", ErrInvalidName}, {"a:b", ErrInvalidName},
		{`a\b`, ErrInvalidName}, {"a*", ErrInvalidName}, {"q?", ErrInvalidName}, {"tab\t", ErrInvalidName},
		{"dot.", ErrInvalidName}, {"space ", ErrInvalidName}, {"bad\xffutf8", ErrInvalidName},
		{strings.Repeat("a", 256), ErrInvalidName}, {strings.Repeat("😀", 128), ErrInvalidName},
	} {
		w := NewWriter(io.Discard, Options{})
		err := w.AddFile(tc.name, 0, 0o644, nil)
		if !errors.Is(err, tc.err) {
			t.Errorf("AddFile(%q): %v, want %v", tc.name, err, tc.err)
			continue
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || (pe.Path != tc.name && tc.name != "") {
			t.Errorf("AddFile(%q): error does not name the file: %v", tc.name, err)
		}
	}
	w := NewWriter(io.Discard, Options{})
	for _, ok := range []string{strings.Repeat("a", 255), strings.Repeat("😀", 127), "a b.c d", "+,;=[]"} {
		if err := w.AddFile(ok, 0, 0o644, nil); err != nil {
			t.Errorf("AddFile(%q): %v", ok, err)
		}
	}
}

func TestDuplicates(t *testing.T) {
	w := NewWriter(io.Discard, Options{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.AddFile("dir/user-data", 0, 0o644, nil))
	must(w.AddDir("dir"))
	must(w.AddDir("dir"))
	for _, tc := range []struct {
		op   func() error
		path string
	}{
		{func() error { return w.AddFile("dir/user-data", 0, 0o644, nil) }, "dir/user-data"},
		{func() error { return w.AddFile("dir/USER-DATA", 0, 0o644, nil) }, "dir/USER-DATA"},
		{func() error { return w.AddDir("dir/user-data") }, "dir/user-data"},
		{func() error { return w.AddFile("dir/user-data/x", 0, 0o644, nil) }, "dir/user-data"},
		{func() error { return w.AddFile("DIR", 0, 0o644, nil) }, "DIR"},
		{func() error { return w.AddDir("Dir/sub") }, "Dir"},
	} {
		err := tc.op()
		if !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("want duplicate naming %q, got %v", tc.path, err)
		}
	}
	must(w.Close())
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if err := w.AddDir("x"); !errors.Is(err, ErrClosed) {
		t.Errorf("AddDir after Close: %v", err)
	}
}

func TestLabelErrors(t *testing.T) {
	for _, l := range []string{"twelve-bytes", " lead", "a.b", "a/b", "é"} {
		w := NewWriter(io.Discard, Options{Label: l})
		if err := w.AddFile("x", 0, 0o644, nil); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("label %q: %v", l, err)
		}
		if err := w.Close(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("label %q: Close %v", l, err)
		}
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestContentLength(t *testing.T) {
	for _, tc := range []struct {
		r    io.Reader
		size int64
		want error
	}{
		{strings.NewReader("short"), 10, ErrSizeMismatch},
		{strings.NewReader("longer than declared"), 5, ErrSizeMismatch},
		{zeroReader{}, 0, io.ErrNoProgress},
	} {
		w := NewWriter(io.Discard, Options{})
		if err := w.AddFile("f/user-data", tc.size, 0o644, tc.r); err != nil {
			t.Fatal(err)
		}
		err := w.Close()
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "f/user-data") {
			t.Errorf("got %v, want %v naming the file", err, tc.want)
		}
	}
	w := NewWriter(io.Discard, Options{})
	if err := w.AddFile("e", 3, 0o644, errReader{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("reader error: %v", err)
	}
	if err := NewWriter(io.Discard, Options{}).AddFile("n", 3, 0o644, nil); !errors.Is(err, ErrSizeMismatch) {
		t.Errorf("nil reader: %v", err)
	}
	if err := NewWriter(io.Discard, Options{}).AddFile("n", -1, 0o644, strings.NewReader("")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("negative size: %v", err)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(b []byte) (int, error) {
	if f.n -= len(b); f.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(b), nil
}

func TestWriteError(t *testing.T) {
	for _, limit := range []int{0, 600, 70000} {
		w := NewWriter(&failWriter{n: limit}, Options{})
		if err := w.AddFile("user-data", 5, 0o644, strings.NewReader("hello")); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
}

func TestAddFS(t *testing.T) {
	fsys := fstest.MapFS{
		"user-data":                       {Data: []byte("#cloud-config\n")},
		"meta-data":                       {Data: []byte("instance-id: x\n")},
		"openstack/latest/meta_data.json": {Data: []byte("{}")},
		"emptydir":                        {Mode: fs.ModeDir},
	}
	var a bytes.Buffer
	w := NewWriter(&a, Options{Label: "cidata"})
	if err := w.AddFS(fsys); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := []entry{
		{name: "user-data", content: []byte("#cloud-config\n")},
		{name: "meta-data", content: []byte("instance-id: x\n")},
		{name: "openstack/latest/meta_data.json", content: []byte("{}")},
		{name: "emptydir", isDir: true},
	}
	if b := buildImage(t, Options{Label: "cidata"}, want); !bytes.Equal(a.Bytes(), b) {
		t.Error("AddFS and AddFile/AddDir give different bytes")
	}
	w = NewWriter(io.Discard, Options{})
	err := w.AddFS(fstest.MapFS{"link": {Mode: fs.ModeSymlink, Data: []byte("x")}})
	if !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), "link") {
		t.Errorf("symlink: %v", err)
	}
}

func TestTooManyEntries(t *testing.T) {
	w := NewWriter(io.Discard, Options{})
	// 22,000 names × 3 entries each > 65,536.
	for i := range 22000 {
		if err := w.AddFile("d/long-file-name-"+itoa(i), 0, 0o644, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), " d:") {
		t.Errorf("got %v", err)
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}

// TestAddFileMode: AddFile takes a mode as iso9660's twin does. FAT keeps
// no permission bits, so they do not change a byte; type bits are refused.
func TestAddFileMode(t *testing.T) {
	image := func(mode fs.FileMode) []byte {
		var b bytes.Buffer
		w := NewWriter(&b, Options{Label: "cidata"})
		if err := w.AddFile("tool", 3, mode, strings.NewReader("#!\n")); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if !bytes.Equal(image(0o644), image(0o755)) {
		t.Error("the mode's permission bits changed the image")
	}
	w := NewWriter(io.Discard, Options{})
	for _, mode := range []fs.FileMode{fs.ModeDir | 0o755, fs.ModeSymlink | 0o777, fs.ModeDevice} {
		if err := w.AddFile("x", 0, mode, nil); !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), "x") {
			t.Errorf("mode %v: %v", mode, err)
		}
	}
}
