package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/cmd/internal/cmdkit"
	"github.com/vminit/vminit/mdserver/admin"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// ExitStillGoing is `instances status --wait`'s exit code when --timeout
// passed (or Ctrl-C came) before every instance finished its first boot:
// not 2, a usage error's, so that a script can tell a typo from a slow
// fleet.
const ExitStillGoing = 3

// statusClock is the clock elapsed times are read at (tests fix it).
var statusClock = time.Now

type statusFlags struct {
	watch, wait bool
	timeout     time.Duration
	states      string
	agent       string
	report      reportFlags
}

func (c *adminClient) statusCommand() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status [NAME...]",
		Short: "Show the instances' first boots: state, stage, elapsed time, first error",
		Long: `Status shows each instance's first boot as the metadata server saw it: its
state (pending: never fetched; fetched; running, with its stage and module;
stalled: silent too long; done; failed, with what failed), the time since
its first fetch, and its first error. A guest whose agent sends no
first-boot report (cloudbase-init) stays pending or fetched, never stalled,
and its STAGE says so ("cloudbase-init sends no first-boot report"; in
--json, "noReport": true). Without NAME, a table of every instance (--state
and --agent select) and the count of each state; with one NAME, that
instance's stages, errors and last events (its row with --watch or --wait);
with several, their rows.

--watch prints the table again at each change (in place on a terminal)
until Ctrl-C. --wait waits for the selected (or named) instances to finish:
it exits 0 when every one is done, 1 as soon as every one has finished and
any failed (each failed one named on stderr with its first error), and 3
when --timeout passes first (or on Ctrl-C), naming those still going: the
fleet's 'vminit run'. It does not wait for an instance whose agent sends
no report, and names it once on stderr ("NAME: cloudbase-init sends no
first-boot report: not waited for"); when only such instances are
selected there is nothing to wait for, and it exits 2, as for a usage
error. --json prints the summary (with one NAME, the status) as JSON; with
--watch, one document a line.

With --kubeconfig, the statuses are those the servers wrote into the
Instances' status.`,
		Example: `  vminit instances status
  vminit instances status web-1
  vminit instances status --state failed,stalled --agent cloud-init
  vminit instances status --watch
  vminit instances status web-1 web-2 --wait --timeout 15m`,
		RunE:              func(cmd *cobra.Command, args []string) error { return c.status(cmd, args, &f) },
		ValidArgsFunction: c.completeNames(0),
	}
	fl := cmd.Flags()
	fl.BoolVarP(&f.watch, "watch", "w", false, "print the table again at each change, until Ctrl-C (or --wait is satisfied)")
	fl.BoolVar(&f.wait, "wait", false, "wait for the first boots to finish: exit 0 when all are done, 1 when any failed, 3 on --timeout (2 is a usage error, or only instances that send no report selected)")
	fl.DurationVar(&f.timeout, "timeout", 0, "with --wait: give up after this long (exit 3), e.g. 15m (default: no limit)")
	fl.StringVar(&f.states, "state", "", "only instances in these states, comma-separated: "+strings.Join(stateList(), ", "))
	fl.StringVar(&f.agent, "agent", "", "only instances of this agent: "+strings.Join(firstboot.Agents, ", "))
	f.report.register(cmd)
	cmd.RegisterFlagCompletionFunc("state", completeList(stateList()))
	cmd.RegisterFlagCompletionFunc("agent", cobra.FixedCompletions(firstboot.Agents, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// completeList completes a comma-separated list of values: the values
// not yet given, after those that are (--state failed,st<TAB>).
func completeList(values []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		i := strings.LastIndex(prefix, ",")
		given, last := strings.Split(prefix[:i+1], ","), prefix[i+1:]
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(v, last) && !slices.Contains(given, v) {
				out = append(out, prefix[:i+1]+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

func stateList() []string {
	out := make([]string, len(firstboot.States))
	for i, s := range firstboot.States {
		out[i] = string(s)
	}
	return out
}

// filter is the Filter --state and --agent describe, read by the rules
// of the admin API's query (firstboot.ParseFilter), so that a flag means
// what the query parameter does.
func (f *statusFlags) filter() (firstboot.Filter, error) {
	q := url.Values{}
	if f.states != "" {
		q.Set(firstboot.QueryState, f.states)
	}
	if f.agent != "" {
		q.Set(firstboot.QueryAgent, f.agent)
	}
	filter, err := firstboot.ParseFilter(q)
	if err != nil {
		// Each problem starts with its parameter, which is the flag's name.
		return filter, usagef("--%s", strings.ReplaceAll(err.Error(), "\n", "; --"))
	}
	return filter, nil
}

func (c *adminClient) status(cmd *cobra.Command, args []string, f *statusFlags) error {
	asJSON, err := f.report.json()
	if err != nil {
		return err
	}
	filter, err := f.filter()
	if err != nil {
		return err
	}
	if f.timeout < 0 || f.timeout > 0 && !f.wait {
		return usagef("--timeout is a positive duration, with --wait")
	}
	names := make([]string, len(args))
	for i, a := range args {
		names[i] = c.instanceName(a)
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	if l, ok := c.api.(*admin.Local); ok {
		// A cluster's statuses are those the servers wrote to it.
		if err := l.FollowBoots(ctx); err != nil {
			return err
		}
	}
	out := &statusOutput{w: cmd.OutOrStdout(), asJSON: asJSON, terminal: cmdkit.IsTerminal(cmd.OutOrStdout())}
	switch {
	case f.wait || f.watch:
		return c.follow(ctx, cmd, names, filter, f, out)
	case len(names) == 1:
		st, err := c.api.Boot(ctx, names[0])
		if err != nil {
			return err
		}
		if asJSON {
			return out.json(st, true)
		}
		return writeBootDetail(out.w, st)
	}
	all, err := c.api.Boots(ctx, filter)
	if err != nil {
		return err
	}
	sum, err := only(*all, names)
	if err != nil {
		return err
	}
	return out.summary(sum, false)
}

// follow is status with --watch or --wait: it reads the watch stream
// (never polls) until Ctrl-C, --timeout, or --wait's end.
func (c *adminClient) follow(ctx context.Context, cmd *cobra.Command, names []string, filter firstboot.Filter, f *statusFlags, out *statusOutput) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	var last *firstboot.Summary
	told := map[string]bool{} // the instances not waited for, named once
	err := c.api.WatchBoots(ctx, filter, func(sum firstboot.Summary) error {
		sum, err := only(sum, names)
		if err != nil {
			return err
		}
		last = &sum
		if f.wait {
			tellNotWaited(cmd.ErrOrStderr(), sum, told)
		}
		if f.watch {
			if err := out.summary(sum, true); err != nil {
				return err
			}
		}
		switch {
		case !f.wait:
		case len(sum.Instances) > 0 && !slices.ContainsFunc(sum.Instances, waitedFor):
			return usagef("--wait: nothing to wait for: no selected instance's agent sends a first-boot report")
		case ended(sum):
			return errWaitOver
		}
		return nil
	})
	switch {
	case errors.Is(err, errWaitOver):
		return c.waitOver(cmd, *last, f, out)
	case err != nil && ctx.Err() == nil:
		return err
	case !f.wait:
		return nil // the user's Ctrl-C ends a watch
	}
	if last != nil && !f.watch {
		out.summary(*last, false)
	}
	why := "interrupted"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "timed out after " + f.timeout.String()
	}
	return exitError{Code: ExitStillGoing, Err: fmt.Errorf("%s: still going: %s", why, stillGoing(last))}
}

// errWaitOver ends a watch whose instances have all finished.
var errWaitOver = errors.New("every first boot finished")

// ended reports whether every instance of sum --wait waits for finished
// its first boot. A selection with none has not: --wait waits for
// instances to be added (follow refuses a selection of only instances
// that send no report: nothing to wait for).
func ended(sum firstboot.Summary) bool {
	return slices.ContainsFunc(sum.Instances, waitedFor) && !slices.ContainsFunc(sum.Instances, going)
}

// waitedFor reports whether --wait waits for st's end: not when its agent
// sends no first-boot report (cloudbase-init), whose end nobody hears of.
func waitedFor(st firstboot.Status) bool { return !st.NoReport }

// going reports whether --wait still waits for st.
func going(st firstboot.Status) bool { return waitedFor(st) && !st.State.Terminal() }

// tellNotWaited names on w, once each (told holds those named), the
// instances of sum --wait does not wait for, and why.
func tellNotWaited(w io.Writer, sum firstboot.Summary, told map[string]bool) {
	for _, st := range sum.Instances {
		if !waitedFor(st) && !told[st.Name] {
			told[st.Name] = true
			fmt.Fprintf(w, "%s: %s: not waited for\n", printable(st.Name), printable(st.Unreported()))
		}
	}
}

// waitOver prints the end of a --wait: the table unless --watch showed
// it, and each failed instance on stderr (exit 1).
func (c *adminClient) waitOver(cmd *cobra.Command, sum firstboot.Summary, f *statusFlags, out *statusOutput) error {
	if !f.watch {
		if err := out.summary(sum, false); err != nil {
			return err
		}
	}
	var failed []string
	for _, st := range sum.Instances {
		if st.State == firstboot.Failed {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: first boot failed: %s\n", printable(st.Name), orNone(printable(st.FirstError())))
			failed = append(failed, st.Name)
		}
	}
	if len(failed) > 0 {
		return alreadyReported{Err: fmt.Errorf("%d failed", len(failed))}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(no error reported)"
	}
	return s
}

// stillGoing names the instances of sum not finished, with their state.
func stillGoing(sum *firstboot.Summary) string {
	if sum == nil {
		return "no answer from the server yet"
	}
	var names []string
	for _, st := range sum.Instances {
		if going(st) {
			names = append(names, fmt.Sprintf("%s (%s)", printable(st.Name), st.State))
		}
	}
	if len(names) == 0 {
		return "no instance selected"
	}
	return strings.Join(names, ", ")
}

// only keeps the instances called names, in that order (every one when
// there are none), counted again; a name the server does not serve is an error.
func only(sum firstboot.Summary, names []string) (firstboot.Summary, error) {
	if len(names) == 0 {
		return sum, nil
	}
	out := firstboot.Summary{Counts: make(map[firstboot.State]int, len(sum.Counts))}
	for _, st := range firstboot.States {
		out.Counts[st] = 0
	}
	for _, n := range names {
		i := slices.IndexFunc(sum.Instances, func(st firstboot.Status) bool { return st.Name == n })
		if i < 0 {
			return sum, fmt.Errorf("instance %q not found (or not selected by --state and --agent)", n)
		}
		out.Instances = append(out.Instances, sum.Instances[i])
		out.Counts[sum.Instances[i].State]++
	}
	return out, nil
}

// statusOutput writes summaries as tables or JSON; with watch, each
// after the last (in place on a terminal).
type statusOutput struct {
	w         io.Writer
	asJSON    bool
	terminal  bool
	shown     int // summaries written
	lastLines int // lines of the last table, to redraw over
}

func (o *statusOutput) json(v any, indent bool) error {
	enc := json.NewEncoder(o.w)
	if indent {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// summary writes one summary; watch says more follow.
func (o *statusOutput) summary(sum firstboot.Summary, watch bool) error {
	defer func() { o.shown++ }()
	if o.asJSON {
		return o.json(sum, !watch)
	}
	var buf bytes.Buffer
	writeBootTable(&buf, sum, statusClock())
	switch {
	case o.shown == 0:
	case watch && o.terminal:
		// Up over the last table, and clear from there down.
		fmt.Fprintf(o.w, "\x1b[%dA\x1b[J", o.lastLines)
	default:
		fmt.Fprintln(o.w)
	}
	o.lastLines = bytes.Count(buf.Bytes(), []byte("\n"))
	_, err := o.w.Write(buf.Bytes())
	return err
}
