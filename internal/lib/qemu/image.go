package qemu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vminit/vminit/internal/lib/inputfile"
)

// Image formats DetectImage recognises as bootable disks.
const (
	QCOW2 = "qcow2"
	Raw   = "raw"
)

// Image is what DetectImage found in a disk image.
type Image struct {
	// Format is QCOW2 or Raw (the qemu-img -F value for an overlay).
	Format string
	// Kind says what is inside: "qcow2", "MBR partition table", "GPT
	// partition table" or "ext4 filesystem" (a bare filesystem, which
	// boots only with a kernel given on the command line).
	Kind string
	// BareFS is true for a filesystem without a partition table.
	BareFS bool
}

// ErrNotDiskImage is returned by DetectImage for a file that is not a disk
// image; the message says what the file looks like instead.
var ErrNotDiskImage = errors.New("not a disk image")

// headLen covers every magic DetectImage reads: ISO9660's volume
// descriptor at 32 KiB is the farthest.
const headLen = 0x8006

// Formats are the values DetectImage takes for a format the user gives.
var Formats = []string{QCOW2, Raw}

// DetectImage recognises a disk image by its magic numbers: qcow2, raw
// with an MBR or GPT partition table, or a bare ext2/3/4 filesystem.
// Anything else is refused with ErrNotDiskImage and a description of what
// the file seems to be (an ISO, a seed, an archive, a kernel...).
//
// A format given (QCOW2 or Raw) is not probed: a raw disk whose first
// bytes are a qcow2 header (a guest can write one) stays raw, and what it
// holds is the guest's. The file is opened with inputfile.Open: a FIFO or
// a device is refused at once instead of blocking.
func DetectImage(path, format string) (*Image, error) {
	f, err := inputfile.Open(path)
	if errors.Is(err, inputfile.ErrNotRegular) {
		return nil, fmt.Errorf("%w: %w", ErrNotDiskImage, err)
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, headLen)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	img, what := Identify(head[:n])
	switch format {
	case "":
	case Raw:
		if img == nil || img.Format != Raw {
			img = &Image{Format: Raw, Kind: "raw disk"}
		}
		return img, nil
	case QCOW2:
		if img == nil || img.Format != QCOW2 {
			return nil, fmt.Errorf("%s: --image-format qcow2, but it has no qcow2 header", path)
		}
	default:
		return nil, fmt.Errorf("%s: image format %q: want %s", path, format, strings.Join(Formats, " or "))
	}
	if img == nil {
		return nil, fmt.Errorf("%s: %w: it looks like %s; vminit run boots a qcow2 or raw disk image (a cloud image such as debian-12-genericcloud-amd64.qcow2)", path, ErrNotDiskImage, what)
	}
	return img, nil
}

// Identify recognises the start of a file (at least 0x8006 bytes, or the
// whole file when shorter). It returns the disk image, or nil and a
// description of what the bytes look like.
func Identify(b []byte) (*Image, string) {
	at := func(off int, magic string) bool {
		return len(b) >= off+len(magic) && string(b[off:off+len(magic)]) == magic
	}
	switch {
	case len(b) == 0:
		return nil, "an empty file"
	case at(0, "QFI\xfb"):
		return &Image{Format: QCOW2, Kind: "qcow2"}, ""
	case at(0x8001, "CD001"):
		return nil, "an ISO9660 image (a CD: a cloud-init seed, a config drive or an installer; a seed is built by vminit run itself)"
	case at(0, "KDMV"), at(0, "# Disk DescriptorFile"):
		return nil, "a VMDK image (convert it: qemu-img convert -O qcow2 IN.vmdk OUT.qcow2)"
	case at(0, "vhdxfile"):
		return nil, "a VHDX image (convert it: qemu-img convert -O qcow2 IN.vhdx OUT.qcow2)"
	case at(0x40, "\x7f\x10\xda\xbe"):
		return nil, "a VirtualBox VDI image (convert it: qemu-img convert -O qcow2 IN.vdi OUT.qcow2)"
	case at(0, "\x1f\x8b"):
		return nil, "a gzip-compressed file (decompress it first)"
	case at(0, "\xfd7zXZ\x00"):
		return nil, "an xz-compressed file (decompress it first: unxz)"
	case at(0, "\x28\xb5\x2f\xfd"):
		return nil, "a zstd-compressed file (decompress it first: unzstd)"
	case at(0, "BZh"):
		return nil, "a bzip2-compressed file (decompress it first)"
	case at(257, "ustar"):
		return nil, "a tar archive (extract the disk image from it first)"
	case at(0, "PK\x03\x04"):
		return nil, "a zip archive (extract the disk image from it first)"
	case at(0, "\x7fELF"):
		return nil, "an ELF program or kernel (a kernel goes to --kernel)"
	case at(0x202, "HdrS"):
		return nil, "a Linux kernel (bzImage; give it with --kernel)"
	case at(0, "070701"), at(0, "070707"):
		return nil, "a cpio archive (an initramfs? give it with --initrd)"
	case at(0x200, "EFI PART"):
		return &Image{Format: Raw, Kind: "GPT partition table"}, ""
	}
	if fat(b) {
		return nil, "a FAT filesystem image (a VFAT cloud-init seed?)"
	}
	if at(510, "\x55\xaa") {
		return &Image{Format: Raw, Kind: "MBR partition table"}, ""
	}
	if kind := ext(b); kind != "" {
		return &Image{Format: Raw, Kind: kind + " filesystem", BareFS: true}, ""
	}
	if text(b) {
		switch {
		case at(0, "#cloud-config"):
			return nil, "a cloud-config file (it goes into a spec's userData)"
		case bytes.Contains(b[:min(len(b), 512)], []byte(`"ignition"`)):
			return nil, "an Ignition config"
		case bytes.Contains(b[:min(len(b), 512)], []byte("apiVersion")):
			return nil, "a YAML document (an instance spec is the first argument; the disk image goes to --image)"
		}
		return nil, "a text file"
	}
	return nil, "data of an unknown kind (no qcow2 header, partition table or ext filesystem)"
}

// fat reports a FAT boot sector (a VFAT seed has no partition table, but
// the same 0x55AA signature as an MBR).
func fat(b []byte) bool {
	if len(b) < 512 || (b[0] != 0xeb && b[0] != 0xe9) {
		return false
	}
	return bytes.HasPrefix(b[54:], []byte("FAT")) || bytes.HasPrefix(b[82:], []byte("FAT32"))
}

// ext recognises an ext2/3/4 superblock (at 1024; magic 0xEF53 at +56)
// and names the generation from its feature flags.
func ext(b []byte) string {
	const sb = 1024
	if len(b) < sb+0x64 || binary.LittleEndian.Uint16(b[sb+56:]) != 0xEF53 {
		return ""
	}
	compat := binary.LittleEndian.Uint32(b[sb+0x5c:])
	incompat := binary.LittleEndian.Uint32(b[sb+0x60:])
	switch {
	case incompat&0x2c0 != 0: // extents, 64bit, flex_bg
		return "ext4"
	case compat&0x4 != 0: // has_journal
		return "ext3"
	}
	return "ext2"
}

// text reports bytes that look like text: no NUL in the first 512 bytes.
func text(b []byte) bool {
	return !bytes.Contains(b[:min(len(b), 512)], []byte{0})
}
