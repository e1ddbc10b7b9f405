package seed

import (
	"io/fs"

	"github.com/vminit/vminit/internal/lib/memfs"
)

// FS returns a read-only view of the seed as a file system, for writers
// that take an fs.FS (fs.WalkDir, os.CopyFS, an image writer's AddFS).
// Files report mode 0444 and directories 0555, and every modification
// time is the zero time: nothing in the view depends on when it was made.
// A file whose path is invalid, or runs through another file's, is left
// out (Check reports the first kind). The view shares the seed's data; do
// not modify the seed while using it.
func (s *Seed) FS() fs.FS {
	entries := make([]memfs.Entry, 0, len(s.Files))
	for _, f := range s.Files {
		entries = append(entries, memfs.Entry{Path: f.Path, Data: f.Data, Mode: 0o444})
	}
	// The entries left out are named in the error; the view is the rest.
	m, _ := memfs.New(entries)
	return m
}
