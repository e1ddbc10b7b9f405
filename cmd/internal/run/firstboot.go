package run

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// With Serve the guest's first boot is also seen from the other side: the
// in-process metadata server's tracker (package mdserver/firstboot) counts
// the guest's fetches and takes the events and the final report its agent
// posts to bootreport.EventsPath and ReportPath through the relay, as
// `vminit serve` does for a fleet. The console stays the signal that the
// agent finished; the server's view is added to the Result, and a boot it
// saw fail is a failed run.
//
// The console's last word comes before the report: cloud-init prints its
// final message inside modules-final and its report unit runs after
// cloud-final.service; Ignition completes in the initramfs, and its
// completion unit posts once the system is up. So WaitFirstBoot waits for
// the report (Options.ReportWait at most) before it reads the server's
// status.

// tracker is the in-process server's tracker of the guest's first boot.
func (c *config) tracker() *firstboot.Tracker {
	return mdserver.NewTracker(firstboot.Options{StallAfter: c.StallAfter})
}

// FirstBoot returns the guest's first boot as the in-process metadata
// server tracks it (Stalled read at the run's StallAfter), and false
// without Serve. Its strings are the guest's: print them with care
// (Result.FirstBoot's stage, module and failures are made printable).
func (g *Guest) FirstBoot() (firstboot.Status, bool) {
	if g.relay == nil {
		return firstboot.Status{}, false
	}
	return g.relay.firstBoot(), true
}

// firstBoot is the served instance's status.
func (r *relay) firstBoot() firstboot.Status {
	st, _ := r.h.Boot(r.name)
	return st
}

// addFirstBoot sets res.FirstBoot (Serve only) after waiting, when the
// console said the agent finished and the guest has fetched its data, for
// the guest's final report.
func (g *Guest) addFirstBoot(ctx context.Context, res *Result) {
	if g.relay == nil {
		return
	}
	st := g.relay.firstBoot()
	missing := ""
	if res.Err == nil && res.Panic == "" && st.State != firstboot.Pending && !reported(&st) {
		st, missing = g.awaitReport(ctx)
	}
	if missing != "" {
		g.say("%s", missing) // a warning is said above the result
	}
	res.addFirstBoot(st, missing)
}

// awaitReport waits for the guest's report to reach the tracker, up to
// Options.ReportWait within the run's Timeout, or until QEMU exits or ctx
// ends. It returns the status, and why the report is missing ("" when it
// came).
func (g *Guest) awaitReport(ctx context.Context) (firstboot.Status, string) {
	wait := min(g.c.ReportWait, time.Until(g.start.Add(g.c.Timeout)))
	g.say("waiting for the guest's first-boot report to reach the metadata server (up to %v)", wait.Round(time.Second))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	boots := g.relay.h.Boots()
	for {
		changed := boots.Changes() // before the read: a change after it closes this one
		st := g.relay.firstBoot()
		if reported(&st) {
			return st, ""
		}
		select {
		case <-changed:
			continue
		case <-timer.C:
		case <-g.exited:
		case <-ctx.Done():
		}
		if st = g.relay.firstBoot(); reported(&st) {
			return st, ""
		}
		return st, fmt.Sprintf("the guest's first-boot report did not reach the metadata server (waited %v; QEMU %s)",
			wait.Round(time.Second), g.qemuState())
	}
}

// serverSaw says how far the metadata server saw the boot get, for a
// timeout's message ("" without Serve).
func (g *Guest) serverSaw() string {
	st, ok := g.FirstBoot()
	switch {
	case !ok:
		return ""
	case st.State == firstboot.Pending:
		return "; the metadata server never heard from the guest"
	}
	s := "; the metadata server saw the boot " + string(st.State)
	if where := strings.TrimSuffix(st.Stage+"/"+st.Module, "/"); where != "" {
		s += " at " + printable(where)
	}
	return s + fmt.Sprintf(", last heard from it %v ago", time.Since(st.LastEvent).Round(time.Second))
}

// qemuState says whether QEMU still runs, for a message.
func (g *Guest) qemuState() string {
	select {
	case <-g.exited:
		return "exited"
	default:
		return "running"
	}
}

// reported reports whether the agent's final report is among st's events
// (the last ones: the report is one of the last a boot posts).
func reported(st *firstboot.Status) bool {
	return slices.ContainsFunc(st.Events, func(ev firstboot.Event) bool { return ev.Kind == firstboot.KindReport })
}

// addFirstBoot adds the server's view to the console's result: the
// status, its strings made printable; a failed boot's failures as errors
// (OK false; a long message shortened); a missing report as a warning.
func (res *Result) addFirstBoot(st firstboot.Status, missing string) {
	st.Stage, st.Module = printable(st.Stage), printable(st.Module)
	st.Errors = slices.Clone(st.Errors)
	for i := range st.Errors {
		f := &st.Errors[i]
		f.Stage, f.Module, f.Unit, f.Message = printable(f.Stage), printable(f.Module), printable(f.Unit), printableLines(f.Message)
	}
	res.FirstBoot = &st
	if st.State == firstboot.Failed {
		res.OK = false
		for _, f := range st.Errors {
			f.Message = shortened(f.Message)
			res.Errors = append(res.Errors, "metadata server: "+failureText(f))
		}
		if len(st.Errors) == 0 {
			res.Errors = append(res.Errors, "metadata server: the first boot failed")
		}
	}
	if missing != "" {
		res.Warnings = append(res.Warnings, missing)
	}
}

// failureText is "where: message", as Status.FirstError says the first.
func failureText(f firstboot.Failure) string {
	if f.Message == "" {
		return f.Where()
	}
	return f.Where() + ": " + f.Message
}

// errorTailLines is how many of a message's last lines an error keeps
// besides its first: a report's failure carries the tail of the agent's
// log (2 KiB: the SSH host keys' randomart and all), whose end says what
// failed. Result.FirstBoot keeps the whole message.
const errorTailLines = 6

// shortened is a message's first line and its last errorTailLines.
func shortened(msg string) string {
	lines := strings.Split(msg, "\n")
	if len(lines) <= 1+errorTailLines {
		return msg
	}
	return lines[0] + "\n…\n" + strings.Join(lines[len(lines)-errorTailLines:], "\n")
}

// printableLines is printable for each line of a multi-line text (a log
// tail a guest reported), keeping the line breaks.
func printableLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}
