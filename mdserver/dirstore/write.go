//go:build unix

package dirstore

// The admin API's writes: Put and Delete change the directory's files
// under the store's lock, without waiting for a scan, and serve the
// change at once.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/vminit/vminit/internal/lib/atomicfile"
	"github.com/vminit/vminit/mdserver/registry"
)

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
