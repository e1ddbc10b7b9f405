// Package parallel runs independent jobs on a bounded number of
// goroutines: the stores parse thousands of spec documents at once, and
// YAML parsing is CPU-bound, so one worker per core is the useful bound.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Map calls f(i) for every i in [0, n) on at most workers goroutines
// (GOMAXPROCS when workers <= 0) and returns the results in order.
func Map[T any](n, workers int, f func(i int) T) []T {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	out := make([]T, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				out[i] = f(i)
			}
		})
	}
	wg.Wait()
	return out
}
