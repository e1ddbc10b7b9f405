package mdserver

import (
	"slices"
	"strconv"
	"time"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// The first-boot series of Metrics: the guests' writes, the time first
// boots take, and the fleet by first-boot state.

// writeKinds are the guests' writes, by path.
var writeKinds = [...]struct{ path, kind string }{
	{bootreport.EventsPath, "event"},
	{bootreport.ReportPath, "report"},
}

// bootAgents and bootOutcomes label the first-boot histogram.
var (
	bootAgents   = [...]string{firstboot.AgentCloudInit, firstboot.AgentIgnition}
	bootOutcomes = [...]firstboot.State{firstboot.Done, firstboot.Failed}
)

// bootBuckets, in seconds: a first boot takes from seconds (Ignition on a
// small config) to tens of minutes (cloud-init upgrading packages).
var bootBuckets = [...]float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800, 3600}

// observeWrite counts a write to path answered status (204: accepted).
func (m *Metrics) observeWrite(path string, status int) {
	for i, k := range writeKinds {
		if k.path == path {
			m.writes[i][btoi(status != 204)].Add(1)
			return
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ObserveBoot adds a first boot that ended to the histogram, from its
// first fetch to its end: give it as firstboot.Options.OnFinish. A boot
// the server never saw fetched (a report is all it heard) has no
// duration, and is not observed.
func (m *Metrics) ObserveBoot(st firstboot.Status) {
	ai := slices.Index(bootAgents[:], st.Agent)
	oi := slices.Index(bootOutcomes[:], st.State)
	if ai < 0 || oi < 0 || st.FirstFetch.IsZero() || st.Finished.IsZero() {
		return
	}
	d := st.Finished.Sub(st.FirstFetch)
	bi := len(bootBuckets)
	for i, b := range bootBuckets {
		if d.Seconds() <= b {
			bi = i
			break
		}
	}
	m.boots[ai][oi][bi].Add(1)
	m.bootSums[ai][oi].Add(uint64(d / time.Millisecond))
}

// writeFirstBoot writes the first-boot series.
func (m *Metrics) writeFirstBoot(p func(format string, args ...any)) {
	p("# HELP vminit_first_boot_writes_total First-boot events and reports guests posted, accepted or refused.\n# TYPE vminit_first_boot_writes_total counter\n")
	for i, k := range writeKinds {
		for r, result := range []string{"accepted", "refused"} {
			p("vminit_first_boot_writes_total{kind=%q,result=%q} %d\n", k.kind, result, m.writes[i][r].Load())
		}
	}
	p("# HELP vminit_first_boot_duration_seconds Time from an instance's first fetch to the end of its first boot, by agent and outcome.\n# TYPE vminit_first_boot_duration_seconds histogram\n")
	for ai, agent := range bootAgents {
		for oi, outcome := range bootOutcomes {
			var cum uint64
			for bi := range len(bootBuckets) + 1 {
				cum += m.boots[ai][oi][bi].Load()
				le := "+Inf"
				if bi < len(bootBuckets) {
					le = strconv.FormatFloat(bootBuckets[bi], 'g', -1, 64)
				}
				p("vminit_first_boot_duration_seconds_bucket{agent=%q,outcome=%q,le=%q} %d\n", agent, outcome, le, cum)
			}
			p("vminit_first_boot_duration_seconds_sum{agent=%q,outcome=%q} %g\n", agent, outcome, float64(m.bootSums[ai][oi].Load())/1e3)
			p("vminit_first_boot_duration_seconds_count{agent=%q,outcome=%q} %d\n", agent, outcome, cum)
		}
	}
	h := m.h.Load()
	if h == nil {
		return
	}
	snap := h.src.Snapshot()
	counts := h.boots.Counts(snap.Incarnation)
	heard := 0
	for _, st := range firstboot.States {
		if st != firstboot.Pending {
			heard += counts[st]
		}
	}
	counts[firstboot.Pending] = max(0, snap.Len()-heard)
	p("# HELP vminit_first_boots Instances served, by the state of their first boot.\n# TYPE vminit_first_boots gauge\n")
	for _, st := range firstboot.States {
		p("vminit_first_boots{state=%q} %d\n", st, counts[st])
	}
}
