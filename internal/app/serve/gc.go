package serve

import (
	"os"
	"runtime/debug"
)

// GCPercent is vminit serve's garbage-collection target (GOGC) when the
// environment does not set one. The loaded instances are a large heap
// that lives as long as the process (about 110 MB for 100,000), and every
// collection marks all of it, while requests make little garbage: with
// Go's default of 100 a boot storm of 1,000 VMs triggers a collection
// that takes about 190 ms of one core, and its requests wait. At 200,
// collections are half as frequent, for a peak heap of three times the
// live one instead of two (BenchmarkStorm and docs/benchmarks.md: the
// p99 at 32 concurrent VMs, pinned, fell from 6.1–9.1 ms to 4.6–6.9 ms;
// peak RSS with 100,000 instances rose from 218–225 to 282 MB).
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
