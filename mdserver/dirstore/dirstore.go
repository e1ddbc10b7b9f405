//go:build unix

// Package dirstore is the metadata server's default store: a directory of
// instance spec files (*.yaml, *.yml, *.json; one instance per file;
// files[].source.file relative to the spec file; subdirectories and dot
// files ignored).
//
// Every file is read once, at Open (in parallel across cores), into an
// in-memory registry.Snapshot that requests read without locks or I/O;
// with Options.DeferChecks, a file is only identified there (its name and
// addresses) and parsed by its deferred check, and an instance no guest
// has asked for is held as the file's bytes.
// When the directory changes (inotify; an mtime poll where inotify is not
// available) the changed files alone are re-read after a short debounce and
// a new snapshot is swapped in atomically.
//
// A file that fails to load (invalid spec, one that fails Options.Checks,
// or one whose name or address another file already holds) is logged with
// every problem, and the instance keeps its last good version: an edit in
// progress or a typo never takes a running VM's metadata away. Deleting a
// file removes its instance. Reload re-reads everything (for SIGHUP; also
// picks up changed source.file content, which is not watched).
//
// The store reads only inside its directory: a spec file that is a
// symbolic link is followed only to a file in the directory tree (a
// Kubernetes ConfigMap's links are), and files[].source.file is confined
// to it (spec.Parse); FIFOs and devices are refused without blocking.
// Scans run without the lock that guards the store's state, so a slow
// file delays the next reload, never a Put, a Delete or Close.
//
// It needs a Unix (openat, fstatat; inotify on Linux, polling elsewhere):
// on Windows the package is empty and vminit serve offers etcd and
// Kubernetes stores only.
package dirstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vminit/vminit/internal/lib/atomicfile"
	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/internal/lib/parallel"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// Options tune a Store.
type Options struct {
	// Logger receives load problems and reloads; default slog.Default().
	Logger *slog.Logger
	// Debounce is how long after the first change event the directory is
	// re-read, collecting the burst of events an editor or a
	// `kubectl apply` of a ConfigMap makes; default 200 ms.
	Debounce time.Duration
	// PollInterval > 0 watches by comparing modification times at that
	// interval instead of inotify. When inotify cannot be set up the store
	// polls every 2 s.
	PollInterval time.Duration
	// NoWatch disables watching: the directory is read at Open and on
	// Reload only.
	NoWatch bool
	// Workers parse files in parallel; default GOMAXPROCS.
	Workers int
	// Checks are the server's rules beyond the spec's validation (see
	// registry.Checks), run on every file read and every Put.
	Checks registry.Checks
	// DeferChecks runs Checks.Content of the files Open reads (and does
	// not find in the start-up cache) after Open returns, so that a server
	// can listen at once: each such record is checked on its first lookup
	// (registry.Record.Verify, which the snapshot's lookups call) or by a
	// background pass over all of them on half the Workers, whichever
	// comes first, and one that fails is logged and taken out
	// (registry.Index.Unserve). Nothing unchecked is ever served. The
	// files are decoded by those checks too, where they can be
	// (registry.Index.DecodeDeferred), and kept decoded only once a guest
	// asks for them. Files read later (reloads, Put) are checked before
	// they are indexed, as without it: their last good version stays.
	DeferChecks bool
	// CacheFile, when set, is a start-up cache (see cache.go): the
	// instances as last served, so that a restart parses only the files
	// that changed since. It is rewritten after changes, at most once per
	// CacheInterval (default 1 min), and at Close. Put it in a directory
	// only the server can write; never in the spec directory.
	CacheFile     string
	CacheInterval time.Duration
}

// Store is a directory of spec files. It implements registry.Store.
type Store struct {
	dir  string
	root *os.Root // dir, for links followed only inside it
	opts Options
	log  *slog.Logger
	ix   *registry.Index // keyed by file name; read and applied under mu

	// reloadMu serialises reloads; a reload scans the directory holding it
	// alone, and takes mu only to apply what it found. Put and Delete take
	// mu alone: they never wait for a scan.
	reloadMu sync.Mutex
	mu       sync.Mutex        // guards the state below, ix's changes and the files Put and Delete write
	files    map[string]*entry // by base name
	gen      uint64            // counts the changes Put and Delete made
	gone     map[string]uint64 // files Put and Delete removed, at which gen

	watching string // "inotify", "poll" or ""
	stop     chan struct{}
	done     chan struct{}

	// deferring is set while Open reads the directory with DeferChecks;
	// checksDone is closed when the background pass has ended.
	deferring  bool
	checksDone chan struct{}

	// The start-up cache: startCache is read during Open only; the rest
	// belongs to cacheLoop.
	startCache map[string]cached
	cacheHits  atomic.Int64
	cacheDirty bool // under mu
	cacheKick  chan struct{}
	cacheDone  chan struct{}
	verified   map[string]bool
	closeFn    func()
	once       sync.Once
	reloads    atomic.Int64
}

// entry is what the store knows about one file.
type entry struct {
	stamp stamp
	// racy is set when the file was read within racyWindow of its last
	// change: a write in the same timestamp tick could leave the stamp
	// unchanged, so the file is re-read on the next reload and kept out of
	// the cache.
	racy bool
	// gen is the Store.gen of the Put that wrote the file (0: a reload
	// read it). A reload that started before does not apply what it read.
	gen uint64
}

// racyWindow is longer than any file system's timestamp granularity
// (Linux takes file times from a clock that ticks every few milliseconds).
var racyWindow = 2 * time.Second

// stamp identifies a version of a file without reading it.
type stamp struct {
	ino, size    int64
	mtime, ctime int64
	dev          uint64
	isRegular    bool
}

func stampOf(st *unix.Stat_t) stamp {
	return stamp{
		ino: int64(st.Ino), dev: uint64(st.Dev), size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
		isRegular: st.Mode&unix.S_IFMT == unix.S_IFREG,
	}
}

// IsSpecFile reports whether a directory entry name is read as a spec.
func IsSpecFile(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Open reads every spec file in dir and, unless opts.NoWatch, starts
// watching it. Files that fail to load are logged and left out; Open fails
// only when the directory cannot be read.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: abs, root: root, opts: opts, log: opts.Logger.With("store", "dir", "dir", abs),
		files: map[string]*entry{}, gone: map[string]uint64{}, stop: make(chan struct{}), done: make(chan struct{})}
	s.ix = registry.NewIndex(registry.IndexOptions{Logger: s.log, KeyAttr: "file",
		Invalid: "dirstore: invalid spec file", Refused: "dirstore: spec file refused", Checks: opts.Checks})
	if opts.CacheFile != "" {
		if err := s.openCache(); err != nil {
			root.Close()
			return nil, err
		}
	}
	deferred, err := s.firstLoad()
	if err != nil {
		root.Close()
		return nil, err
	}
	if deferred {
		if s.cacheKick != nil {
			// The cache is written once the pass is done: it holds only
			// records that passed the checks.
			select {
			case <-s.cacheKick:
			default:
			}
		}
		s.checksDone = make(chan struct{})
		go s.checkDeferred()
	}
	if opts.CacheFile != "" {
		go s.cacheLoop()
	}
	s.startWatching()
	return s, nil
}

// withDefaults fills in the Options left zero.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Debounce <= 0 {
		o.Debounce = 200 * time.Millisecond
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.CacheInterval <= 0 {
		o.CacheInterval = time.Minute
	}
	return o
}

// openCache reads the start-up cache of Options.CacheFile for the first
// load. A cache that cannot be used is logged and every file parsed; a
// cache file inside the directory, or one that is not a regular file, is
// an error.
func (s *Store) openCache() error {
	file := s.opts.CacheFile
	if ca, err := filepath.Abs(file); err != nil || filepath.Dir(ca) == s.dir {
		return fmt.Errorf("cache file %s: put it outside the spec directory (writing it there would wake the watcher)", file)
	}
	c, err := readCache(file, s.dir, s.opts.Checks.Content != nil)
	switch {
	case errors.Is(err, inputfile.ErrNotRegular):
		// A FIFO or device: the cache would be renamed over it.
		return fmt.Errorf("cache file %w", err)
	case errors.Is(err, errStaleCache):
		s.log.Info("dirstore: start-up cache written by another build; parsing every file", "cache", file)
	case err != nil:
		s.log.Warn("dirstore: start-up cache unusable; parsing every file", "cache", file, "err", err)
	}
	s.startCache = c
	s.verified = map[string]bool{}
	s.cacheKick = make(chan struct{}, 1)
	s.cacheDone = make(chan struct{})
	return nil
}

// firstLoad reads the whole directory, from the start-up cache where it
// still matches, and reports whether the content checks were deferred
// (Options.DeferChecks) and remain to be run.
func (s *Store) firstLoad() (deferred bool, err error) {
	s.deferring = s.opts.DeferChecks && s.opts.Checks.Content != nil
	err = s.reload(true)
	deferred = s.deferring
	s.deferring = false
	if s.startCache != nil {
		hits := int(s.cacheHits.Load())
		s.log.Info("dirstore: start-up cache used", "instances", s.Snapshot().Len(), "fromCache", hits)
		// Rewrite the cache only if it no longer matches the directory.
		if hits == len(s.startCache) && hits == s.Snapshot().Len() {
			s.cacheDirty = false
			select {
			case <-s.cacheKick:
			default:
			}
		}
	}
	s.startCache = nil
	return deferred, err
}

// startWatching watches the directory as Options say: not at all, by
// polling, or with inotify (polling every 2s where inotify is
// unavailable).
func (s *Store) startWatching() {
	if s.opts.NoWatch {
		close(s.done)
		return
	}
	if s.opts.PollInterval > 0 {
		s.watching = "poll"
		go s.poll(s.opts.PollInterval)
		return
	}
	if err := s.startInotify(); err != nil {
		s.log.Warn("dirstore: inotify unavailable; polling every 2s", "err", err)
		s.watching = "poll"
		go s.poll(2 * time.Second)
	}
}

// Dir is the directory the store reads.
func (s *Store) Dir() string { return s.dir }

// Watching says how changes are noticed: "inotify", "poll" or "" (not
// watched).
func (s *Store) Watching() string { return s.watching }

// ChecksDone is closed when the background pass of Options.DeferChecks
// has ended (at once when there was none): every instance Open read is
// checked, or the store is closed.
func (s *Store) ChecksDone() <-chan struct{} {
	if s.checksDone == nil {
		return closedChan
	}
	return s.checksDone
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Reloads counts the reloads that changed the snapshot.
func (s *Store) Reloads() int64 { return s.reloads.Load() }

// Snapshot returns the current index (an atomic load).
func (s *Store) Snapshot() *registry.Snapshot { return s.ix.Snapshot() }

// Reload re-reads every file, changed or not (for SIGHUP).
func (s *Store) Reload() error { return s.reload(true) }

// Close stops watching. It does not wait for a reload in progress (a
// scan stuck reading a file must not hold up a server's shutdown).
func (s *Store) Close() error {
	s.once.Do(func() {
		close(s.stop)
		if s.closeFn != nil {
			s.closeFn()
		}
	})
	<-s.done
	if s.checksDone != nil {
		<-s.checksDone
	}
	if s.cacheDone != nil {
		<-s.cacheDone
	}
	if s.reloadMu.TryLock() { // else a reload is stuck; the root's finalizer closes it
		s.root.Close()
		s.reloadMu.Unlock()
	}
	return nil
}

// checkDeferred is the background pass of Options.DeferChecks: it checks
// every record Open indexed unchecked, takes out those that fail, and
// then lets the start-up cache be written with the rest. It stops early
// when the store is closed.
func (s *Store) checkDeferred() {
	defer close(s.checksDone)
	if h := deferHook.Load(); h != nil {
		(*h)()
	}
	type item struct {
		file   string
		rec    *registry.Record
		served bool // else pending: refused for now, for a name or an address
	}
	start := time.Now()
	s.mu.Lock()
	var todo []item
	// A record a request checked first is here too if it failed.
	s.ix.Each(func(file string, rec *registry.Record) {
		if ran, err := rec.Checked(); !ran || err != nil {
			todo = append(todo, item{file, rec, true})
		}
	})
	s.ix.EachPending(func(file string, rec *registry.Record) {
		if ran, err := rec.Checked(); !ran || err != nil {
			todo = append(todo, item{file, rec, false})
		}
	})
	s.mu.Unlock()
	slices.SortFunc(todo, func(a, b item) int { return strings.Compare(a.file, b.file) })
	stopped := func() bool {
		select {
		case <-s.stop:
			return true
		default:
			return false
		}
	}
	// Half the workers: the other half serves the guests meanwhile, and
	// the garbage the checks make (their renderings) comes at half the
	// rate, so that less of it outlives a collection.
	errs := parallel.Map(len(todo), max(1, s.opts.Workers/2), func(i int) error {
		if stopped() {
			return nil
		}
		err := todo[i].rec.Verify()
		// The guests' requests go first: on a core of its own, a worker
		// would hold it until preempted (10 ms), and an early guest's
		// accept, read and answer would each wait for that.
		runtime.Gosched()
		return err
	})
	s.mu.Lock()
	refused := 0
	for i, err := range errs {
		switch it := todo[i]; {
		case err == nil:
		case it.served:
			if s.ix.Unserve(it.file, it.rec, err) {
				refused++
				s.reloads.Add(1)
			}
		default:
			if p, _ := s.ix.Pending(it.file); p == it.rec { // a version that does not load, after all
				s.applyLocked([]registry.Change{{Key: it.file, Err: err}})
				refused++
			}
		}
	}
	if s.cacheKick != nil { // the records checked now may be cached
		s.cacheDirty = true
		select {
		case s.cacheKick <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	if stopped() {
		return
	}
	s.log.Info("dirstore: deferred checks done", "checked", len(todo), "refused", refused, "duration", time.Since(start))
}

// reloadOrStop reloads, and returns false without waiting for the reload
// to end if the store is closed meanwhile.
func (s *Store) reloadOrStop() bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.reload(false)
	}()
	select {
	case <-done:
		return true
	case <-s.stop:
		return false
	}
}

// cacheLoop writes the start-up cache after changes: at once the first
// time, then at most once per CacheInterval, and a last time at Close.
func (s *Store) cacheLoop() {
	defer close(s.cacheDone)
	for {
		select {
		case <-s.stop:
			s.writeCache()
			return
		case <-s.cacheKick:
		}
		s.writeCache()
		select {
		case <-s.stop:
			s.writeCache()
			return
		case <-time.After(s.opts.CacheInterval):
		}
	}
}

func (s *Store) writeCache() {
	s.mu.Lock()
	if !s.cacheDirty {
		s.mu.Unlock()
		return
	}
	s.cacheDirty = false
	checked := s.opts.Checks.Content != nil
	items := make([]cacheItem, 0, s.Snapshot().Len())
	s.ix.Each(func(name string, rec *registry.Record) {
		if pending, _ := s.ix.Pending(name); pending == nil {
			if ran, err := rec.Checked(); !ran || err != nil {
				return // a deferred check (Options.DeferChecks) has not passed yet
			}
			if e := s.files[name]; e != nil && !e.racy {
				items = append(items, cacheItem{file: name, stamp: e.stamp, rec: rec})
			}
		}
	})
	s.mu.Unlock()
	slices.SortFunc(items, func(a, b cacheItem) int { return strings.Compare(a.file, b.file) })
	start := time.Now()
	n, err := writeCache(s.opts.CacheFile, s.dir, checked, items, s.verified)
	if err != nil {
		s.log.Error("dirstore: cannot write the start-up cache", "cache", s.opts.CacheFile, "err", err)
		return
	}
	s.log.Debug("dirstore: start-up cache written", "cache", s.opts.CacheFile, "entries", n, "duration", time.Since(start))
}

// scanned is what one worker found for one directory entry.
type scanned struct {
	name    string
	st      stamp
	present bool // a regular file (or a link to one) that could be read
	changed bool // read and parsed: new, different from its stamp, or forced
	racy    bool // see entry.racy
	cached  bool // rec came from the start-up cache
	rec     *registry.Record
	err     error
}

// reload scans the directory and applies what changed. With force, every
// file is re-read even when its stamp is unchanged. The scan runs without
// s.mu: a Put or Delete made meanwhile wins over what the scan read of
// its file.
func (s *Store) reload(force bool) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	s.mu.Lock()
	start := s.gen
	known := make(map[string]entry, len(s.files))
	for name, e := range s.files {
		known[name] = *e
	}
	s.mu.Unlock()

	ents, err := os.ReadDir(s.dir)
	if err != nil {
		s.log.Error("dirstore: cannot read the directory; serving the last snapshot", "err", err)
		return err
	}
	var names []string
	for _, de := range ents {
		if IsSpecFile(de.Name()) && !de.IsDir() {
			names = append(names, de.Name())
		}
	}
	scans, err := s.scanAll(names, known, force)
	if err != nil {
		s.log.Error("dirstore: cannot read the directory; serving the last snapshot", "err", err)
		return err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// newer reports whether Put or Delete changed the file after the scan
	// began: what the scan saw of it is older.
	newer := func(name string) bool {
		e := s.files[name]
		return e != nil && e.gen > start || s.gone[name] > start
	}
	present := make(map[string]bool, len(scans))
	var results []*scanned
	for i := range scans {
		p := &scans[i]
		if !p.present || newer(p.name) {
			continue
		}
		present[p.name] = true
		if p.changed {
			results = append(results, p)
		}
	}
	for name, g := range s.gone {
		if g <= start {
			delete(s.gone, name) // the scan's listing saw the removal
		}
	}

	changes := make([]registry.Change, 0, len(results))
	if len(s.files) == 0 {
		s.files = make(map[string]*entry, len(results)) // the first load: no rehashing on the way to 100,000
	}
	for name := range s.files {
		if !present[name] && !newer(name) {
			changes = append(changes, registry.Change{Key: name})
			delete(s.files, name)
			s.log.Info("dirstore: file removed", "file", name)
		}
	}
	for _, p := range results {
		e := s.files[p.name]
		if e == nil {
			e = &entry{}
			s.files[p.name] = e
		}
		e.stamp, e.racy, e.gen = p.st, p.racy, 0
		if p.cached && p.rec != nil {
			s.verified[p.rec.Revision] = true // cacheLoop is not running yet
		}
		changes = append(changes, registry.Change{Key: p.name, Record: p.rec, Err: p.err})
	}
	s.applyLocked(changes)
	return nil
}

// applyLocked applies changes to the index, with s.mu held.
func (s *Store) applyLocked(changes []registry.Change) {
	if !s.ix.Apply(changes) {
		return
	}
	s.reloads.Add(1)
	if s.cacheKick != nil {
		s.cacheDirty = true
		select {
		case s.cacheKick <- struct{}{}:
		default:
		}
	}
	s.log.Debug("dirstore: snapshot replaced", "instances", s.Snapshot().Len(), "changed", len(changes))
}

// scanAll stats the named files and reads and parses those that changed
// (all of them with force), on opts.Workers goroutines. Stat, open and
// read all happen in the workers, relative to one directory descriptor:
// at 100,000 files the system calls cost as much as the parsing.
func (s *Store) scanAll(names []string, known map[string]entry, force bool) ([]scanned, error) {
	dirfd, err := unix.Open(s.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: s.dir, Err: err}
	}
	defer unix.Close(dirfd)
	out := parallel.Map(len(names), s.opts.Workers, func(i int) scanned { return s.scan(dirfd, names[i], known, force) })
	return out, nil
}

// deferHook, when set by a test, runs before the background pass of
// Options.DeferChecks.
var deferHook atomic.Pointer[func()]

// scanHook, when set by a test, runs before a file is opened.
var scanHook atomic.Pointer[func(name string)]

// scan looks at one file, as known (a copy of s.files) has it.
func (s *Store) scan(dirfd int, name string, known map[string]entry, force bool) scanned {
	if r, done := s.scanByStat(dirfd, name, known, force); done {
		return r
	}
	if h := scanHook.Load(); h != nil {
		(*h)(name)
	}
	return s.readSpecFile(dirfd, name)
}

// scanByStat answers for a file from one stat where it can: gone, a
// directory, unchanged since the last reload, or as the start-up cache
// has it. done is false when the file must be read. A file seen for the
// first time skips the stat: readSpecFile stats it anyway.
func (s *Store) scanByStat(dirfd int, name string, known map[string]entry, force bool) (r scanned, done bool) {
	r = scanned{name: name}
	e, isKnown := known[name]
	c, inCache := s.startCache[name]
	if !(isKnown && !force || inCache) {
		return r, false
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, 0); err != nil { // follows ConfigMap symlinks
		if err != unix.ENOENT {
			s.log.Error("dirstore: cannot stat a spec file", "file", name, "err", err)
		}
		return r, true
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return r, true
	}
	if isKnown && !force && e.stamp == stampOf(&st) && !e.racy {
		r.present, r.st = true, e.stamp
		return r, true
	}
	if inCache && stampOf(&st) == c.stamp {
		if rec, err := fromCache(c); err == nil {
			s.cacheHits.Add(1)
			r.present, r.changed, r.st, r.rec, r.cached = true, true, c.stamp, rec, true
			// The content checks ran when the cache was written (by this
			// build, with them: readCache); the policy may have changed.
			r.err = s.ix.Admit(rec)
			if r.err != nil {
				r.rec = nil
			}
			return r, true
		}
	}
	return r, false
}

// readSpecFile opens, reads and decodes one spec file.
func (s *Store) readSpecFile(dirfd int, name string) scanned {
	r := scanned{name: name}
	fd, err := s.openSpec(dirfd, name)
	if errors.Is(err, errOutside) {
		var st unix.Stat_t
		unix.Fstatat(dirfd, name, &st, 0) // the stamp, so that the refusal is logged once
		r.present, r.changed, r.st, r.err = true, true, stampOf(&st), err
		return r
	}
	if err != nil {
		if err != unix.ENOENT && err != unix.EISDIR {
			s.log.Error("dirstore: cannot open a spec file", "file", name, "err", err)
		}
		return r
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		s.log.Error("dirstore: cannot stat a spec file", "file", name, "err", err)
		return r
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return r
	case unix.S_IFREG:
	default:
		r.present, r.changed, r.st = true, true, stampOf(&st)
		r.err = errors.New("not a regular file")
		return r
	}
	r.present, r.changed, r.st = true, true, stampOf(&st)
	r.racy = time.Now().UnixNano()-r.st.ctime < int64(racyWindow) || time.Now().UnixNano()-r.st.mtime < int64(racyWindow)
	if st.Size > spec.MaxSpecSize {
		r.err = fmt.Errorf("%d bytes; the limit is %d", st.Size, spec.MaxSpecSize)
		return r
	}
	data, err := readAll(fd, int(st.Size))
	if err != nil {
		r.err = err
		return r
	}
	if s.deferring {
		r.rec, r.err = s.ix.DecodeDeferred(data, s.dir)
	} else {
		r.rec, r.err = s.ix.Decode(data, s.dir)
	}
	return r
}

// errOutside is a spec file that is a symbolic link out of the directory.
var errOutside = errors.New("a symbolic link out of the spec directory: not read (the store reads only inside its directory)")

// openSpec opens a spec file of the directory without blocking (a FIFO
// named like a spec must not hang the reload). A symbolic link is
// followed only inside the directory tree.
func (s *Store) openSpec(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != unix.ELOOP {
		return fd, err
	}
	f, err := inputfile.OpenInRoot(s.root, name)
	switch {
	case errors.Is(err, inputfile.ErrOutside):
		return -1, errOutside
	case err != nil:
		var errno unix.Errno
		if errors.As(err, &errno) {
			return -1, errno
		}
		return -1, err
	}
	defer f.Close()
	raw, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	var dupErr error
	if cerr := raw.Control(func(pfd uintptr) { fd, dupErr = unix.FcntlInt(pfd, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return -1, cerr
	}
	return fd, dupErr
}

// readAll reads fd to its end, expecting size bytes (a file that grows
// while it is read is read up to the spec size limit). A read that returns
// exactly the expected size into a larger buffer is taken as the end: a
// regular file's read is short only at its end, and this saves a second
// system call per file on a cold load. A file that grew in between no
// longer has the stamp taken before the read, so the reload that its write
// sets off reads it again.
func readAll(fd, size int) ([]byte, error) {
	buf := make([]byte, 0, size+1)
	for {
		if len(buf) == cap(buf) {
			if len(buf) > spec.MaxSpecSize {
				return nil, fmt.Errorf("larger than the limit of %d bytes", spec.MaxSpecSize)
			}
			buf = slices.Grow(buf, 4096)
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) == size && len(buf) < cap(buf) {
			return buf, nil
		}
	}
}

// Put validates doc and writes it atomically (temporary file + rename) as
// <name>.yaml, replacing the file the instance was defined in (if it had
// another name, that file is removed), and serves it at once. source.file
// is refused: a document from the API must not read the server's files.
func (s *Store) Put(ctx context.Context, doc []byte) (*registry.Record, error) {
	rec, err := s.ix.Decode(doc, "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	target := rec.Name + ".yaml"
	previous, _ := s.ix.KeyOf(rec.Name)
	// Refuse before writing: a file that would be refused on load helps
	// nobody.
	if err := s.ix.Check(target, rec, previous); err != nil {
		return nil, err
	}
	if e := s.files[target]; e != nil && previous != target {
		// target exists but defines another instance (or nothing valid).
		if r := s.ix.Served(target); r != nil {
			return nil, fmt.Errorf("%w: %s defines instance %q", registry.ErrConflict, target, r.Name)
		}
	}
	path := filepath.Join(s.dir, target)
	if err := atomicfile.Write(path, 0o600, func(w io.Writer) error { _, err := w.Write(doc); return err }); err != nil {
		return nil, err
	}
	s.gen++
	var st unix.Stat_t
	// The stamp of the file written; racy, so that the next reload reads
	// it back (a change made right after would keep this stamp).
	unix.Lstat(path, &st)
	s.files[target] = &entry{stamp: stampOf(&st), racy: true, gen: s.gen}
	delete(s.gone, target)
	changes := []registry.Change{{Key: target, Record: rec}}
	if previous != "" && previous != target {
		if err := os.Remove(filepath.Join(s.dir, previous)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		delete(s.files, previous)
		s.gone[previous] = s.gen
		changes = append(changes, registry.Change{Key: previous})
	}
	s.applyLocked(changes)
	if pending, why := s.ix.Pending(target); pending != nil {
		return nil, why
	}
	got := s.ix.Served(target)
	if got == nil || got.Revision != rec.Revision {
		return nil, fmt.Errorf("%s was changed concurrently", target)
	}
	return got, nil
}

// Delete removes the file that defines the instance.
func (s *Store) Delete(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	file, ok := s.ix.KeyOf(name)
	if !ok {
		return fmt.Errorf("%w: %q", registry.ErrNotFound, name)
	}
	if err := os.Remove(filepath.Join(s.dir, file)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s.gen++
	delete(s.files, file)
	s.gone[file] = s.gen
	s.applyLocked([]registry.Change{{Key: file}})
	return nil
}

// watchLoop coalesces change notifications: the first one starts the
// debounce timer, those arriving before it fires are absorbed, then the
// directory is re-read once.
func (s *Store) watchLoop(events <-chan struct{}) {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case _, ok := <-events:
			if !ok {
				return
			}
		}
		t := time.NewTimer(s.opts.Debounce)
	drain:
		for {
			select {
			case <-s.stop:
				t.Stop()
				return
			case <-events:
			case <-t.C:
				break drain
			}
		}
		if !s.reloadOrStop() {
			return
		}
	}
}

func (s *Store) poll(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if !s.reloadOrStop() {
				return
			}
		}
	}
}
