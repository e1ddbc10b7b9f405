//go:build unix

package dirstore

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/mdserver/registry"
)

// noRacyWindow lets tests cache files they have just written. The racy
// rule itself is tested with the real window in TestCacheSkipsRacyFiles.
func noRacyWindow(t *testing.T) {
	old := racyWindow
	racyWindow = 0
	t.Cleanup(func() { racyWindow = old })
}

// records returns the served records by name, to compare two loads.
func records(s *Store) map[string]*registry.Record {
	out := map[string]*registry.Record{}
	snap := s.Snapshot()
	for _, n := range snap.Names() {
		r, _ := snap.ByName(n)
		out[n] = r
	}
	return out
}

// closeNow closes a store opened with open (whose cleanup closes it
// again: Close is idempotent).
func closeNow(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCacheRestart(t *testing.T) {
	noRacyWindow(t)
	dir, cdir := t.TempDir(), t.TempDir()
	cache := filepath.Join(cdir, "instances.cache")
	writeMany(t, dir, 50)
	// One instance whose content comes from another file is never cached:
	// the stamp of the spec does not cover it.
	write(t, dir, "src.yaml", doc("src", "10.9.0.1", "src-host"))
	// One whose metaData does not survive JSON unchanged (an integer
	// comes back as a float64) is left out by the round-trip check.
	write(t, dir, "meta.yaml", `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: meta}
spec:
  cloudInit: {metaData: {rack: 7}}
  metadataServer: {addresses: [10.9.0.2]}
`)

	cold, _ := open(t, dir, Options{NoWatch: true, CacheFile: cache})
	want := records(cold)
	if len(want) != 52 {
		t.Fatalf("cold load: %d instances", len(want))
	}
	closeNow(t, cold)
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v %v", fi, err)
	}

	os.WriteFile(filepath.Join(dir, "motd.txt"), []byte("changed source\n"), 0o644)
	warm, logs := open(t, dir, Options{NoWatch: true, CacheFile: cache})
	if got := warm.cacheHits.Load(); got != 50 {
		t.Errorf("%d instances came from the cache; want the 50 plain ones\n%s", got, logs)
	}
	got := records(warm)
	if len(got) != len(want) {
		t.Fatalf("warm load: %d instances, want %d", len(got), len(want))
	}
	for name, w := range want {
		g := got[name]
		if name == "src" {
			if string(g.Instance().Spec.Files[0].Data()) != "changed source\n" || g.Revision == w.Revision {
				t.Errorf("src: the changed source file was not re-read")
			}
			continue
		}
		if g.Revision != w.Revision || !reflect.DeepEqual(g.Instance(), w.Instance()) || !reflect.DeepEqual(g.Addresses, w.Addresses) {
			t.Errorf("%s: the cached record differs from the parsed one", name)
		}
	}
	closeNow(t, warm)

	// A file edited while the server was down is parsed, not taken from
	// the cache: same size, different content.
	p := filepath.Join(dir, "vm-000007.yaml")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), "welcome to", "welcome at", 1)), 0o600)
	os.Remove(filepath.Join(dir, "vm-000008.yaml"))
	again, _ := open(t, dir, Options{NoWatch: true, CacheFile: cache})
	if got := again.cacheHits.Load(); got != 48 {
		t.Errorf("%d from the cache, want 48", got)
	}
	r, ok := again.Snapshot().ByName("vm-000007")
	if !ok || !strings.Contains(string(r.Instance().Spec.Files[0].Data()), "welcome at") {
		t.Errorf("the edited file was served from the cache")
	}
	if _, ok := again.Snapshot().ByName("vm-000008"); ok {
		t.Errorf("a deleted file was served from the cache")
	}
}

func TestCacheUnusable(t *testing.T) {
	noRacyWindow(t)
	dir, cdir := t.TempDir(), t.TempDir()
	cache := filepath.Join(cdir, "instances.cache")
	writeMany(t, dir, 5)
	s, _ := open(t, dir, Options{NoWatch: true, CacheFile: cache})
	closeNow(t, s)
	good, _ := os.ReadFile(cache)

	for _, tc := range []struct {
		name string
		data []byte
		dir  string
		log  string
	}{
		{"corrupt", flip(good, len(good)/2), dir, "checksum mismatch"},
		{"truncated", good[:len(good)-9], dir, "checksum mismatch"},
		{"not a cache", []byte("hello"), dir, "not a cache file"},
		{"another directory", good, "", "written for directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(cache, tc.data, 0o600)
			d := tc.dir
			if d == "" {
				d = t.TempDir()
				writeMany(t, d, 5)
			}
			s, logs := open(t, d, Options{NoWatch: true, CacheFile: cache})
			if s.Snapshot().Len() != 5 || s.cacheHits.Load() != 0 {
				t.Errorf("%d instances, %d from the cache", s.Snapshot().Len(), s.cacheHits.Load())
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log does not say %q:\n%s", tc.log, logs)
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

func TestCacheSkipsRacyFiles(t *testing.T) {
	dir, cdir := t.TempDir(), t.TempDir()
	cache := filepath.Join(cdir, "instances.cache")
	writeMany(t, dir, 3)
	// Just written: a change in the same timestamp tick could go unseen,
	// so none of them may be cached yet.
	s, _ := open(t, dir, Options{NoWatch: true, CacheFile: cache})
	closeNow(t, s)
	s2, _ := open(t, dir, Options{NoWatch: true, CacheFile: cache})
	if s2.cacheHits.Load() != 0 || s2.Snapshot().Len() != 3 {
		t.Errorf("%d racy files came from the cache", s2.cacheHits.Load())
	}
}

func TestCacheAfterChanges(t *testing.T) {
	noRacyWindow(t)
	dir, cdir := t.TempDir(), t.TempDir()
	cache := filepath.Join(cdir, "instances.cache")
	writeMany(t, dir, 3)
	s, _ := open(t, dir, Options{CacheFile: cache, CacheInterval: 10 * time.Millisecond})
	write(t, dir, "new.yaml", strings.ReplaceAll(strings.ReplaceAll(readFile(t, dir, "vm-000000.yaml"), "vm-000000", "new"), "10.0.0.0", "10.9.9.9"))
	eventually(t, "the new file is served", func() bool { _, ok := s.Snapshot().ByName("new"); return ok })
	eventually(t, "the cache holds it", func() bool {
		c, err := readCache(cache, s.Dir(), false)
		_, ok := c["new.yaml"]
		return err == nil && ok
	})
}

func readFile(t *testing.T, dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCacheNotRewrittenWhenCurrent(t *testing.T) {
	noRacyWindow(t)
	dir, cache := t.TempDir(), filepath.Join(t.TempDir(), "instances.cache")
	writeMany(t, dir, 5)
	s, _ := open(t, dir, Options{NoWatch: true, CacheFile: cache})
	closeNow(t, s)
	before, _ := os.Stat(cache)
	s, _ = open(t, dir, Options{NoWatch: true, CacheFile: cache})
	if s.cacheHits.Load() != 5 {
		t.Fatalf("%d from the cache", s.cacheHits.Load())
	}
	closeNow(t, s)
	after, _ := os.Stat(cache)
	if !os.SameFile(before, after) {
		t.Errorf("a cache that matched the directory was rewritten")
	}
}

func TestCacheInSpecDirRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, Options{NoWatch: true, CacheFile: filepath.Join(dir, "x.cache")}); err == nil || !strings.Contains(err.Error(), "outside the spec directory") {
		t.Errorf("err = %v", err)
	}
}

// TestRefusedCacheLeavesNoDescriptor: an Open refused for its cache file
// closes the directory it opened (Linux: counted in /proc/self/fd).
func TestRefusedCacheLeavesNoDescriptor(t *testing.T) {
	dir := t.TempDir()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(ents)
	}
	refuse := func() {
		if _, err := Open(dir, Options{NoWatch: true, CacheFile: filepath.Join(dir, "x.cache")}); err == nil {
			t.Fatal("a cache file in the spec directory was accepted")
		}
	}
	refuse() // the runtime's own descriptors, opened once
	before := fds()
	for range 10 {
		refuse()
	}
	if after := fds(); after != before {
		t.Errorf("10 refused Opens left %d descriptors open", after-before)
	}
}

// FuzzCache feeds the cache reader well-framed files (magic, this
// build's key, the directory, the flags, a valid checksum) around arbitrary entries:
// it must refuse or read them without panicking, and every entry it reads
// must rebuild or fail cleanly.
func FuzzCache(f *testing.F) {
	key, err := programKey()
	if err != nil {
		f.Skip(err)
	}
	dir := "/srv/specs"
	frame := func(body []byte) []byte {
		var b []byte
		b = append(b, cacheMagic...)
		b = binary.LittleEndian.AppendUint64(b, uint64(len(key)))
		b = append(b, key[:]...)
		b = binary.LittleEndian.AppendUint64(b, uint64(len(dir)))
		b = append(b, dir...)
		b = binary.LittleEndian.AppendUint64(b, flagChecked)
		b = append(b, body...)
		return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli()))
	}
	entry := func(name, rev, inst string) []byte {
		var b []byte
		b = binary.LittleEndian.AppendUint64(b, uint64(len(name)))
		b = append(b, name...)
		for range 5 {
			b = binary.LittleEndian.AppendUint64(b, 7)
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(len(rev)))
		b = append(b, rev...)
		b = binary.LittleEndian.AppendUint64(b, uint64(len(inst)))
		return append(b, inst...)
	}
	f.Add(entry("a.yaml", "r1", `{"apiVersion":"vminit.dev/v1alpha1","kind":"Instance","metadata":{"name":"a"},"spec":{"files":[{"path":"/x","mode":"0644","content":""}],"commands":[[],"ls"]}}`))
	f.Add(entry("b.yaml", "r2", `{"spec":{"metadataServer":{"addresses":["not an address"]}}}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		path := filepath.Join(t.TempDir(), "c")
		if err := os.WriteFile(path, frame(body), 0o600); err != nil {
			t.Fatal(err)
		}
		entries, err := readCache(path, dir, false)
		if err != nil {
			return
		}
		for _, c := range entries {
			fromCache(c)
		}
	})
}
