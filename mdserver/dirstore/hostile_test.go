//go:build unix

package dirstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// within runs f and fails the test if it has not returned in 20 s (a
// generous bound: each of these returns in milliseconds unless it blocks).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

func setScanHook(t *testing.T, f func(name string)) {
	scanHook.Store(&f)
	t.Cleanup(func() { scanHook.Store(nil) })
}

func inlineDoc(name, addr, host string) []byte {
	return []byte(strings.Replace(doc(name, addr, host), "      source:\n        file: motd.txt\n", "      content: hi\n", 1))
}

// TestFIFOsDoNotFreeze: a spec whose files[].source.file names a FIFO,
// and a FIFO named like a spec, are refused without blocking: the store
// opens, takes Puts, picks up new files and closes as usual.
func TestFIFOsDoNotFreeze(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"fifo", "pipe.yaml"} {
		if err := syscall.Mkfifo(filepath.Join(dir, f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(t, dir, "a.yaml", strings.Replace(doc("a", "10.0.0.1", "a"), "motd.txt", "fifo", 1))
	var s *Store
	var logs *syncBuf
	within(t, "Open", func() { s, logs = open(t, dir, Options{}) })
	if l := logs.String(); !strings.Contains(l, "file=a.yaml") || !strings.Contains(l, "spec.files[0].source.file") || !strings.Contains(l, "not a regular file (a FIFO)") ||
		!strings.Contains(l, "file=pipe.yaml") || !strings.Contains(l, "not a regular file") {
		t.Errorf("the FIFOs are not logged:\n%s", l)
	}
	within(t, "Put", func() {
		if _, err := s.Put(context.Background(), inlineDoc("b", "10.0.0.2", "b")); err != nil {
			t.Error(err)
		}
	})
	write(t, dir, "c.yaml", string(inlineDoc("c", "10.0.0.3", "c")))
	eventually(t, "a new file to be picked up", func() bool { return owner(s, "10.0.0.3") == "c" })
	within(t, "Reload", func() { s.Reload() })
	within(t, "Close", func() { s.Close() })
}

// TestStuckScanBlocksNothing: while a reload is stuck reading a file (a
// hung network filesystem), Put, Delete, Snapshot and Close answer; what
// the stuck scan read does not undo them when it ends.
func TestStuckScanBlocksNothing(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", string(inlineDoc("a", "10.0.0.1", "a")))
	write(t, dir, "gone.yaml", string(inlineDoc("gone", "10.0.0.9", "gone")))
	s, _ := open(t, dir, Options{})
	stuck, release := make(chan struct{}), make(chan struct{})
	setScanHook(t, func(name string) {
		if name == "slow.yaml" {
			close(stuck)
			<-release
		}
	})
	write(t, dir, "slow.yaml", string(inlineDoc("slow", "10.0.0.5", "slow")))
	select {
	case <-stuck:
	case <-time.After(20 * time.Second):
		t.Fatal("the reload never reached slow.yaml")
	}
	within(t, "Put during a stuck scan", func() {
		if _, err := s.Put(context.Background(), inlineDoc("a", "10.0.0.1", "a2")); err != nil {
			t.Error(err)
		}
	})
	within(t, "Delete during a stuck scan", func() {
		if err := s.Delete(context.Background(), "gone"); err != nil {
			t.Error(err)
		}
	})
	if hostname(s, "a") != "a2" || owner(s, "10.0.0.9") != "" {
		t.Errorf("Put and Delete are not served: a=%q, 10.0.0.9 → %q", hostname(s, "a"), owner(s, "10.0.0.9"))
	}
	close(release)
	eventually(t, "the stuck file to be served", func() bool { return owner(s, "10.0.0.5") == "slow" })
	if hostname(s, "a") != "a2" || owner(s, "10.0.0.9") != "" {
		t.Errorf("the stuck scan undid Put or Delete: a=%q, 10.0.0.9 → %q", hostname(s, "a"), owner(s, "10.0.0.9"))
	}

	// Close does not wait for a stuck reload.
	stuck2, release2 := make(chan struct{}), make(chan struct{})
	defer close(release2)
	setScanHook(t, func(name string) {
		if name == "slow2.yaml" {
			close(stuck2)
			<-release2
		}
	})
	write(t, dir, "slow2.yaml", string(inlineDoc("slow2", "10.0.0.6", "slow")))
	<-stuck2
	within(t, "Close during a stuck scan", func() { s.Close() })
}

// TestConfinedToItsDirectory: the store reads nothing outside its
// directory, whatever its files say: a spec file that is a link out of
// it, a source.file with .. or through a link out of it; links inside
// the tree (a ConfigMap's) are followed. Nothing of a file that is no
// spec is logged.
func TestConfinedToItsDirectory(t *testing.T) {
	top := t.TempDir()
	dir, outside := filepath.Join(top, "specs"), filepath.Join(top, "etc")
	const secret = "s3cr3t-admin-T0KEN"
	for _, d := range []string{dir, outside, filepath.Join(dir, "..2026_11_24"), filepath.Join(dir, "sub")} {
		os.MkdirAll(d, 0o700)
	}
	os.WriteFile(filepath.Join(outside, "admin-token"), []byte(secret+"\n"), 0o600)
	os.WriteFile(filepath.Join(outside, "shadow"), []byte("root:$6$"+secret+":19000:0:99999:7:::\nsshd:!:19000::::::\n"), 0o600)
	os.WriteFile(filepath.Join(outside, "evil.yaml"), inlineDoc("evil", "10.0.0.66", "evil"), 0o600)
	os.WriteFile(filepath.Join(dir, "sub", "ok.txt"), []byte("inside\n"), 0o600)
	links := map[string]string{
		"evil.yaml":   "../etc/evil.yaml", // a spec from outside
		"abs.yaml":    filepath.Join(outside, "evil.yaml"),
		"shadow.yaml": "../etc/shadow",      // a secret that is no spec
		"token.yaml":  "../etc/admin-token", // another
		"tok-link":    "../etc/admin-token", // a source file through a link
		"..data":      "..2026_11_24",       // a ConfigMap's layout
		"cm.yaml":     "..data/cm.yaml",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "..2026_11_24", "cm.yaml"), inlineDoc("cm", "10.0.0.7", "cm"), 0o600)
	src := func(name, addr, file string) string {
		return strings.Replace(doc(name, addr, name), "motd.txt", file, 1)
	}
	write(t, dir, "dotdot.yaml", src("dotdot", "10.0.0.11", "../etc/admin-token"))
	write(t, dir, "abssrc.yaml", src("abssrc", "10.0.0.12", filepath.Join(outside, "admin-token")))
	write(t, dir, "linksrc.yaml", src("linksrc", "10.0.0.13", "tok-link"))
	write(t, dir, "inside.yaml", src("inside", "10.0.0.14", "sub/ok.txt"))
	write(t, dir, "notes.yaml", "password: "+secret+"\n"+secret+": 1\n")

	s, logs := open(t, dir, Options{NoWatch: true})
	if got := s.Snapshot().Names(); strings.Join(got, ",") != "cm,inside" {
		t.Errorf("served %v, want cm and inside only", got)
	}
	l := logs.String()
	if strings.Contains(l, secret[:8]) {
		t.Errorf("the log quotes a file outside the directory or no spec:\n%s", l)
	}
	for _, want := range []string{
		"file=evil.yaml", "file=abs.yaml", "file=shadow.yaml", "file=token.yaml", "a symbolic link out of the spec directory",
		"file=dotdot.yaml", "file=abssrc.yaml", "file=linksrc.yaml", "is outside " + dir,
		"file=notes.yaml", "not a vminit spec",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q:\n%s", want, l)
		}
	}
	// A Reload logs a standing refusal again only if the file changed.
	before := strings.Count(logs.String(), "file=evil.yaml")
	s.mu.Lock()
	s.files["evil.yaml"].racy = false
	s.mu.Unlock()
	s.reload(false)
	if strings.Count(logs.String(), "file=evil.yaml") != before {
		t.Error("an unchanged refused link is logged at every reload")
	}
}

// TestChecksKeepLastGood: a version that fails the server's checks is
// logged and refused, by Put too, and the last good one stays served; a
// start-up cache written without the checks is not trusted by a store
// that runs them.
func TestChecksKeepLastGood(t *testing.T) {
	noRacyWindow(t)
	dir, cache := t.TempDir(), filepath.Join(t.TempDir(), "instances.cache")
	refuse := func(r *registry.Record) error {
		if r.Instance().Spec.Hostname == "refused" {
			return spec.Errors{{Field: "spec.hostname", Message: "refused by the check"}}
		}
		return nil
	}
	write(t, dir, "a.yaml", string(inlineDoc("a", "10.0.0.1", "good")))
	s, _ := open(t, dir, Options{NoWatch: true, CacheFile: cache})
	closeNow(t, s)
	s, logs := open(t, dir, Options{NoWatch: true, CacheFile: cache, Checks: registry.Checks{Content: refuse}})
	if s.cacheHits.Load() != 0 || !strings.Contains(logs.String(), "did not run the content checks") {
		t.Errorf("a cache written without the checks was used (%d hits):\n%s", s.cacheHits.Load(), logs.String())
	}
	write(t, dir, "a.yaml", string(inlineDoc("a", "10.0.0.1", "refused")))
	s.Reload()
	if l := logs.String(); hostname(s, "a") != "good" || !strings.Contains(l, "spec.hostname: refused by the check") || !strings.Contains(l, "last good version") {
		t.Errorf("served %q; log:\n%s", hostname(s, "a"), l)
	}
	if _, err := s.Put(context.Background(), inlineDoc("b", "10.0.0.2", "refused")); err == nil || !strings.Contains(err.Error(), "refused by the check") {
		t.Errorf("Put: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.yaml")); err == nil {
		t.Error("a refused Put wrote its file")
	}
	// The policy check runs on cached records too.
	write(t, dir, "a.yaml", string(inlineDoc("a", "10.0.0.1", "good2")))
	s.Reload()
	closeNow(t, s)
	policy := func(r *registry.Record) error {
		return spec.Errors{{Field: "spec.metadataServer.addresses[0]", Message: "refused by the policy"}}
	}
	s, logs = open(t, dir, Options{NoWatch: true, CacheFile: cache, Checks: registry.Checks{Content: refuse, Policy: policy}})
	if s.cacheHits.Load() != 1 || s.Snapshot().Len() != 0 || !strings.Contains(logs.String(), "refused by the policy") {
		t.Errorf("%d hits, %v served:\n%s", s.cacheHits.Load(), s.Snapshot().Names(), logs.String())
	}
}

// TestDeferredChecks: with DeferChecks, Open indexes the files unchecked
// and a lookup checks a record before it returns it (a record that fails
// is never found); the background pass then takes out and logs every
// record that fails, lets in what it blocked, and only records that
// passed are written to the start-up cache. Files read later are checked
// before they are indexed: their last good version stays.
func TestDeferredChecks(t *testing.T) {
	noRacyWindow(t)
	dir, cache := t.TempDir(), filepath.Join(t.TempDir(), "instances.cache")
	var runs atomic.Int32
	checks := registry.Checks{Content: func(r *registry.Record) error {
		runs.Add(1)
		if r.Instance().Spec.Hostname == "refused" {
			return spec.Errors{{Field: "spec.hostname", Message: "refused by the check"}}
		}
		return nil
	}}
	write(t, dir, "a.yaml", string(inlineDoc("a", "10.0.0.1", "good")))
	write(t, dir, "b.yaml", string(inlineDoc("b", "10.0.0.2", "refused")))
	write(t, dir, "c.yaml", string(inlineDoc("c", "10.0.0.3", "refused")))
	write(t, dir, "d.yaml", string(inlineDoc("d", "10.0.0.3", "good"))) // blocked by c until c is out
	release := make(chan struct{})
	hook := func() { <-release }
	deferHook.Store(&hook)
	defer deferHook.Store(nil)
	s, logs := open(t, dir, Options{NoWatch: true, CacheFile: cache, Checks: checks, DeferChecks: true})
	if runs.Load() != 0 {
		t.Fatalf("%d checks ran in Open", runs.Load())
	}
	if hostname(s, "a") != "good" || hostname(s, "b") != "" || owner(s, "10.0.0.3") != "" || runs.Load() != 3 {
		t.Errorf("before the background pass: a=%q b=%q 10.0.0.3=%q, %d checks", hostname(s, "a"), hostname(s, "b"), owner(s, "10.0.0.3"), runs.Load())
	}
	close(release)
	<-s.checksDone
	if got := s.Snapshot().Names(); !slices.Equal(got, []string{"a", "d"}) || owner(s, "10.0.0.3") != "d" || runs.Load() != 4 {
		t.Errorf("after the background pass: %v, 10.0.0.3=%q, %d checks", got, owner(s, "10.0.0.3"), runs.Load())
	}
	l := logs.String()
	for _, want := range []string{"file=b.yaml problem1=\"spec.hostname: refused by the check\" serving=\"nothing from this file\"",
		"file=c.yaml problem1=\"spec.hostname: refused by the check\"", "checked=3 refused=2"} {
		if !strings.Contains(l, want) {
			t.Errorf("no %q in the log:\n%s", want, l)
		}
	}
	// A later version is checked before it is indexed: the last good one stays.
	write(t, dir, "a.yaml", string(inlineDoc("a", "10.0.0.1", "refused")))
	s.Reload()
	if hostname(s, "a") != "good" || !strings.Contains(logs.String(), "last good version") {
		t.Errorf("a refused edit replaced the last good version: %q", hostname(s, "a"))
	}
	write(t, dir, "a.yaml", string(inlineDoc("a", "10.0.0.1", "good2")))
	s.Reload()
	closeNow(t, s)
	s, _ = open(t, dir, Options{NoWatch: true, CacheFile: cache, Checks: checks})
	if s.cacheHits.Load() != 2 || !slices.Equal(s.Snapshot().Names(), []string{"a", "d"}) || hostname(s, "a") != "good2" {
		t.Errorf("after a restart: %d from the cache, %v served", s.cacheHits.Load(), s.Snapshot().Names())
	}
}
