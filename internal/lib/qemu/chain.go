package qemu

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vminit/vminit/internal/lib/inputfile"
)

// A disk image can make QEMU open other files than itself: a qcow2 names
// a backing file (read through the guest's disk where the image has no
// data of its own) and an external data file (where its data lives, read
// and written). Both are names in the image's header, chosen by whoever
// wrote the image, which for a downloaded image or a disk a guest wrote
// is not the user: /etc/shadow as a backing file hands it to the guest,
// nbd://host/x makes the host connect out. The rules below find every
// such name without letting QEMU open any of them.

// Dependency is a file that an image in a chain makes QEMU open.
type Dependency struct {
	// Image is the image whose header names it.
	Image string
	// Kind is "backing file" or "data file".
	Kind string
	// Name is the name as the header holds it.
	Name string
	// Path is where QEMU opens it (a relative name is relative to the
	// directory of Image); empty for a protocol.
	Path string
	// Format is a backing file's format from the header ("" when the
	// header names none and QEMU would probe it).
	Format string
	// Protocol is true for a name QEMU reads as a protocol (nbd://,
	// http://, json:{...}) rather than a file.
	Protocol bool
}

func (d Dependency) String() string {
	what := fmt.Sprintf("%s names the %s %q", d.Image, d.Kind, d.Name)
	switch {
	case d.Protocol:
		return what + " (a network or protocol source, not a file)"
	case d.Path != d.Name:
		return fmt.Sprintf("%s (%s)", what, d.Path)
	}
	return what
}

// maxChain bounds the backing chain followed (QEMU's own limit is larger;
// a real chain is one or two images deep).
const maxChain = 16

// Dependencies returns every file the image at path, read as format (Raw
// or QCOW2), makes QEMU open: its backing file and data file, then theirs,
// down the backing chain. It reads the headers itself and opens each file
// with inputfile.Open (a FIFO or device is refused, not waited on); it
// never starts QEMU, so nothing named is opened by QEMU and no protocol is
// connected to. A protocol or a backing file without a format ends the
// walk (it is listed; what lies beyond it is not known).
func Dependencies(path, format string) ([]Dependency, error) {
	var deps []Dependency
	seen := map[string]bool{}
	for depth := 0; format == QCOW2; depth++ {
		if depth == maxChain {
			return deps, fmt.Errorf("%s: the backing chain is deeper than %d images", path, maxChain)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return deps, err
		}
		if seen[abs] {
			return deps, fmt.Errorf("%s: the backing chain loops back to it", path)
		}
		seen[abs] = true
		h, err := readQCOW2Header(path)
		if err != nil {
			return deps, err
		}
		if h.dataFile != "" || h.externalData {
			name := h.dataFile
			if name == "" {
				name = "(given at open time)"
			}
			deps = append(deps, dependency(path, "data file", name, ""))
		}
		if h.backing == "" {
			break
		}
		d := dependency(path, "backing file", h.backing, h.backingFormat)
		deps = append(deps, d)
		if d.Protocol || d.Format == "" {
			break
		}
		path, format = d.Path, d.Format
	}
	return deps, nil
}

// dependency resolves a name found in image's header as QEMU does.
func dependency(image, kind, name, format string) Dependency {
	d := Dependency{Image: image, Kind: kind, Name: name, Format: format, Protocol: IsProtocol(name)}
	if !d.Protocol {
		d.Path = name
		if !filepath.IsAbs(name) {
			d.Path = filepath.Join(filepath.Dir(image), name)
		}
	}
	return d
}

// IsProtocol reports a file name that QEMU reads as a protocol: a colon
// before any slash (nbd://, http:, ssh:, json:{...}; QEMU's
// path_has_protocol).
func IsProtocol(name string) bool {
	i := strings.IndexAny(name, ":/\\")
	return i >= 0 && name[i] == ':'
}

// qcow2Header is what a qcow2 header says about other files.
type qcow2Header struct {
	backing       string
	backingFormat string
	dataFile      string
	externalData  bool // incompatible feature bit 2
}

// The qcow2 header extensions that name files (docs/interop/qcow2.txt).
const (
	extEnd           = 0x00000000
	extBackingFormat = 0xe2792aca
	extDataFile      = 0x44415441
	incompatDataFile = 1 << 2
)

// maxQCOW2Header bounds what readQCOW2Header reads: the header and its
// extensions (QEMU keeps them in the first cluster) and a backing file
// name (at most 1023 bytes in QEMU).
const maxQCOW2Header = 64 << 10

func readQCOW2Header(path string) (*qcow2Header, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, maxQCOW2Header)
	n, err := io.ReadFull(f, b)
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("%s: reading the qcow2 header: %w", path, err)
	}
	h, err := parseQCOW2Header(b[:n])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

var errBadQCOW2 = errors.New("not a qcow2 header QEMU would open")

func parseQCOW2Header(b []byte) (*qcow2Header, error) {
	be := binary.BigEndian
	if len(b) < 72 || string(b[:4]) != "QFI\xfb" {
		return nil, errBadQCOW2
	}
	version := be.Uint32(b[4:])
	h := &qcow2Header{}
	extAt := uint64(72)
	switch version {
	case 2:
	case 3:
		if len(b) < 104 {
			return nil, errBadQCOW2
		}
		h.externalData = be.Uint64(b[72:])&incompatDataFile != 0
		extAt = uint64(be.Uint32(b[100:]))
	default:
		return nil, fmt.Errorf("%w (version %d)", errBadQCOW2, version)
	}
	if off, size := be.Uint64(b[8:]), uint64(be.Uint32(b[16:])); off != 0 && size != 0 {
		if off > uint64(len(b)) || size > uint64(len(b))-off {
			return nil, fmt.Errorf("%w: the backing file name lies beyond the first %d bytes", errBadQCOW2, len(b))
		}
		h.backing = string(b[off : off+size])
	}
	for extAt+8 <= uint64(len(b)) {
		typ, n := be.Uint32(b[extAt:]), uint64(be.Uint32(b[extAt+4:]))
		data := extAt + 8
		if typ == extEnd {
			return h, nil
		}
		if data+n > uint64(len(b)) {
			break
		}
		switch typ {
		case extBackingFormat:
			h.backingFormat = string(bytes.TrimRight(b[data:data+n], "\x00"))
		case extDataFile:
			h.dataFile = string(bytes.TrimRight(b[data:data+n], "\x00"))
		}
		extAt = data + (n+7)&^7
	}
	return nil, fmt.Errorf("%w: its header extensions run past the first %d bytes", errBadQCOW2, len(b))
}

// ChainImage is one image of `qemu-img info --backing-chain` (the fields
// that say which files QEMU opened).
type ChainImage struct {
	Filename       string `json:"filename"`
	Format         string `json:"format"`
	BackingFile    string `json:"full-backing-filename"`
	FormatSpecific struct {
		Data struct {
			DataFile string `json:"data-file"`
		} `json:"data"`
	} `json:"format-specific"`
}

// Chain asks QEMU which images it opens for path read as format: the
// image, then each backing file (qemu-img info --backing-chain; -U, so an
// image in use by a running guest can be inspected). Call it only on a
// chain Dependencies found free of protocols: qemu-img opens every file
// named.
func Chain(ctx context.Context, path, format string) ([]ChainImage, error) {
	qemuImg, err := Find(Img)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, qemuImg, "info", "--backing-chain", "--output=json", "-U", "-f", format, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("qemu-img info %s: %v: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	var chain []ChainImage
	if err := json.Unmarshal(out, &chain); err != nil {
		return nil, fmt.Errorf("qemu-img info %s: %v", path, err)
	}
	return chain, nil
}
