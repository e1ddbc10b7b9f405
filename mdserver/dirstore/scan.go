//go:build unix

package dirstore

// Reading the directory: reload lists it, scanAll stats, reads and decodes
// the files that changed (in parallel, relative to one directory
// descriptor), and reload applies what it found unless a Put or Delete
// changed the file meanwhile.

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/internal/lib/parallel"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

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

	names, err := specFileNames(s.dir)
	var scans []scanned
	if err == nil {
		scans, err = s.scanAll(names, known, force)
	}
	if err != nil {
		s.log.Error("dirstore: cannot read the directory; serving the last snapshot", "err", err)
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyScanLocked(scans, start)
	return nil
}

// specFileNames lists the spec files of dir (IsSpecFile), in order.
func specFileNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, de := range ents {
		if IsSpecFile(de.Name()) && !de.IsDir() {
			names = append(names, de.Name())
		}
	}
	return names, nil
}

// applyScanLocked applies what a scan that began at Store.gen start
// found, with s.mu held: the files it did not see are removed and those
// it read are applied (one that fails to load keeps its last good
// version), except a file Put or Delete changed since start, which keeps
// what they made of it.
func (s *Store) applyScanLocked(scans []scanned, start uint64) {
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
