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
//
// The files follow the store's jobs: scan.go reads the directory,
// deferred.go runs the deferred checks, write.go holds Put and Delete,
// watch.go (with inotify_linux.go) notices changes, and cache.go keeps
// the start-up cache.
package dirstore

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vminit/vminit/mdserver/registry"
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
	// Unaddressed is told the instances a change of the directory newly
	// serves that no address identifies (registry.IndexOptions).
	Unaddressed func(names []string)
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
		Invalid: "dirstore: invalid spec file", Refused: "dirstore: spec file refused", Checks: opts.Checks,
		Unaddressed: opts.Unaddressed})
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

// Dir is the directory the store reads.
func (s *Store) Dir() string { return s.dir }

// Watching says how changes are noticed: "inotify", "poll" or "" (not
// watched).
func (s *Store) Watching() string { return s.watching }

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

// applyLocked applies changes to the index, with s.mu held.
func (s *Store) applyLocked(changes []registry.Change) {
	if !s.ix.Apply(changes) {
		return
	}
	s.reloads.Add(1)
	s.cacheChangedLocked()
	s.log.Debug("dirstore: snapshot replaced", "instances", s.Snapshot().Len(), "changed", len(changes))
}
