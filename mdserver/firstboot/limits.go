package firstboot

import "unicode/utf8"

// What a guest can make the tracker hold for its instance. A boot of
// cloud-init posts about 40 events; the ring keeps the last MaxEvents,
// and the failures and stages past their caps are dropped (the first
// ones are the ones that explain a failure).
const (
	MaxEvents   = 64
	MaxFailures = 16
	MaxStages   = 16
	MaxName     = 256  // bytes of an event name, stage, module or unit
	MaxMessage  = 2048 // bytes of a message
)

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
