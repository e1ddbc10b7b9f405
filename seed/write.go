package seed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckPath says why p cannot be the path of a file on a seed medium, or
// returns nil. It is the one name rule of every output format (a
// directory, tar, ISO9660, VFAT; those two then apply their own character
// limits): a path is relative, slash-separated, without an empty, "." or
// ".." segment, a backslash (a Windows guest's separator: sysprep discs
// are read by Windows) or a control character (C0, DEL or C1). Seed paths
// may come from ConfigMap and Secret keys, which an objects file sets to
// anything.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("is empty")
	case !utf8.ValidString(p):
		return errors.New("is not UTF-8")
	case strings.HasPrefix(p, "/"):
		return errors.New("is absolute: seed paths are relative to the medium's root")
	case strings.ContainsRune(p, '\\'):
		return errors.New(`has a backslash, which Windows reads as a separator`)
	case strings.ContainsFunc(p, unicode.IsControl): // C1 too: U+009B is a terminal's CSI
		return errors.New("has a control character")
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "":
			return errors.New("has an empty segment")
		case ".", "..":
			return fmt.Errorf("has a %q segment", seg)
		}
	}
	return nil
}

// Check applies CheckPath to every file of the seed and returns every
// problem, each naming its path, or nil. Every writer of a seed calls it
// before writing anything.
func (s *Seed) Check() error {
	var errs []error
	for _, f := range s.Files {
		if err := CheckPath(f.Path); err != nil {
			errs = append(errs, fmt.Errorf("seed %s: file %q %w", s.Label, f.Path, err))
		}
	}
	return errors.Join(errs...)
}

// WriteDir writes the seed's files into dir as WriteRoot does, confined
// to dir.
func (s *Seed) WriteDir(dir string, perm fs.FileMode) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return s.WriteRoot(r, perm)
}

// WriteRoot writes the seed's files into r, which should be empty: files
// with permissions perm and directories with perm plus the matching search
// bits. Pass 0o600 unless the files must be shared: user-data can hold
// password hashes.
//
// Nothing that is already in r is followed or written through: every
// directory and file is created anew (os.Root opens a new file with
// O_CREATE|O_EXCL and never follows a link in its place, nor one out of
// r), and modes are set on the open descriptors (fchmod), never by path,
// so a symbolic link planted in the directory makes WriteRoot fail
// instead of writing or changing the file it points to. Nothing is written
// unless Check passes.
func (s *Seed) WriteRoot(r *os.Root, perm fs.FileMode) error {
	if err := s.Check(); err != nil {
		return err
	}
	dperm := DirMode(perm)
	for _, d := range s.dirs() {
		if err := r.Mkdir(filepath.FromSlash(d), 0o700); err != nil {
			return err
		}
		if err := chmodIn(r, d, dperm); err != nil {
			return err
		}
	}
	for _, f := range s.Files {
		if err := writeIn(r, f, perm); err != nil {
			return err
		}
	}
	return nil
}

// DirMode is the mode of a directory holding files of mode perm: perm
// with a search bit wherever perm can read.
func DirMode(perm fs.FileMode) fs.FileMode {
	return perm | (perm&0o444)>>2
}

// writeIn creates f in r, with permissions perm whatever the umask.
func writeIn(r *os.Root, f File, perm fs.FileMode) error {
	out, err := r.OpenFile(filepath.FromSlash(f.Path), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = out.Write(f.Data)
	if err == nil {
		err = out.Chmod(perm)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// chmodIn sets the mode of the directory d of r through a descriptor.
func chmodIn(r *os.Root, d string, perm fs.FileMode) error {
	dir, err := r.Open(filepath.FromSlash(d))
	if err != nil {
		return err
	}
	err = dir.Chmod(perm)
	if cerr := dir.Close(); err == nil {
		err = cerr
	}
	return err
}

// dirs returns every directory that holds a file, parents first.
func (s *Seed) dirs() []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range s.Files {
		for d := path.Dir(f.Path); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}
