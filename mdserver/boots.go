package mdserver

import (
	"github.com/vminit/vminit/mdserver/firstboot"
)

// The fleet's first boots as this handler knows them: every instance the
// store serves, pending until its guest is heard from (Options.Boots
// holds the rest). The admin API, its web page and the metrics read them
// here.

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
