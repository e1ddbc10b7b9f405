package serve

import (
	"os"
	"runtime/debug"
)

// GCPercent is vminit serve's garbage-collection target (GOGC) when the
// environment does not set one. The loaded instances are a large heap
// that lives as long as the process and every collection marks all of it,
// while requests make little garbage: collecting half as often as Go's
// default shortens the tail of a boot storm, for a peak heap of three
// times the live one instead of two (docs/design.md, "Serving a boot
// storm"; the numbers are in docs/benchmarks.md).
const GCPercent = 200

// SetGC applies GCPercent unless GOGC is set, and returns the percentage in
// effect (-1: collection off).
func SetGC() int {
	if _, ok := os.LookupEnv("GOGC"); ok {
		p := debug.SetGCPercent(100) // read back what GOGC chose
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(GCPercent)
	return GCPercent
}
