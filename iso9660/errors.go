package iso9660

import "errors"

// Errors returned by this package. A per-file error from the Writer is an
// *[io/fs.PathError] that names the file and wraps one of these, so test it
// with [errors.Is].
//
// The first eight are the vocabulary this package shares with its twin,
// vfat: the same name means the same mistake in both. ErrTooDeep is ISO
// 9660's own.
var (
	// ErrInvalidName: an empty, "." or ".." component, a leading or trailing
	// slash, or a name Joliet cannot hold (more than 64 UCS-2 characters,
	// characters outside the Basic Multilingual Plane, invalid UTF-8, control
	// characters or one of * / : ; ? \).
	ErrInvalidName = errors.New("iso9660: invalid name")
	// ErrDuplicate: the name was added before, or a path uses a file as a
	// directory.
	ErrDuplicate = errors.New("iso9660: duplicate name")
	// ErrTooLarge: more than the format holds: a file of 4 GiB or more
	// (one extent holds 4 GiB - 1) or of negative size, more than 65,535
	// directories, or an image past 2^32 sectors.
	ErrTooLarge = errors.New("iso9660: too large")
	// ErrSizeMismatch: a file's reader yielded fewer or more bytes than its
	// declared size, or AddFile got a nil reader.
	ErrSizeMismatch = errors.New("iso9660: size mismatch")
	// ErrUnsupportedType: AddFS met something that is neither a regular file
	// nor a directory (a symlink, a device, ...), or AddFile got a mode with
	// type bits.
	ErrUnsupportedType = errors.New("iso9660: not a regular file")
	// ErrInvalidOptions: a bad Label, Alignment or ModTime in [Options].
	ErrInvalidOptions = errors.New("iso9660: invalid options")
	// ErrClosed: the Writer was used after Close.
	ErrClosed = errors.New("iso9660: writer closed")
	// ErrFormat: the Reader found something that is not a well-formed image
	// of the kind this package reads.
	ErrFormat = errors.New("iso9660: invalid image")

	// ErrTooDeep: a directory would be more than 8 levels deep (the root is
	// level 1), which ECMA-119 forbids without Rock Ridge relocation.
	ErrTooDeep = errors.New("iso9660: directory tree too deep")
)
