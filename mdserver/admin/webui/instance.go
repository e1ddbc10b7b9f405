package webui

import (
	"net/http"
	"net/url"
	"time"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// The instance page's view: its status, its stages as bars on one time
// axis (from the first fetch, or the first stage, to the end or now), its
// errors and its event log.
type (
	instanceView struct {
		Title  string
		Stream string
		Found  bool
		S      firstboot.Status
		// Facts are the record's, when HasFacts; Served links to what
		// its guest is served, one link per dialect.
		Facts    Facts
		HasFacts bool
		Served   []option
		Where    string
		Elapsed  string
		Stages   []stageView
		Events   []eventView
		Span     string
	}
	stageView struct {
		Name, Start, Duration, Result, Class string
		X, W                                 int // the bar, in thousandths of the axis
	}
	eventView struct {
		At, Clock, Offset, Kind, Name, Result, Took, Message, Dialect, Class string
		Count                                                                int
	}
)

func (u *UI) instance(w http.ResponseWriter, r *http.Request) {
	v := u.instanceView(r.PathValue("name"))
	status := http.StatusOK
	if !v.Found {
		status = http.StatusNotFound
	}
	u.render(w, status, "instance", v)
}

func (u *UI) instanceView(name string) instanceView {
	v := instanceView{Title: name, Stream: "/ui/stream?" + url.Values{"instance": {name}}.Encode()}
	st, ok := u.src.Boot(name)
	if !ok {
		return v
	}
	now := u.opts.Now()
	v.Found, v.S, v.Where = true, st, st.Where()
	v.Facts, v.HasFacts = u.facts(name)
	if u.opts.Served != nil {
		for _, d := range u.opts.Dialects {
			v.Served = append(v.Served, option{Value: servedHref(name, d), Label: d})
		}
	}
	if !st.FirstFetch.IsZero() {
		v.Elapsed = duration(st.Elapsed(now))
	}
	t0, t1 := axis(&st, now)
	v.Span = duration(t1.Sub(t0))
	for _, sg := range st.Stages {
		v.Stages = append(v.Stages, stage(sg, t0, t1))
	}
	for _, ev := range st.Events {
		e := eventView{At: ev.Time.UTC().Format(time.RFC3339), Clock: ev.Time.UTC().Format("15:04:05"), Offset: offset(ev.Time, t0), Kind: ev.Kind, Name: ev.Name,
			Result: ev.Result, Message: ev.Message, Dialect: ev.Dialect, Count: ev.Count, Class: resultClass(ev.Result)}
		if ev.Until.After(ev.Time) { // a module from its start to its finish, or a crawl's fetches
			e.Took = duration(ev.Until.Sub(ev.Time))
		}
		v.Events = append(v.Events, e)
	}
	return v
}

// axis is the time the timeline spans.
func axis(st *firstboot.Status, now time.Time) (t0, t1 time.Time) {
	t0 = st.FirstFetch
	for _, sg := range st.Stages {
		if t0.IsZero() || (!sg.Start.IsZero() && sg.Start.Before(t0)) {
			t0 = sg.Start
		}
	}
	t1 = st.Finished
	if t1.IsZero() {
		t1 = now
	}
	if st.LastEvent.After(t1) {
		t1 = st.LastEvent
	}
	return t0, t1
}

// stage places sg on the axis t0..t1; a stage still running runs to t1.
func stage(sg firstboot.Stage, t0, t1 time.Time) stageView {
	v := stageView{Name: sg.Name, Start: offset(sg.Start, t0), Result: sg.Result, Class: resultClass(sg.Result)}
	end := sg.End
	if end.IsZero() {
		end, v.Duration, v.Class = t1, "running", "running"
	} else {
		v.Duration = duration(sg.Duration())
	}
	span := t1.Sub(t0)
	if span <= 0 || sg.Start.IsZero() {
		return v
	}
	v.X = int(sg.Start.Sub(t0) * 1000 / span)
	v.W = max(int(end.Sub(sg.Start)*1000/span), 4) // a stage of an instant stays visible
	v.X = min(max(v.X, 0), 1000-v.W)
	return v
}

// offset is t as "+duration" from t0.
func offset(t, t0 time.Time) string {
	if t.IsZero() || t0.IsZero() {
		return ""
	}
	return "+" + duration(t.Sub(t0))
}

func resultClass(result string) string {
	switch result {
	case firstboot.ResultSuccess:
		return "success"
	case firstboot.ResultWarn:
		return "warn"
	case firstboot.ResultFail:
		return "fail"
	}
	return ""
}
