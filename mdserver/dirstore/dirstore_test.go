//go:build unix

package dirstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/bench/mdbench"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

func doc(name, addr, hostname string) string {
	return fmt.Sprintf(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: %s
spec:
  hostname: %s
  files:
    - path: /etc/motd
      source:
        file: motd.txt
  metadataServer:
    addresses: [%s]
`, name, hostname, addr)
}

type syncBuf = testtools.SyncBuffer

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	// Write to a temporary name and rename, as editors and the store do,
	// so the watcher never sees half a file.
	tmp := filepath.Join(dir, ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, dir string, opts Options) (*Store, *syncBuf) {
	t.Helper()
	logs := &syncBuf{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.Debounce == 0 {
		opts.Debounce = 50 * time.Millisecond
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hostname(s *Store, name string) string {
	r, ok := s.Snapshot().ByName(name)
	if !ok {
		return ""
	}
	return r.Instance().Spec.Hostname
}

func owner(s *Store, addr string) string {
	r, ok := s.Snapshot().ByAddr(netip.MustParseAddr(addr))
	if !ok {
		return ""
	}
	return r.Name
}

func TestWatch(t *testing.T) {
	for _, mode := range []string{"inotify", "poll"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "motd.txt"), []byte("hello\n"), 0o644)
			write(t, dir, "a.yaml", doc("a", "10.0.0.1", "one"))
			write(t, dir, "b.yml", doc("b", "10.0.0.2", "bee"))
			write(t, dir, "ignored.txt", "not a spec")
			opts := Options{}
			if mode == "poll" {
				opts.PollInterval = 20 * time.Millisecond
			}
			s, logs := open(t, dir, opts)
			if s.Watching() != mode {
				t.Fatalf("watching with %q, want %q", s.Watching(), mode)
			}

			// Initial load, source.file resolved relative to the spec.
			snap := s.Snapshot()
			if snap.Len() != 2 || owner(s, "10.0.0.1") != "a" || owner(s, "::ffff:10.0.0.2") != "b" {
				t.Fatalf("initial load: %v", snap.Names())
			}
			r, _ := snap.ByName("a")
			if got := string(r.Instance().Spec.Files[0].Data()); got != "hello\n" {
				t.Errorf("source.file content = %q", got)
			}

			// A change is picked up.
			write(t, dir, "a.yaml", doc("a", "10.0.0.1", "two"))
			eventually(t, "the edit", func() bool { return hostname(s, "a") == "two" })

			// An invalid edit is logged, naming the file and each problem; the
			// last good version keeps being served.
			write(t, dir, "a.yaml", strings.Replace(doc("a", "10.0.0.1", "Bad_Host"), "kind: Instance", "kind: Instanse\nbogus: 1", 1))
			eventually(t, "the invalid edit to be logged", func() bool { return strings.Contains(logs.String(), "invalid spec file") })
			l := logs.String()
			for _, want := range []string{"file=a.yaml", "bogus", "spec.hostname", "kind", "last good version"} {
				if !strings.Contains(l, want) {
					t.Errorf("log lacks %q:\n%s", want, l)
				}
			}
			if hostname(s, "a") != "two" || owner(s, "10.0.0.1") != "a" {
				t.Errorf("the last good version is not served: %q", hostname(s, "a"))
			}

			// Fixing it is picked up again.
			write(t, dir, "a.yaml", doc("a", "10.0.0.1", "three"))
			eventually(t, "the fix", func() bool { return hostname(s, "a") == "three" })

			// A newcomer taking a's address is refused and logged; a keeps it.
			write(t, dir, "c.json", `{"apiVersion":"vminit.dev/v1alpha1","kind":"Instance","metadata":{"name":"c"},"spec":{"metadataServer":{"addresses":["10.0.0.1","10.0.0.3"]}}}`)
			eventually(t, "the conflict to be logged", func() bool { return strings.Contains(logs.String(), "spec file refused") })
			if owner(s, "10.0.0.1") != "a" || owner(s, "10.0.0.3") != "" {
				t.Errorf("the newcomer took over: 10.0.0.1 → %q, 10.0.0.3 → %q", owner(s, "10.0.0.1"), owner(s, "10.0.0.3"))
			}
			if l := logs.String(); !strings.Contains(l, "file=c.json") || !strings.Contains(l, "10.0.0.1 is claimed by a.yaml") {
				t.Errorf("conflict log: %s", l)
			}

			// Deleting a removes it, and the refused c gets in on the same reload.
			os.Remove(filepath.Join(dir, "a.yaml"))
			eventually(t, "the delete", func() bool { _, ok := s.Snapshot().ByName("a"); return !ok })
			eventually(t, "the refused file to be accepted", func() bool { return owner(s, "10.0.0.1") == "c" })

			// A duplicate name in another file is refused too.
			write(t, dir, "z.yaml", doc("b", "10.0.0.9", "dup"))
			eventually(t, "the duplicate to be logged", func() bool { return strings.Contains(logs.String(), `instance \"b\" is already defined by b.yml`) })
			if hostname(s, "b") != "bee" {
				t.Error("a duplicate name replaced the incumbent")
			}
		})
	}
}

func TestPutDelete(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "motd.txt"), nil, 0o644)
	write(t, dir, "other.yaml", doc("other", "10.0.1.1", "other"))
	write(t, dir, "old-file-name.yml", strings.Replace(doc("web", "10.0.1.2", "web"), "      source:\n        file: motd.txt\n", "      content: hi\n", 1))
	s, _ := open(t, dir, Options{NoWatch: true})
	if s.Snapshot().Len() != 2 {
		t.Fatalf("initial load: %v", s.Snapshot().Names())
	}
	ctx := context.Background()

	inline := func(name, addr, host string) []byte {
		return []byte(strings.Replace(doc(name, addr, host), "      source:\n        file: motd.txt\n", "      content: hi\n", 1))
	}
	rec, err := s.Put(ctx, inline("new", "10.0.1.3", "new"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Name != "new" || owner(s, "10.0.1.3") != "new" {
		t.Fatalf("Put not served: %+v", rec)
	}
	if fi, err := os.Stat(filepath.Join(dir, "new.yaml")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new.yaml: %v %v", fi, err)
	}
	// Replacing an instance defined in a file of another name moves it to
	// <name>.yaml.
	if _, err := s.Put(ctx, inline("web", "10.0.1.2", "web2")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "old-file-name.yml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old file is still there: %v", err)
	}
	if hostname(s, "web") != "web2" {
		t.Error("the replacement is not served")
	}
	// Refusals: invalid, source.file, address conflict. Nothing is written.
	before, _ := os.ReadDir(dir)
	if _, err := s.Put(ctx, []byte("kind: Instance\n")); !errors.Is(err, spec.ErrInvalid) {
		t.Errorf("invalid spec: %v", err)
	}
	if _, err := s.Put(ctx, []byte(doc("x", "10.0.1.4", "x"))); err == nil || !strings.Contains(err.Error(), "source.file") {
		t.Errorf("source.file over the API: %v", err)
	}
	if _, err := s.Put(ctx, inline("thief", "10.0.1.1", "thief")); !errors.Is(err, registry.ErrAddressConflict) {
		t.Errorf("address conflict: %v", err)
	}
	after, _ := os.ReadDir(dir)
	if len(before) != len(after) {
		t.Errorf("a refused Put left files: %v → %v", before, after)
	}
	if err := s.Delete(ctx, "new"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.yaml")); !errors.Is(err, os.ErrNotExist) || owner(s, "10.0.1.3") != "" {
		t.Errorf("Delete left the instance: %v", err)
	}
	if err := s.Delete(ctx, "new"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("deleting a missing instance: %v", err)
	}
	// Reload (SIGHUP) picks up changes made while not watching.
	write(t, dir, "late.yaml", string(inline("late", "10.0.1.5", "late")))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if owner(s, "10.0.1.5") != "late" {
		t.Error("Reload missed a new file")
	}
}

// TestConcurrentReaders runs readers against a store that keeps reloading
// (meaningful under -race).
func TestConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "motd.txt"), nil, 0o644)
	write(t, dir, "a.yaml", doc("a", "10.0.0.1", "h0"))
	s, _ := open(t, dir, Options{Debounce: time.Millisecond})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if owner(s, "10.0.0.1") != "a" {
					t.Error("a reader saw no owner")
					return
				}
			}
		})
	}
	for i := range 30 {
		write(t, dir, "a.yaml", doc("a", "10.0.0.1", fmt.Sprintf("h%d", i+1)))
	}
	eventually(t, "the last edit", func() bool { return hostname(s, "a") == "h30" })
	close(stop)
	wg.Wait()
}

// writeMany writes n specs (mdbench.SpecFile, instance i at 10.0.0.0+i)
// and a motd.txt beside them.
func writeMany(tb testing.TB, dir string, n int) {
	tb.Helper()
	os.WriteFile(filepath.Join(dir, "motd.txt"), []byte("hello\n"), 0o644)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	if err := mdbench.WriteSpecs(dir, n, addr); err != nil {
		tb.Fatal(err)
	}
}

func TestLoad1000(t *testing.T) {
	dir := t.TempDir()
	writeMany(t, dir, 1000)
	start := time.Now()
	s, logs := open(t, dir, Options{NoWatch: true})
	t.Logf("1,000 specs loaded in %v", time.Since(start))
	if s.Snapshot().Len() != 1000 {
		t.Fatalf("loaded %d of 1000:\n%s", s.Snapshot().Len(), logs.String())
	}
	if owner(s, "10.0.3.231") != "vm-000999" {
		t.Errorf("10.0.3.231 → %q", owner(s, "10.0.3.231"))
	}
}

// BenchmarkLoad100k measures Open on 100,000 small specs (run with
// -bench Load100k -benchtime 1x; the files are written once, outside the
// timer).
func BenchmarkLoad100k(b *testing.B) {
	dir := b.TempDir()
	writeMany(b, dir, 100_000)
	syscall.Sync() // a server starts on files already written back, not while the kernel writes them
	b.ResetTimer()
	for b.Loop() {
		s, err := Open(dir, Options{NoWatch: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		if s.Snapshot().Len() != 100_000 {
			b.Fatalf("loaded %d", s.Snapshot().Len())
		}
		s.Close()
	}
}

// BenchmarkLoad100kChecked is BenchmarkLoad100k with the server's checks
// (mdserver.StoreChecks) run before Open returns: a cold start of a store
// that does not defer them (vminit serve does: DeferChecks).
func BenchmarkLoad100kChecked(b *testing.B) {
	dir := b.TempDir()
	writeMany(b, dir, 100_000)
	syscall.Sync()
	b.ResetTimer()
	for b.Loop() {
		s, err := Open(dir, Options{NoWatch: true, Logger: slog.New(slog.DiscardHandler), Checks: mdserver.StoreChecks(mdserver.Options{})})
		if err != nil {
			b.Fatal(err)
		}
		if s.Snapshot().Len() != 100_000 {
			b.Fatalf("loaded %d", s.Snapshot().Len())
		}
		s.Close()
	}
}

// BenchmarkDecodeDocument is one spec of BenchmarkLoad100k, without I/O:
// the share of the load that is YAML decoding and validation.
func BenchmarkDecodeDocument(b *testing.B) {
	dir := b.TempDir()
	writeMany(b, dir, 1)
	data, _ := os.ReadFile(filepath.Join(dir, "vm-000000.yaml"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := registry.DecodeDocument(data, dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad100kWarm measures Open on the files of BenchmarkLoad100k
// when the start-up cache is current (a restart): the files are stat'ed,
// not parsed.
func BenchmarkLoad100kWarm(b *testing.B) {
	old := racyWindow
	racyWindow = 0 // the files were just written
	defer func() { racyWindow = old }()
	dir, cache := b.TempDir(), filepath.Join(b.TempDir(), "instances.cache")
	writeMany(b, dir, 100_000)
	opts := Options{NoWatch: true, Logger: slog.New(slog.DiscardHandler), CacheFile: cache}
	s, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	fi, _ := os.Stat(cache)
	b.ResetTimer()
	for b.Loop() {
		s, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		if s.cacheHits.Load() != 100_000 {
			b.Fatalf("%d from the cache", s.cacheHits.Load())
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(fi.Size())/100_000, "cache-B/instance")
}
