package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/vminit/vminit/internal/lib/termtext"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// How `instances status` prints first boots: a table like `kubectl get`,
// or one instance's detail like `kubectl describe`. Stage names, units
// and messages come from the guests: every one is printed through
// printable, so that no guest writes escape sequences to the operator's
// terminal.

// maxErrorWidth is how much of the first error a table row shows.
const maxErrorWidth = 60

// countOrder is the order of the counts line: outcomes first.
var countOrder = []firstboot.State{firstboot.Done, firstboot.Failed, firstboot.Stalled, firstboot.Running, firstboot.Fetched, firstboot.Pending}

// writeBootTable writes a row per instance (NAME AGENT STATE STAGE
// ELAPSED ERROR), elapsed times read at now, then the count of each state.
func writeBootTable(w io.Writer, sum firstboot.Summary, now time.Time) {
	if len(sum.Instances) == 0 {
		fmt.Fprintln(w, "No instances.")
		return
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tAGENT\tSTATE\tSTAGE\tELAPSED\tERROR")
	for i := range sum.Instances {
		st := &sum.Instances[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(st.Name), printable(st.Agent), st.State,
			printable(st.Where()), elapsed(st, now), cut(printable(st.FirstError()), maxErrorWidth))
	}
	tw.Flush()
	writeTrimmed(w, buf.Bytes())
	fmt.Fprintln(w, countsLine(sum.Counts))
}

// writeTrimmed writes table lines without the padding tabwriter leaves
// after an empty last column.
func writeTrimmed(w io.Writer, table []byte) {
	for line := range bytes.Lines(table) {
		w.Write(bytes.TrimRight(line, " \n"))
		io.WriteString(w, "\n")
	}
}

// elapsed is the boot's time since its first fetch, "-" for one never
// fetched.
func elapsed(st *firstboot.Status, now time.Time) string {
	if st.FirstFetch.IsZero() {
		return "-"
	}
	return humanDuration(st.Elapsed(now))
}

// countsLine is "3 done, 1 failed, 2 running, 1 pending": the states
// some instance is in.
func countsLine(counts map[firstboot.State]int) string {
	var parts []string
	for _, s := range countOrder {
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	return strings.Join(parts, ", ")
}

// humanDuration rounds d down as kubectl shows ages: 45s, 3m12s, 42m,
// 2h5m, 31h, 3d4h, 12d.
func humanDuration(d time.Duration) string {
	s := int64(d / time.Second)
	two := func(a int64, ua string, b int64, ub string) string {
		if b == 0 {
			return fmt.Sprintf("%d%s", a, ua)
		}
		return fmt.Sprintf("%d%s%d%s", a, ua, b, ub)
	}
	switch {
	case s < 0:
		return "0s"
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 10*60:
		return two(s/60, "m", s%60, "s")
	case s < 3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 10*3600:
		return two(s/3600, "h", s%3600/60, "m")
	case s < 48*3600:
		return fmt.Sprintf("%dh", s/3600)
	case s < 8*86400:
		return two(s/86400, "d", s%86400/3600, "h")
	}
	return fmt.Sprintf("%dd", s/86400)
}

// cut shortens s to n runes, marking the cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// printable is a guest's text on one line, with no escape sequence or
// control character a terminal would act on: the rule every place guest
// text leaves vminit for a reader shares (termtext.Line).
var printable = termtext.Line

// writeBootDetail writes one instance's first boot: its state and times,
// its stages with their durations, its errors and its last events (times
// relative to the first fetch).
func writeBootDetail(w io.Writer, st *firstboot.Status) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	state := string(st.State)
	if at := st.Where(); at != "" {
		state += " (" + printable(at) + ")"
	}
	fmt.Fprintf(tw, "Name:\t%s\n", printable(st.Name))
	if st.UID != "" {
		fmt.Fprintf(tw, "UID:\t%s\n", printable(st.UID))
	}
	for _, kv := range [][2]string{
		{"Agent", printable(st.Agent)}, {"State", state},
		{"First fetch", stamp(st.FirstFetch)}, {"Last event", stamp(st.LastEvent)}, {"Finished", stamp(st.Finished)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	if !st.Finished.IsZero() {
		fmt.Fprintf(tw, "Took:\t%s\n", humanDuration(st.Elapsed(st.Finished)))
	}
	tw.Flush()
	base := st.FirstFetch
	if base.IsZero() && len(st.Events) > 0 {
		base = st.Events[0].Time
	}
	if len(st.Stages) > 0 {
		fmt.Fprintln(&buf, "\nStages:")
		tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  STAGE\tSTARTED\tDURATION\tRESULT")
		for _, sg := range st.Stages {
			took := "-"
			if !sg.End.IsZero() {
				took = humanDuration(sg.Duration())
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", printable(sg.Name), offset(sg.Start, base), took, printable(sg.Result))
		}
		tw.Flush()
	}
	if len(st.Errors) > 0 {
		fmt.Fprintln(&buf, "\nErrors:")
		for _, f := range st.Errors {
			fmt.Fprintf(&buf, "  %s\n", printable(f.Where()))
			for line := range strings.Lines(f.Message) {
				if line = printable(line); line != "" {
					fmt.Fprintf(&buf, "    %s\n", line)
				}
			}
		}
	}
	if len(st.Events) > 0 {
		fmt.Fprintf(&buf, "\nEvents (the last %d):\n", len(st.Events))
		tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  TIME\tKIND\tNAME\tTOOK\tRESULT\tMESSAGE")
		for _, ev := range st.Events {
			name := printable(ev.Name)
			if ev.Kind == firstboot.KindFetch {
				name += fmt.Sprintf(" (%s, %s)", printable(ev.Dialect), requests(ev.Count))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", offset(ev.Time, base), ev.Kind, name, took(ev),
				printable(ev.Result), cut(printable(ev.Message), maxErrorWidth))
		}
		tw.Flush()
	}
	writeTrimmed(w, buf.Bytes())
	return nil
}

// took is how long a finish event's module or stage ran (an event that
// stands for its start too), or how long a run of fetches lasted.
func took(ev firstboot.Event) string {
	if ev.Until.IsZero() || ev.Time.IsZero() {
		return ""
	}
	return humanDuration(ev.Until.Sub(ev.Time))
}

// stamp is t in UTC, or "-".
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// offset is t as "+45s" after base.
func offset(t, base time.Time) string {
	if t.IsZero() || base.IsZero() {
		return "-"
	}
	return "+" + humanDuration(t.Sub(base))
}

// requests is a fetch event's count of requests, "1 request" or "N
// requests".
func requests(n int) string {
	if n == 1 {
		return "1 request"
	}
	return fmt.Sprintf("%d requests", n)
}
