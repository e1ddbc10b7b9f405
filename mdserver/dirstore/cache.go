//go:build unix

package dirstore

// The start-up cache (Options.CacheFile).
//
// Parsing YAML is the cost of opening a large directory: at 100,000 specs
// it is seconds of CPU, more than a restart of the server may take
// (docs/design.md, "Loading many specs"). The cache keeps every
// served instance as JSON (which encoding/json decodes several times
// faster, in parallel) together with the stamp (inode, size, mtime, ctime)
// of the file it came from. At Open, a file whose stamp matches its cache
// entry is stat'ed instead of read and parsed; any other file is parsed as
// usual. The cache is only ever a shortcut to the result parsing would
// give:
//
//   - An entry is written only for an instance whose JSON decodes back to
//     exactly the same value (checked with reflect.DeepEqual when the
//     entry is first written), and never for one that reads a
//     files[].source.file, whose content the stamp does not cover.
//   - The whole cache is ignored if it was written by another build of the
//     program (its key is a hash of the executable, so a new validation
//     rule is never skipped), for another directory, or if its checksum
//     does not match.
//
// The file holds the instances' data (keys, password hashes): it is
// written with mode 0600, atomically, and belongs in a directory only the
// server can write, such as systemd's CacheDirectory.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vminit/vminit/internal/lib/atomicfile"
	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

const cacheMagic = "vminit-dirstore-cache-2\n"

// cached is one entry of the start-up cache.
type cached struct {
	stamp    stamp
	revision string
	instance []byte // JSON
}

// programKey identifies the running build: a cache written by another
// build may hold instances that build's validation accepted and this one
// would not.
var programKey = sync.OnceValues(func() ([32]byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return [32]byte{}, err
	}
	f, err := os.Open(exe)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return [32]byte{}, err
	}
	return [32]byte(h.Sum(nil)), nil
})

// readCacheFile reads the cache without blocking, from a regular file
// only (inputfile.ErrNotRegular otherwise): a FIFO would hang start-up
// where no signal ends it. Its size is what the server wrote.
func readCacheFile(path string) ([]byte, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// castagnoli is built on first use: a store opened with a cache needs it,
// every other vminit run would pay for it at init.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// readCache loads a cache file written for dir by this build. A missing
// file is no cache and no error. With checked, a cache written by a store
// that did not run registry.Checks.Content is refused: its entries were
// never checked.
func readCache(path, dir string, checked bool) (map[string]cached, error) {
	data, err := readCacheFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	key, err := programKey()
	if err != nil {
		return nil, fmt.Errorf("cannot identify this program: %w", err)
	}
	if len(data) < len(cacheMagic)+4 || string(data[:len(cacheMagic)]) != cacheMagic {
		return nil, errors.New("not a cache file of this version")
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli()) != sum {
		return nil, errors.New("checksum mismatch")
	}
	r := &cacheReader{b: body[len(cacheMagic):]}
	if k := r.bytes(); !bytes.Equal(k, key[:]) {
		return nil, errStaleCache
	}
	if d := string(r.bytes()); d != dir {
		return nil, fmt.Errorf("written for directory %s", d)
	}
	if flags := r.u64(); checked && flags&flagChecked == 0 {
		return nil, errors.New("written by a store that did not run the content checks")
	}
	out := map[string]cached{}
	for len(r.b) > 0 && r.err == nil {
		name := string(r.bytes())
		var c cached
		c.stamp = stamp{ino: int64(r.u64()), dev: r.u64(), size: int64(r.u64()),
			mtime: int64(r.u64()), ctime: int64(r.u64()), isRegular: true}
		c.revision = string(r.bytes())
		c.instance = r.bytes()
		if r.err != nil {
			break
		}
		out[name] = c
	}
	if r.err != nil {
		return nil, errors.New("malformed")
	}
	return out, nil
}

// flagChecked marks a cache whose entries passed registry.Checks.Content.
const flagChecked = 1

// errStaleCache is a cache written by another build: expected after an
// upgrade, so not logged as a problem.
var errStaleCache = errors.New("written by another build of vminit")

type cacheReader struct {
	b   []byte
	err error
}

func (r *cacheReader) u64() uint64 {
	if len(r.b) < 8 {
		r.err, r.b = io.ErrUnexpectedEOF, nil
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *cacheReader) bytes() []byte {
	n := r.u64()
	if n > uint64(len(r.b)) {
		r.err, r.b = io.ErrUnexpectedEOF, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// fromCache rebuilds a record from its cache entry.
func fromCache(c cached) (*registry.Record, error) {
	inst := new(spec.Instance)
	if err := json.Unmarshal(c.instance, inst); err != nil {
		return nil, err
	}
	// Only file content given inline is cached, so this reads nothing.
	if err := inst.Resolve(""); err != nil {
		return nil, err
	}
	return registry.NewRecord(inst, c.revision)
}

// toCache encodes a record for the cache, or returns nil for one that
// must always be parsed from its file.
func toCache(r *registry.Record, verified bool) []byte {
	inst := r.InstanceUnkept() // written for every instance: not to be left decoded
	for _, f := range inst.Spec.Files {
		if f.Source != nil {
			return nil
		}
	}
	b, err := json.Marshal(inst)
	if err != nil {
		return nil
	}
	if !verified {
		back, err := fromCache(cached{instance: b, revision: r.Revision})
		if err != nil || !reflect.DeepEqual(back.Instance(), inst) {
			return nil
		}
	}
	return b
}

// cacheItem is one served file, as the writer sees it.
type cacheItem struct {
	file  string
	stamp stamp
	rec   *registry.Record
}

// writeCache writes items to path atomically and returns how many it
// wrote. verified holds the revisions whose JSON is already known to decode
// back exactly (it is updated); entries that do not round-trip are left
// out.
func writeCache(path, dir string, checked bool, items []cacheItem, verified map[string]bool) (int, error) {
	key, err := programKey()
	if err != nil {
		return 0, err
	}
	written := 0
	err = atomicfile.Write(path, 0o600, func(w io.Writer) error {
		sum := crc32.New(castagnoli())
		bw := bufio.NewWriterSize(io.MultiWriter(w, sum), 1<<20)
		var num [8]byte
		u64 := func(v uint64) {
			binary.LittleEndian.PutUint64(num[:], v)
			bw.Write(num[:])
		}
		str := func(b []byte) {
			u64(uint64(len(b)))
			bw.Write(b)
		}
		bw.WriteString(cacheMagic)
		str(key[:])
		str([]byte(dir))
		var flags uint64
		if checked {
			flags |= flagChecked
		}
		u64(flags)
		for _, it := range items {
			b := toCache(it.rec, verified[it.rec.Revision])
			if b == nil || !it.stamp.isRegular {
				continue
			}
			verified[it.rec.Revision] = true
			str([]byte(it.file))
			for _, v := range []uint64{uint64(it.stamp.ino), it.stamp.dev, uint64(it.stamp.size), uint64(it.stamp.mtime), uint64(it.stamp.ctime)} {
				u64(v)
			}
			str([]byte(it.rec.Revision))
			str(b)
			written++
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		_, err := w.Write(binary.LittleEndian.AppendUint32(nil, sum.Sum32()))
		return err
	})
	return written, err
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

// cacheLoop writes the start-up cache after changes: at once the first
// time, then at most once per CacheInterval, and a last time at Close.
func (s *Store) cacheLoop() {
	defer close(s.cacheDone)
	for {
		select {
		case <-s.stop:
			s.flushCache()
			return
		case <-s.cacheKick:
		}
		s.flushCache()
		select {
		case <-s.stop:
			s.flushCache()
			return
		case <-time.After(s.opts.CacheInterval):
		}
	}
}

// cacheChangedLocked tells cacheLoop that the index changed, with s.mu
// held (nothing without a cache).
func (s *Store) cacheChangedLocked() {
	if s.cacheKick == nil {
		return
	}
	s.cacheDirty = true
	select {
	case s.cacheKick <- struct{}{}:
	default:
	}
}

// flushCache writes the start-up cache if the index changed since it was
// last written: the served records whose checks passed, of files with no
// other version pending and not read within racyWindow of a change.
func (s *Store) flushCache() {
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
