package serve

import (
	"os"
	"runtime/debug"
)

// GCPercent is vminit serve's garbage-collection target (GOGC) when the
// environment does not set one: Go's default, a peak heap of twice the
// live one. It was 200 while every loaded instance was a decoded spec
// (2.6 KB of pointers an instance, 250 MB at 100,000 that every collection
// marked): collecting half as often kept those collections out of most
// boot storms, for three times the live heap. An idle instance is now its
// document (registry.Index.DecodeDeferred: 1.2 KB, 40 % of it bytes the
// collector does not scan), so a collection marks about a third of what
// it did, and 200 would be most of the resident memory an instance costs
// (docs/benchmarks.md, "Beside the peers"; docs/design.md, "Serving a
// boot storm").
const GCPercent = 100

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
