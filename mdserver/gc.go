package mdserver

import (
	"os"
	"runtime/debug"
)

// GCPercent is the metadata server's garbage-collection target (GOGC) when
// the environment does not set one: a collection when the heap has grown by
// one and a half times the live one. It is here, beside the handler whose
// heap it was measured on, so that the programs that serve (vminit serve,
// vminit-server, vminit-node) and the benchmarks that measure them
// (bench/mdserver, this package's) apply the same setting. The loaded instances are a heap that lives as long
// as the process and every collection marks all of it, while a boot
// storm makes garbage (a guest's first fetch renders): at 100,000
// instances (~110 MB live) that is about twice a 1,000-VM storm's
// garbage (~80 MB), so most storms see no collection. It was 200 while every
// instance was a decoded spec (2.6 KB of pointers each); an idle instance
// is now its document (registry.Index.DecodeDeferred, 1.2 KB, 40 % of it
// bytes the collector does not scan), and 200's headroom, twice the live
// heap, would be most of its resident memory (docs/benchmarks.md,
// "Beside the peers"; docs/design.md, "Serving a boot storm").
const GCPercent = 150

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
