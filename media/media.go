// Package media puts a seed on the medium a hypervisor attaches to a VM: an
// ISO9660 image (Rock Ridge and Joliet), a VFAT image or a tar archive, and
// reads such images back for inspection. Format also names the fourth
// medium, a plain directory, which package seed writes itself
// ((*seed.Seed).WriteDir).
//
// Every format Write produces is byte-reproducible: the one timestamp comes from
// Options.ModTime (callers pass SOURCE_DATE_EPOCH), owners are root, modes
// are normalised and entries are sorted.
package media

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/vminit/vminit/internal/lib/memfs"
	"github.com/vminit/vminit/iso9660"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/vfat"
)

// Format is a kind of seed medium.
type Format string

// The formats Write produces; Dir, a plain directory, is written by
// (*seed.Seed).WriteDir or WriteRoot.
const (
	ISO9660 Format = "iso9660"
	VFAT    Format = "vfat"
	Tar     Format = "tar"
	Dir     Format = "dir"
)

// Formats lists every Format, for flag help and completion.
var Formats = []Format{ISO9660, VFAT, Tar, Dir}

// ErrUnknownFormat is returned for a Format this package does not write.
var ErrUnknownFormat = errors.New("unknown media format")

// ParseFormat checks a format name.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("%w %q (want one of %s)", ErrUnknownFormat, s, strings.Join(names, ", "))
}

// FormatFor returns the format an output file name asks for: .iso is
// ISO9660; .img, .vfat and .fat are VFAT; .tar is tar. Any other name
// (a disk image's .qcow2, no extension at all) names no seed format, and
// ok is false: guessing would hand a hypervisor the wrong kind of file.
func FormatFor(name string) (f Format, ok bool) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".iso":
		return ISO9660, true
	case ".img", ".vfat", ".fat":
		return VFAT, true
	case ".tar":
		return Tar, true
	}
	return "", false
}

// Options tune the image.
type Options struct {
	// ModTime is the single timestamp written everywhere a format keeps
	// one. The zero value means the Unix epoch.
	ModTime time.Time
	// Alignment pads an ISO9660 image to a multiple of this many bytes; 0
	// means 4096 (QEMU refuses raw images that are not 4 KiB aligned).
	Alignment int64
	// Size fixes a VFAT image's size in bytes; 0 picks the smallest size
	// that fits.
	Size int64
}

func (o Options) modTime() time.Time {
	if o.ModTime.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return o.ModTime.UTC()
}

// VolumeLabel is the label an image of s in format f carries: the seed's,
// or for a seed found by its files rather than a label (oVirt's sysprep
// payload) none on VFAT, and on ISO9660, which must name its volume,
// "CDROM": what genisoimage names it without -V, as vdsm's mkIsoFs runs
// it. A tar has none.
func VolumeLabel(s *seed.Seed, f Format) string {
	switch {
	case f == Tar:
		return ""
	case s.Label == "" && f == ISO9660:
		return "CDROM"
	}
	return s.Label
}

// Write writes the seed as an image of format f (ISO9660, VFAT or Tar) to w.
// A seed whose file paths fail seed.CheckPath is refused before a byte is
// written, every such path named: the one name rule of every format.
func Write(w io.Writer, s *seed.Seed, f Format, o Options) error {
	if err := s.Check(); err != nil {
		return err
	}
	switch f {
	case ISO9660:
		iw := iso9660.NewWriter(w, iso9660.Options{Label: VolumeLabel(s, f), ModTime: o.modTime(), Alignment: o.Alignment})
		if err := iw.AddFS(s.FS()); err != nil {
			return err
		}
		return iw.Close()
	case VFAT:
		vw := vfat.NewWriter(w, vfat.Options{Label: s.Label, ModTime: o.modTime(), Size: o.Size})
		if err := vw.AddFS(s.FS()); err != nil {
			return err
		}
		return vw.Close()
	case Tar:
		return writeTar(w, s, o.modTime())
	case Dir:
		return fmt.Errorf("%w: a directory is written with (*seed.Seed).WriteDir", ErrUnknownFormat)
	}
	return fmt.Errorf("%w %q", ErrUnknownFormat, f)
}

// writeTar writes a USTAR archive whose entries are sorted and carry no
// host data, so that the archive is as reproducible as the images.
func writeTar(w io.Writer, s *seed.Seed, mtime time.Time) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, f := range s.Files {
		for _, d := range parents(f.Path) {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
				return err
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Mode: 0o644, Size: int64(len(f.Data)), ModTime: mtime, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// parents returns the directories above a slash path, outermost first.
// It ends at "/" as well as ".", whatever the path: Write checks paths
// first, but a loop must not depend on that.
func parents(p string) []string {
	var out []string
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

// Image is a seed image read back.
type Image struct {
	Format Format
	// Label is the volume label; for VFAT the root-directory label, which
	// is what blkid reports as LABEL.
	Label string
	// Labels lists every place the image records a label, e.g. the PVD and
	// the Joliet SVD, or the boot sector and the root directory, so that a
	// mismatch between them is visible.
	Labels map[string]string
	// FS is the image's file tree, with the names a Linux guest sees.
	FS fs.FS
}

// ErrNotAnImage is returned by Open for data that is neither ISO9660, FAT
// nor tar.
var ErrNotAnImage = errors.New("not an ISO9660 or FAT image, nor a tar archive")

// Open reads an ISO9660 or VFAT image, or a tar archive of a seed (what
// Write makes of Tar), whose Label is then empty: a tar has none.
func Open(r io.ReaderAt, size int64) (*Image, error) {
	var magic [5]byte
	if _, err := r.ReadAt(magic[:], 16*2048+1); err == nil && string(magic[:]) == "CD001" {
		img, err := iso9660.NewReader(r, size)
		if err != nil {
			return nil, err
		}
		return isoImage(img), nil
	}
	var boot [512]byte
	if _, err := r.ReadAt(boot[:], 0); err == nil && boot[510] == 0x55 && boot[511] == 0xAA {
		img, err := vfat.NewReader(r, size)
		if err != nil {
			return nil, err
		}
		return fatImage(img), nil
	}
	var ustar [6]byte
	if _, err := r.ReadAt(ustar[:], 257); err == nil && string(ustar[:5]) == "ustar" {
		fsys, err := readTar(io.NewSectionReader(r, 0, size))
		if err != nil {
			return nil, err
		}
		return &Image{Format: Tar, Labels: map[string]string{}, FS: fsys}, nil
	}
	return nil, ErrNotAnImage
}

// readTar loads a tar archive's regular files and directories, with their
// modes and times. Seeds hold kilobytes: the archive is bounded by its
// size, each file by seed.MaxFileSize.
func readTar(r io.Reader) (fs.FS, error) {
	var entries []memfs.Entry
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tar: %w", err)
		}
		name := strings.TrimSuffix(path.Clean(strings.TrimPrefix(h.Name, "./")), "/")
		if !fs.ValidPath(name) || name == "." {
			return nil, fmt.Errorf("tar: entry %q is not a path inside the archive", h.Name)
		}
		e := memfs.Entry{Path: name, Mode: fs.FileMode(h.Mode) & fs.ModePerm, ModTime: h.ModTime}
		switch h.Typeflag {
		case tar.TypeDir:
			e.Mode |= fs.ModeDir
		case tar.TypeReg:
			if h.Size > seed.MaxFileSize {
				return nil, fmt.Errorf("tar: %s is %d bytes; seeds hold kilobytes", name, h.Size)
			}
			if e.Data, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("tar: %s: %w", name, err)
			}
		default:
			return nil, fmt.Errorf("tar: %s is not a regular file or a directory", name)
		}
		entries = append(entries, e)
	}
	fsys, err := memfs.New(entries)
	if err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return fsys, nil
}

// isoImage reports the label as libblkid (and so /dev/disk/by-label) does:
// the Joliet label when there is one that differs from the primary label.
func isoImage(r *iso9660.Reader) *Image {
	img := &Image{Format: ISO9660, Label: r.Label, Labels: map[string]string{"primary": r.Label}, FS: r}
	if r.JolietLevel > 0 {
		img.Labels["joliet"] = r.JolietLabel
		if r.JolietLabel != "" && r.JolietLabel != r.Label {
			img.Label = r.JolietLabel
		}
	}
	return img
}

// fatImage reports the root-directory label as the label, as blkid's LABEL
// does; the boot-sector copy is blkid's LABEL_FATBOOT.
func fatImage(v *vfat.Reader) *Image {
	img := &Image{Format: VFAT, Label: v.Label, Labels: map[string]string{"root": v.Label, "boot": v.BootLabel}, FS: v}
	if img.Label == "" {
		img.Label = v.BootLabel
	}
	return img
}
