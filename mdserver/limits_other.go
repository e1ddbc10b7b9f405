//go:build !unix

package mdserver

// openFileLimit: Windows has no RLIMIT_NOFILE; DefaultTotal uses its
// maximum.
func openFileLimit() (uint64, bool) { return 0, false }
