//go:build unix

package inputfile

import "syscall"

// openFlags keep open(2) from blocking on a FIFO without a writer (and on
// some devices); on a regular file O_NONBLOCK changes nothing.
const openFlags = syscall.O_NONBLOCK
