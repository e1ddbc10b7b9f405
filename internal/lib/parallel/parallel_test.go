package parallel

import (
	"sync/atomic"
	"testing"
)

func TestMap(t *testing.T) {
	var running, peak atomic.Int64
	got := Map(1000, 3, func(i int) int {
		if r := running.Add(1); r > peak.Load() {
			peak.Store(r)
		}
		defer running.Add(-1)
		return i * i
	})
	for i, v := range got {
		if v != i*i {
			t.Fatalf("result %d = %d", i, v)
		}
	}
	if peak.Load() > 3 {
		t.Errorf("%d jobs ran at once; the bound is 3", peak.Load())
	}
	if len(Map(0, 0, func(int) int { return 1 })) != 0 {
		t.Error("no jobs, yet results")
	}
}
