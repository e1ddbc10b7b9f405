package firstboot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/vminit/vminit/internal/lib/lazyre"
)

// MaxReportBytes bounds the body of a GuestReport a guest posts to
// bootreport.ReportPath: cloud-init's status.json and result.json are a few hundred
// bytes, the log tails are what the tracker keeps (MaxMessage each); an
// Ignition report of 16 failed units with 2 KiB of journal each, escaped
// as JSON, can pass 64 KiB (ignition/report.sh).
const MaxReportBytes = 128 << 10

// ErrReport wraps every reason a GuestReport is refused.
var ErrReport = errors.New("bad report")

// The agents, as spec.agent names them.
const (
	AgentCloudInit = "cloud-init"
	AgentIgnition  = "ignition"
)

// ParseGuestReport decodes the body a guest posted to bootreport.ReportPath,
// strictly: one JSON object of GuestReport's fields and no other.
func ParseGuestReport(body []byte) (GuestReport, error) {
	var g GuestReport
	if len(body) > MaxReportBytes {
		return g, fmt.Errorf("%w: %d bytes: a report is at most %d", ErrReport, len(body), MaxReportBytes)
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return g, fmt.Errorf("%w: want a JSON object", ErrReport)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return g, fmt.Errorf("%w: %v", ErrReport, err)
	}
	if dec.More() {
		return g, fmt.Errorf("%w: data after the JSON object", ErrReport)
	}
	return g, nil
}

// Report reads the guest's final word into what the tracker takes:
//
//   - cloud-init: the errors of each stage in status.json (and those of
//     result.json no stage lists) are failures, the module named where
//     the error names one; the output log's tail is the message of the
//     failure it mentions (or of the only one), else the report's. Then,
//     when the report has them (report.py since the guest's units were
//     reported; an older guest's report has not), the system's state and
//     failed units, read as Ignition's: cloud-init can finish without
//     an error while a unit it started failed (a spec mount's, started
//     by a runcmd line whose failure stops nothing). cloud-init's own
//     failures come first, so that the one line the views show
//     (Status.FirstError) stays cloud-init's cause when it has one.
//   - Ignition: a running system is done; a degraded one, or one with
//     failed units, failed: a failure per unit, its log tail its message.
//
// status and result are cloud-init's only: an Ignition report carrying
// them is refused. Everything kept is cut to the tracker's limits.
func (g GuestReport) Report() (Report, error) {
	switch g.Agent {
	case AgentCloudInit:
		return g.cloudInit()
	case AgentIgnition:
		if len(g.Status) > 0 || len(g.Result) > 0 {
			return Report{}, fmt.Errorf("%w: status and result are a cloud-init report's; an Ignition report carries systemState, failedUnits and log", ErrReport)
		}
		return g.ignition()
	}
	return Report{}, fmt.Errorf("%w: agent %q: want %s or %s", ErrReport, g.Agent, AgentCloudInit, AgentIgnition)
}

// cloudInitModes are status.json's stages in boot order, and the names
// cloud-init's reporting events give them ("init" reports as
// init-network), so that a failure reads the same from events and report.
var cloudInitModes = []struct{ key, stage string }{
	{"init-local", "init-local"},
	{"init", "init-network"},
	{"modules-init", "modules-init"},
	{"modules-config", "modules-config"},
	{"modules-final", "modules-final"},
}

// ciStage is one stage of status.json (start and finished are the
// guest's clock: not kept).
type ciStage struct {
	Errors []string `json:"errors"`
}

func (g GuestReport) cloudInit() (Report, error) {
	fails, err := g.cloudInitErrors()
	if err != nil {
		return Report{}, err
	}
	var sys systemReport
	if g.SystemState != "" || len(g.FailedUnits) > 0 {
		if sys, err = g.system(); err != nil {
			return Report{}, err
		}
	}
	return cloudInitReport(fails, sys, g.Log), nil
}

// cloudInitErrors are the failures status.json and result.json name.
func (g GuestReport) cloudInitErrors() ([]Failure, error) {
	var fails []Failure
	var seen []string // error texts already a failure
	running := ""     // the stage status.json says cloud-init is in
	if !isNull(g.Status) {
		var err error
		if fails, seen, running, err = statusErrors(g.Status); err != nil {
			return nil, err
		}
	}
	if isNull(g.Result) {
		// cloud-init writes result.json as modules-final ends, and the
		// report unit runs after it: without one, cloud-init did not
		// finish.
		return append(fails, unfinished(running, !isNull(g.Status))), nil
	}
	var res struct {
		V1 *struct {
			Errors []string `json:"errors"`
		} `json:"v1"`
	}
	if err := json.Unmarshal(g.Result, &res); err != nil || res.V1 == nil {
		return nil, fmt.Errorf("%w: result: want result.json, {\"v1\": {\"errors\": [...]}}: %v", ErrReport, err)
	}
	for _, e := range res.V1.Errors {
		fails, seen = addError(fails, seen, "", e)
	}
	return fails, nil
}

// statusErrors reads status.json: the errors of each stage, and the
// stage cloud-init is in (none once it finished one).
func statusErrors(raw json.RawMessage) (fails []Failure, seen []string, running string, err error) {
	var st struct {
		V1 map[string]json.RawMessage `json:"v1"`
	}
	if err := json.Unmarshal(raw, &st); err != nil || st.V1 == nil {
		return nil, nil, "", fmt.Errorf("%w: status: want status.json, {\"v1\": {...}}: %v", ErrReport, err)
	}
	var stage *string
	if err := json.Unmarshal(st.V1["stage"], &stage); err == nil && stage != nil {
		running = *stage
	}
	for _, m := range cloudInitModes {
		var sg ciStage
		if raw, ok := st.V1[m.key]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, &sg); err != nil {
				return nil, nil, "", fmt.Errorf("%w: status: v1.%s: %v", ErrReport, m.key, err)
			}
		}
		for _, e := range sg.Errors {
			fails, seen = addError(fails, seen, m.stage, e)
		}
		if m.key == running {
			running = m.stage
		}
	}
	return fails, seen, clip(running, MaxName), nil
}

// unfinished is the failure of a cloud-init that wrote no result.json.
func unfinished(running string, hadStatus bool) Failure {
	switch {
	case running != "":
		return Failure{Stage: running, Message: "cloud-init did not finish this stage (status.json names it, and there is no result.json)"}
	case hadStatus:
		return Failure{Message: "cloud-init wrote no result.json: its last stage did not finish"}
	}
	return Failure{Message: "cloud-init left no status.json or result.json: it did not run, or did not finish"}
}

// addError adds cloud-init's error text e of stage as a failure, unless
// the same text is one already (result.json repeats status.json's) or
// the failures are full.
func addError(fails []Failure, seen []string, stage, e string) ([]Failure, []string) {
	if slices.Contains(seen, e) || len(fails) >= MaxFailures {
		return fails, seen
	}
	module, msg := moduleError(e)
	f := Failure{Stage: clip(stage, MaxName), Module: clip(module, MaxName), Message: clip(msg, MaxMessage)}
	return append(fails, f), append(seen, e)
}

// moduleErr is how status.json writes a module's failure: the repr of
// the (name, exception) tuple, e.g.
// ('scripts-user', RuntimeError('Runparts: 1 failures in 1 attempted commands')).
var moduleErr = lazyre.New(`^\('([a-z0-9_-]+)', (.*)\)$`)

// moduleError splits a module's error into the module, named as its
// reporting events name it (config-scripts-user), and the exception.
func moduleError(e string) (module, msg string) {
	if m := moduleErr.FindStringSubmatch(e); m != nil {
		return "config-" + m[1], m[2]
	}
	return "", e
}

// cloudInitReport is the report of cloud-init's failures, with the output
// log's tail where it explains one, and then the system's (sys, zero for
// a report without systemState): failed if either is.
func cloudInitReport(fails []Failure, sys systemReport, log string) Report {
	r := Report{Failed: len(fails) > 0 || sys.failed, Message: "cloud-init finished without errors"}
	switch len(fails) {
	case 0:
	case 1:
		r.Message = "cloud-init: 1 error"
	default:
		r.Message = fmt.Sprintf("cloud-init: %d errors", len(fails))
	}
	if sys.summary != "" {
		r.Message += "; system " + sys.summary
	}
	// cloud-init's own first: the view's one line is the first failure's.
	r.Errors = append(fails, sys.fails...)
	if len(r.Errors) > MaxFailures {
		r.Errors = r.Errors[:MaxFailures]
	}
	if strings.TrimSpace(log) == "" {
		return r
	}
	for i, f := range fails {
		mod := strings.TrimPrefix(f.Module, "config-")
		if len(fails) == 1 || mod != "" && strings.Contains(log, mod) {
			r.Errors[i].Message = withLog(f.Message, log)
			return r
		}
	}
	r.Message = withLog(r.Message, log)
	return r
}

// systemStates are the answers of `systemctl is-system-running`.
var systemStates = []string{"initializing", "starting", "running", "degraded", "maintenance", "stopping", "offline", "unknown"}

func (g GuestReport) ignition() (Report, error) {
	sys, err := g.system()
	if err != nil {
		return Report{}, err
	}
	r := Report{Failed: sys.failed, Errors: sys.fails, Message: sys.summary}
	if strings.TrimSpace(g.Log) != "" {
		r.Message = withLog(r.Message, g.Log)
	}
	return r, nil
}

// systemReport is what a report's systemState and failedUnits say.
type systemReport struct {
	failed bool
	fails  []Failure // a failure per unit, its journal's tail its message
	// summary is the state and the count of failed units ("degraded: 2
	// failed units").
	summary string
}

// system reads the report's systemState and failedUnits, the same in
// either agent's report: a degraded or maintenance system, or one with
// failed units, failed.
func (g GuestReport) system() (systemReport, error) {
	if !slices.Contains(systemStates, g.SystemState) {
		return systemReport{}, fmt.Errorf("%w: systemState %q: want what `systemctl is-system-running` says (%s)", ErrReport, g.SystemState, strings.Join(systemStates, ", "))
	}
	s := systemReport{summary: g.SystemState}
	for i, u := range g.FailedUnits {
		if u.Unit == "" {
			return systemReport{}, fmt.Errorf("%w: failedUnits[%d]: unit is empty", ErrReport, i)
		}
		if i < MaxFailures {
			s.fails = append(s.fails, Failure{Unit: clip(u.Unit, MaxName), Message: tail(u.Log, MaxMessage)})
		}
	}
	s.failed = len(g.FailedUnits) > 0 || g.SystemState == "degraded" || g.SystemState == "maintenance"
	switch n := len(g.FailedUnits); {
	case n == 1:
		s.summary += ": 1 failed unit"
	case n > 1:
		s.summary += fmt.Sprintf(": %d failed units", n)
	}
	return s, nil
}

// withLog is msg followed by as much of log's end as fits MaxMessage.
func withLog(msg, log string) string {
	msg = clip(msg, MaxMessage/2)
	return msg + "\n" + tail(strings.TrimRight(log, "\n"), MaxMessage-len(msg)-1)
}

// tail is the end of s, at most n bytes, cut on a rune boundary and
// marked: the last lines of a log are the ones that say why.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := len(s) - n + len(mark)
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return mark + s[cut:]
}

// isNull reports whether a raw JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
