package firstboot

import (
	"strings"
	"unicode/utf8"
)

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

// MaxText bounds the guest's text a boot keeps in total: every name and
// message of its events, stages and failures, and its stage and module,
// counted at their length whether or not they are interned (a guest
// choosing its strings can make each one unique: interning saves only
// what honest guests share). The per-item caps above still let a guest
// keep 64 × 2.3 KiB of events and 16 × 2.8 KiB of failures, 200 KB; an
// honest cloud-init boot keeps about 3 KB (its 40 events' names and
// descriptions, BenchmarkHeapPerBoot), a failed one a few KB more for
// its errors and the log tail of one: 16 KiB is five times what an
// honest boot holds, and a fleet of 10,000 hostile guests then holds at
// most 160 MiB of their text.
//
// Over the budget, fit gives up text in the order it matters least: the
// messages of the oldest events (a failure keeps its own message), the
// messages of the failures after the first (clipped to MaxBriefError),
// the oldest events, then the failures after the first. The first
// failure, which explains the boot, and the stages, at most 4 KiB of
// names, are always kept: what remains is at most 7.5 KiB.
const MaxText = 16 << 10

// MaxBriefError bounds the first error's message as a fleet row carries
// it (Tracker.Brief: GET /v1/boots, the web page's table), on one line:
// the whole failure is the instance's own Status.
const MaxBriefError = 256

// textOf is the guest text st holds, as MaxText counts it.
func textOf(st *Status) int {
	n := len(st.Stage) + len(st.Module)
	for i := range st.Events {
		n += len(st.Events[i].Name) + len(st.Events[i].Message)
	}
	for i := range st.Stages {
		n += len(st.Stages[i].Name)
	}
	for i := range st.Errors {
		n += failureText(&st.Errors[i])
	}
	return n
}

func failureText(f *Failure) int {
	return len(f.Stage) + len(f.Module) + len(f.Unit) + len(f.Message)
}

// fit gives up text until the boot's is within MaxText, in the order
// MaxText's comment says. b.mu is held.
func (b *boot) fit() {
	st := &b.st
	over := textOf(st) - MaxText
	for i := 0; over > 0 && i < len(st.Events); i++ {
		over -= len(st.Events[i].Message)
		st.Events[i].Message = ""
	}
	for i := len(st.Errors) - 1; over > 0 && i > 0; i-- {
		f := &st.Errors[i]
		short := clip(f.Message, MaxBriefError)
		over -= len(f.Message) - len(short)
		f.Message = short
	}
	drop := 0
	for ; over > 0 && drop < len(st.Events); drop++ {
		over -= len(st.Events[drop].Name) + len(st.Events[drop].Message)
	}
	st.Events = append(st.Events[:0], st.Events[drop:]...)
	keep := len(st.Errors)
	for ; over > 0 && keep > 1; keep-- {
		over -= failureText(&st.Errors[keep-1])
	}
	st.Errors = st.Errors[:keep]
}

// brief is f as a fleet row carries it: the line of its message that
// says why (Why), at most MaxBriefError bytes.
func (f Failure) brief() Failure {
	f.Message = clip(oneLine(Why(f.Message)), MaxBriefError)
	return f
}

// oneLine is s, when it has line breaks or tabs, with each run of
// whitespace one space and none at its ends (a log tail after a newline
// reads on).
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

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
