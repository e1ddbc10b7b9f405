package vfat

import (
	"errors"
	"io/fs"
)

// Errors returned by this package. The writer and reader return them
// wrapped in an *[io/fs.PathError] whose Path names the file or directory
// concerned, so test them with [errors.Is]; the message says which file is
// at fault.
//
// The first eight are the vocabulary this package shares with its twin,
// iso9660: the same name means the same mistake in both. ErrNoSpace is
// FAT's own: an ISO image has no fixed size to run out of.
var (
	// ErrInvalidName: empty or "."/".." element, absolute or unclean path,
	// invalid UTF-8, a control character or one of "*/:<>?\|, a trailing
	// dot or space (which Windows and Linux strip on lookup), or an element
	// of more than 255 UTF-16 units.
	ErrInvalidName = errors.New("invalid VFAT name")
	// ErrDuplicate: the name already exists in its directory. FAT compares
	// names case-insensitively, so "User-Data" duplicates "user-data".
	ErrDuplicate = errors.New("duplicate name (FAT names are case-insensitive)")
	// ErrTooLarge: more than the format holds: a file of 4 GiB or more or
	// of negative size, a directory of more than 65,536 entries (the root
	// more than 65,520), or names that leave no unique 8.3 alias.
	ErrTooLarge = errors.New("too large")
	// ErrSizeMismatch: a reader delivered more or fewer bytes than declared,
	// or AddFile got a nil reader for a file that is not empty.
	ErrSizeMismatch = errors.New("content length differs from declared size")
	// ErrUnsupportedType: AddFS met something other than a regular file or
	// a directory (a symlink, device, …), or AddFile got a mode with type
	// bits.
	ErrUnsupportedType = errors.New("not a regular file or directory")
	// ErrInvalidOptions: Options.Label is longer than 11 bytes or holds a
	// character that a FAT label cannot, or Options.Size is negative, not a
	// multiple of Align or above MaxSize.
	ErrInvalidOptions = errors.New("invalid options")
	// ErrClosed: the Writer has already been closed.
	ErrClosed = errors.New("writer already closed")
	// ErrFormat: NewReader found bytes that are not a FAT12/16 volume this
	// package can read, or that are inconsistent (bad BPB, cluster chain out
	// of range, looped or cross-linked, sizes disagreeing with chains,
	// unusable names).
	ErrFormat = errors.New("not a valid FAT12/FAT16 volume")

	// ErrNoSpace: the content does not fit in Options.Size; the message
	// gives the size that would fit.
	ErrNoSpace = errors.New("content does not fit")
)

func pathErr(op, path string, err error) error {
	if path == "" {
		path = "."
	}
	return &fs.PathError{Op: "vfat: " + op, Path: path, Err: err}
}
