package vfat

import (
	"errors"
	"io/fs"
)

// Sentinel errors. The writer and reader return them wrapped in an
// *fs.PathError whose Path names the file or directory concerned, so
// errors.Is works and the message says which file is at fault.
var (
	// ErrInvalidName: empty or "."/".." element, absolute or unclean path,
	// invalid UTF-8, a control character or one of "*/:<>?\|, or a trailing
	// dot or space (which Windows and Linux strip on lookup).
	ErrInvalidName = errors.New("invalid VFAT name")
	// ErrNameTooLong: a path element needs more than 255 UTF-16 units.
	ErrNameTooLong = errors.New("name longer than 255 UTF-16 units")
	// ErrDuplicate: the name already exists in its directory. FAT compares
	// names case-insensitively, so "User-Data" duplicates "user-data".
	ErrDuplicate = errors.New("duplicate name (FAT names are case-insensitive)")
	// ErrInvalidLabel: Options.Label is longer than 11 bytes or holds a
	// character that a FAT label cannot.
	ErrInvalidLabel = errors.New("invalid volume label")
	// ErrInvalidSize: Options.Size is negative, not a multiple of Align or
	// above MaxSize; or a file size is negative or 4 GiB or more.
	ErrInvalidSize = errors.New("invalid size")
	// ErrNoSpace: the content does not fit in Options.Size; the message
	// gives the size that would fit.
	ErrNoSpace = errors.New("content does not fit")
	// ErrTooManyEntries: a directory needs more than 65,536 entries (the
	// root more than 65,520).
	ErrTooManyEntries = errors.New("too many directory entries")
	// ErrSizeMismatch: a reader delivered more or fewer bytes than declared.
	ErrSizeMismatch = errors.New("content length differs from declared size")
	// ErrUnsupportedType: AddFS met something other than a regular file or
	// a directory (a symlink, device, …).
	ErrUnsupportedType = errors.New("not a regular file or directory")
	// ErrClosed: the Writer has already been closed.
	ErrClosed = errors.New("writer already closed")

	// ErrFormat: Open found bytes that are not a FAT12/16 volume this
	// package can read, or that are inconsistent (bad BPB, cluster chain out
	// of range, looped or cross-linked, sizes disagreeing with chains,
	// unusable names).
	ErrFormat = errors.New("not a valid FAT12/FAT16 volume")
)

func pathErr(op, path string, err error) error {
	if path == "" {
		path = "."
	}
	return &fs.PathError{Op: "vfat: " + op, Path: path, Err: err}
}
