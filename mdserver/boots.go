package mdserver

import (
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/spec"
)

// The fleet's first boots as this handler knows them: every instance the
// store serves, pending until its guest is heard from (Options.Boots
// holds the rest). The admin API, its web page and the metrics read them
// here.

// NewTracker returns a tracker of first boots for Options.Boots: opts,
// told which agents report their first boot (spec.ReportsFirstBoot), so
// that a guest that cannot (cloudbase-init) is never taken for stalled.
// Every tracker of a served fleet is made here.
func NewTracker(opts firstboot.Options) *firstboot.Tracker {
	opts.Reports = spec.ReportsFirstBoot
	return firstboot.New(opts)
}

// Boots returns the tracker of the handler's first boots.
func (h *Handler) Boots() *firstboot.Tracker { return h.boots }

// Boot returns the first boot of the instance called name, and false if
// the store serves no such instance.
func (h *Handler) Boot(name string) (firstboot.Status, bool) {
	rec, ok := h.src.Snapshot().ByName(name)
	if !ok {
		return firstboot.Status{}, false
	}
	return h.boots.Status(rec.Name, rec.UID, rec.Agent()), true
}

// Fleet returns the first boots of every instance the store serves that
// pass f (without their stages and events), and the count of each state
// among them.
func (h *Handler) Fleet(f firstboot.Filter) firstboot.Summary {
	snap := h.src.Snapshot()
	now := h.opts.Now()
	names := snap.Names()
	rows := make([]firstboot.Status, 0, len(names))
	for _, name := range names {
		rec, ok := snap.ByName(name)
		if !ok {
			continue
		}
		rows = append(rows, h.boots.Brief(rec.Name, rec.UID, rec.Agent()))
	}
	return firstboot.Summarize(rows, f, now)
}
