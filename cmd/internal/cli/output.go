package cli

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/internal/lib/atomicfile"
	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/seed"
)

// defaultMode is every output's permission unless --mode says otherwise:
// seeds and Ignition configs carry password hashes and keys, so only their
// owner reads them (libvirt's dynamic ownership hands images to QEMU).
const defaultMode fs.FileMode = 0o600

// outputFlags are -o/--output and --mode, shared by every command that
// writes a file or a directory.
type outputFlags struct {
	path string
	mode string
}

func (f *outputFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().StringVarP(&f.path, "output", "o", "", what)
	cmd.Flags().StringVar(&f.mode, "mode", fmt.Sprintf("%04o", defaultMode), "permissions of the files written (directories get the matching search bits)")
}

// perm parses --mode.
func (f *outputFlags) perm() (fs.FileMode, error) {
	m, err := strconv.ParseUint(f.mode, 8, 32)
	if err != nil || m > 0o777 {
		return 0, usagef("--mode=%q: want octal permissions such as 0600 or 0644", f.mode)
	}
	return fs.FileMode(m), nil
}

// stdStream matches the names of an already open descriptor, which an
// output is written through rather than replaced.
var stdStream = lazyre.New(`^/(dev/(stdout|stderr|fd/[0-9]+)|proc/self/fd/[0-9]+)$`)

// isStream reports whether path names standard output or another open
// descriptor, which outputs are written through.
func isStream(path string) bool {
	return path == "-" || stdStream.MatchString(path)
}

// writeFile writes what fn produces to path: standard output for "-", the
// stream itself for /dev/stdout and its kin, and otherwise a regular file
// written beside its target and renamed into place. A target that is not
// a regular file (a directory, a device, a FIFO, a symbolic link) is
// refused: renaming would replace it rather than write to it.
func writeFile(cmd *cobra.Command, path string, perm fs.FileMode, fn func(io.Writer) error) error {
	switch {
	case path == "-" || path == "/dev/stdout":
		return fn(cmd.OutOrStdout())
	case path == "/dev/stderr":
		return fn(cmd.ErrOrStderr())
	case stdStream.MatchString(path):
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := checkTarget(path, false); err != nil {
		return err
	}
	return atomicfile.Write(path, perm, fn)
}

// writeDir creates the directory path from what fn writes, through an
// os.Root, into a new directory that stays 0700 until it is complete and
// is then given its mode and renamed into place.
func writeDir(path string, perm fs.FileMode, fn func(r *os.Root) error) error {
	if err := checkTarget(path, true); err != nil {
		return err
	}
	return atomicfile.WriteDir(path, seed.DirMode(perm), fn)
}

// checkTarget says, in words, why path cannot be replaced by a new file
// (or, with dir, a new directory).
func checkTarget(path string, dir bool) error {
	if isStream(path) {
		return nil
	}
	st, err := os.Lstat(path)
	if os.IsNotExist(err) {
		parent := filepath.Dir(filepath.Clean(path))
		if pst, perr := os.Stat(parent); perr != nil {
			return fmt.Errorf("%s: directory %s does not exist", path, parent)
		} else if !pst.IsDir() {
			return fmt.Errorf("%s: %s is not a directory", path, parent)
		}
		return nil
	}
	if err != nil {
		return err
	}
	switch t := st.Mode().Type(); {
	case t == 0 && !dir:
		return nil
	case t == fs.ModeDir && dir:
		return nil // atomicfile.WriteDir takes it only when empty
	case t == fs.ModeDir:
		return fmt.Errorf("%s is a directory: name the file to write in it, e.g. -o %s", path, filepath.Join(path, "seed.iso"))
	case t == 0:
		return fmt.Errorf("%s is a file: name a directory that does not exist yet, or an empty one", path)
	case t == fs.ModeSymlink:
		dest, _ := os.Readlink(path)
		return fmt.Errorf("%s is a symbolic link (to %s): vminit replaces an output by renaming a complete new file over it, which would replace the link; name the file itself", path, dest)
	default:
		return fmt.Errorf("%s is %s, not a regular file: vminit writes outputs only to regular files (-o - writes to standard output)", path, inputfile.Kind(t))
	}
}
