// Package atomicfile writes outputs so that they are either complete or
// absent: content goes to a temporary file beside the target, which is
// synced and renamed into place only when everything succeeded. A failed or
// interrupted build never leaves a half-written seed image where a
// hypervisor would pick it up.
//
// Errors name the target, never the temporary file: a user cannot act on
// a name that no longer exists.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write creates path with the given permissions from what fn writes. On any
// error the temporary file is removed and path is left untouched.
func Write(path string, perm fs.FileMode, fn func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return renamePath(err, path)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = renamePath(err, path)
		}
	}()
	if err = fn(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteDir creates the directory path, with permissions perm, from what fn
// writes into a temporary sibling directory, renaming it into place at the
// end. path must not exist or be an empty directory: replacing a populated
// directory cannot be done atomically, and deleting a user's files is not
// this package's call.
//
// fn writes through r, an os.Root of the temporary directory, so that
// nothing it creates can be redirected out of it. The directory stays
// 0700 while fn fills it and is given perm last, on its descriptor: with
// a group- or world-writable perm, no other user can plant a file or a
// symbolic link in it before it is complete.
func WriteDir(path string, perm fs.FileMode, fn func(r *os.Root) error) (err error) {
	if entries, statErr := os.ReadDir(path); statErr == nil {
		if len(entries) > 0 {
			return fmt.Errorf("%s exists and is not empty", path)
		}
	} else if !os.IsNotExist(statErr) {
		return statErr
	}
	parent, base := filepath.Split(filepath.Clean(path))
	if parent == "" {
		parent = "."
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-*") // mode 0700
	if err != nil {
		return renamePath(err, path)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
			err = renamePath(err, path)
		}
	}()
	if err = fill(tmp, perm, fn); err != nil {
		return err
	}
	// An empty directory in the way is replaced; rename fails on a
	// non-empty one, which the check above has ruled out.
	os.Remove(path)
	return os.Rename(tmp, path)
}

// fill runs fn on the directory tmp and then gives it perm, through the
// descriptor of the root fn wrote through.
func fill(tmp string, perm fs.FileMode, fn func(r *os.Root) error) error {
	r, err := os.OpenRoot(tmp)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := fn(r); err != nil {
		return err
	}
	d, err := r.Open(".")
	if err != nil {
		return err
	}
	err = d.Chmod(perm)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// renamePath makes a file-system error name the target instead of the
// temporary file it happened on.
func renamePath(err error, path string) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &le):
		return &fs.PathError{Op: "write", Path: path, Err: le.Err}
	case errors.As(err, &pe) && pe.Path != path:
		return &fs.PathError{Op: "write", Path: path, Err: pe.Err}
	}
	return err
}
