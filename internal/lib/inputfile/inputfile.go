// Package inputfile reads the files a user names as input (a spec, the
// files a spec takes content from, an image to inspect) without the harm a
// path can do to the program that reads it: opening a FIFO or a device
// blocks or never ends, a symbolic link or ".." leaves the directory the
// reader meant, and /proc or /sys hand out the reader's own secrets
// (/proc/self/environ holds its tokens).
//
// Every function opens without blocking, accepts only regular files
// outside the kernel's pseudo-filesystems, bounds what it reads, and reads
// from the descriptor it checked, so a file swapped in between cannot be
// read instead.
package inputfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

var (
	// ErrNotRegular is returned for a FIFO, device, socket or directory,
	// and for a file of /proc, /sys or another kernel pseudo-filesystem.
	ErrNotRegular = errors.New("not a regular file")
	// ErrOutside is returned by ReadIn for a path that leaves its root.
	ErrOutside = errors.New("outside the directory files may be read from")
	// ErrTooLarge is returned for a file over the reader's limit.
	ErrTooLarge = errors.New("too large")
)

// Open opens path for reading without blocking, and returns the file only
// if it is a regular file outside the kernel's pseudo-filesystems. The
// error names the path.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, err
	}
	if err := check(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CheckExisting refuses a path that exists and is not a regular file,
// without opening it: for a file another library opens with a plain open
// (client-go's kubeconfig, crypto/tls's key pair), which a FIFO blocks
// forever. A path that does not exist is left to its reader.
func CheckExisting(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, Kind(st.Mode()))
}

// Read reads the whole of path, a regular file of at most limit bytes.
func Read(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path, limit)
}

// ReadIn reads path as Read does, but only when it lies inside root once
// every symbolic link on the way is followed. A relative path is relative
// to the working directory, as for Read.
func ReadIn(root, path string, limit int64) ([]byte, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(absRoot, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, &fs.PathError{Op: "read", Path: path, Err: ErrOutside}
	}
	r, err := os.OpenRoot(absRoot)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := OpenInRoot(r, rel)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: unwrap(err)}
	}
	defer f.Close()
	if err := check(f, path); err != nil {
		return nil, err
	}
	return readAll(f, path, limit)
}

// OpenInRoot opens name in r for reading, without blocking, following
// symbolic links only inside r: a link that leads out of it is ErrOutside.
// It does not check what it opened (ReadIn does).
func OpenInRoot(r *os.Root, name string) (*os.File, error) {
	f, err := r.OpenFile(name, os.O_RDONLY|openFlags, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
			// A symbolic link on the way leads out of the root.
			return nil, &fs.PathError{Op: "open", Path: name, Err: ErrOutside}
		}
		return nil, err
	}
	return f, nil
}

func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// check refuses what is not a regular file of a real filesystem.
func check(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, Kind(st.Mode()))}
	}
	if name := pseudoFS(f); name != "" {
		return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (a file of %s)", ErrNotRegular, name)}
	}
	return nil
}

// Kind names what a file that is not a regular file is, for messages:
// "a directory", "a FIFO", "a character device"…
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}

func readAll(f *os.File, path string, limit int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes; the limit is %d", ErrTooLarge, st.Size(), limit)}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // grew since the stat
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)}
	}
	return b, nil
}
