package mdserver

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestSetGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "77") // the runtime read GOGC at start: emulate its choice
	debug.SetGCPercent(77)
	if got := SetGC(); got != 77 {
		t.Errorf("with GOGC set: %d, want it left at 77", got)
	}
	os.Unsetenv("GOGC")
	if got, now := SetGC(), debug.SetGCPercent(100); got != GCPercent || now != GCPercent {
		t.Errorf("without GOGC: SetGC says %d, the runtime has %d; want %d", got, now, GCPercent)
	}
}
