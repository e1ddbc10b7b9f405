package webui

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// The fleet page's query: firstboot's filter (state, agent, name,
// min-age, max-age), and
//
//	sort=COLUMN or sort=-COLUMN   name (default), agent, state, stage, elapsed, error
//	page=N                        the Nth page of Options.PageSize rows
const (
	querySort = "sort"
	queryPage = "page"
)

// column is a column of the fleet table, and how it sorts.
type column struct {
	key, label string
	cmp        func(a, b *firstboot.Status, now time.Time) int
}

var columns = []column{
	{"name", "Name", func(a, b *firstboot.Status, _ time.Time) int { return strings.Compare(a.Name, b.Name) }},
	{"agent", "Agent", func(a, b *firstboot.Status, _ time.Time) int { return strings.Compare(a.Agent, b.Agent) }},
	{"state", "State", func(a, b *firstboot.Status, _ time.Time) int {
		return cmp.Compare(slices.Index(firstboot.States, a.State), slices.Index(firstboot.States, b.State))
	}},
	{"stage", "Stage/module", func(a, b *firstboot.Status, _ time.Time) int { return strings.Compare(a.Where(), b.Where()) }},
	{"elapsed", "Elapsed", func(a, b *firstboot.Status, now time.Time) int { return cmp.Compare(a.Elapsed(now), b.Elapsed(now)) }},
	{"error", "First error", func(a, b *firstboot.Status, _ time.Time) int { return strings.Compare(a.FirstError(), b.FirstError()) }},
}

// fleetQuery is a parsed fleet query.
type fleetQuery struct {
	filter firstboot.Filter
	sort   string // a column key, "-" before it for descending
	page   int    // from 1
}

// parseFleetQuery reads q; what does not parse (a filter, a sort by a
// column there is not, a page that is no positive number) is an error
// naming each parameter, and the page shows the rest as read.
func parseFleetQuery(q url.Values) (fleetQuery, error) {
	f, err := firstboot.ParseFilter(q)
	errs := []error{err}
	fq := fleetQuery{filter: f, sort: "name", page: 1}
	if s := q.Get(querySort); s != "" {
		if slices.ContainsFunc(columns, func(c column) bool { return c.key == strings.TrimPrefix(s, "-") }) {
			fq.sort = s
		} else {
			keys := make([]string, len(columns))
			for i, c := range columns {
				keys[i] = c.key
			}
			errs = append(errs, fmt.Errorf("%s=%q: want a column (%s), - before it for descending", querySort, s, strings.Join(keys, ", ")))
		}
	}
	if v := q.Get(queryPage); v != "" {
		if p, perr := strconv.Atoi(v); perr == nil && p > 0 {
			fq.page = p
		} else {
			errs = append(errs, fmt.Errorf("%s=%q: want a page number from 1", queryPage, v))
		}
	}
	return fq, errors.Join(errs...)
}

// href is the fleet page for fq.
func (fq fleetQuery) href(base string) string {
	q := fq.filter.Values()
	if fq.sort != "name" {
		q.Set(querySort, fq.sort)
	}
	if fq.page > 1 {
		q.Set(queryPage, strconv.Itoa(fq.page))
	}
	if len(q) == 0 {
		return base
	}
	return base + "?" + q.Encode()
}

// The fleet page's view.
type (
	fleetView struct {
		Title    string
		Problem  string
		Name     string
		Agents   []option
		States   []option
		Sort     string
		Stream   string
		Counts   []countView
		AllHref  string
		Total    int
		Matched  int
		From, To int
		Columns  []columnView
		Rows     []rowView
		PrevHref string
		NextHref string
		Page     int
		Pages    int
	}
	option struct {
		Value, Label string
		Selected     bool
	}
	countView struct {
		State  firstboot.State
		N      int
		Href   string
		Active bool
	}
	columnView struct{ Key, Label, Href, Arrow string }
	rowView    struct {
		Name, Href, Agent string
		State             firstboot.State
		Where, Elapsed    string
		Error             string
	}
)

func (u *UI) fleet(w http.ResponseWriter, r *http.Request) {
	fq, err := parseFleetQuery(r.URL.Query())
	status := http.StatusOK
	v := u.fleetView(fq)
	if err != nil {
		status, v.Problem = http.StatusBadRequest, err.Error()
	}
	u.render(w, status, "fleet", v)
}

// fleetView reads the fleet and lays out the page of fq. The counts are
// of the fleet without the state filter, so that each is a link to its
// state's rows.
func (u *UI) fleetView(fq fleetQuery) fleetView {
	now := u.opts.Now()
	all := fq.filter
	all.States = nil
	sum := u.src.Fleet(all)
	rows := sum.Instances
	if len(fq.filter.States) > 0 {
		rows = slices.DeleteFunc(rows, func(s firstboot.Status) bool { return !slices.Contains(fq.filter.States, s.State) })
	}
	sortRows(rows, fq.sort, now)
	v := fleetView{Title: "First boots", Name: fq.filter.Name, Sort: fq.sort, Total: len(sum.Instances), Matched: len(rows)}
	v.Stream = fq.href("/ui/stream")
	v.Agents = []option{{Value: "", Label: "any agent", Selected: fq.filter.Agent == ""}}
	for _, a := range firstboot.Agents {
		v.Agents = append(v.Agents, option{Value: a, Label: a, Selected: fq.filter.Agent == a})
	}
	for _, st := range firstboot.States {
		v.States = append(v.States, option{Value: string(st), Label: string(st), Selected: slices.Contains(fq.filter.States, st)})
		one := fleetQuery{filter: all, sort: fq.sort, page: 1}
		one.filter.States = []firstboot.State{st}
		v.Counts = append(v.Counts, countView{State: st, N: sum.Counts[st], Href: one.href(Prefix),
			Active: slices.Equal(fq.filter.States, one.filter.States)})
	}
	v.AllHref = fleetQuery{filter: all, sort: fq.sort, page: 1}.href(Prefix)
	v.Columns = columnViews(fq)
	u.paginate(&v, fq, rows, now)
	return v
}

// paginate puts fq's page of rows in v, with the links to its
// neighbours.
func (u *UI) paginate(v *fleetView, fq fleetQuery, rows []firstboot.Status, now time.Time) {
	size := u.opts.PageSize
	v.Pages = max(1, (len(rows)+size-1)/size)
	v.Page = min(fq.page, v.Pages)
	start, end := (v.Page-1)*size, min(v.Page*size, len(rows))
	if start < end {
		v.From, v.To = start+1, end
	}
	for i := start; i < end; i++ {
		v.Rows = append(v.Rows, row(&rows[i], now))
	}
	if v.Page > 1 {
		p := fq
		p.page = v.Page - 1
		v.PrevHref = p.href(Prefix)
	}
	if v.Page < v.Pages {
		n := fq
		n.page = v.Page + 1
		v.NextHref = n.href(Prefix)
	}
}

func row(s *firstboot.Status, now time.Time) rowView {
	r := rowView{Name: s.Name, Href: instanceHref(s.Name), Agent: s.Agent, State: s.State, Where: s.Where(), Error: s.FirstError()}
	if !s.FirstFetch.IsZero() {
		r.Elapsed = duration(s.Elapsed(now))
	}
	return r
}

// columnViews are the table's headers: each a link sorting by it, the
// sorted one reversing its order.
func columnViews(fq fleetQuery) []columnView {
	var cols []columnView
	for _, c := range columns {
		s := fleetQuery{filter: fq.filter, sort: c.key, page: 1}
		cv := columnView{Key: c.key, Label: c.label}
		switch fq.sort {
		case c.key:
			s.sort, cv.Arrow = "-"+c.key, " ▲"
		case "-" + c.key:
			cv.Arrow = " ▼"
		}
		cv.Href = s.href(Prefix)
		cols = append(cols, cv)
	}
	return cols
}

// sortRows sorts by the column key names, ties by name (rows come sorted
// by name, and the sort is stable).
func sortRows(rows []firstboot.Status, key string, now time.Time) {
	desc := strings.HasPrefix(key, "-")
	key = strings.TrimPrefix(key, "-")
	i := slices.IndexFunc(columns, func(c column) bool { return c.key == key })
	if i <= 0 && !desc { // by name, as Fleet returns them
		return
	}
	c := columns[max(i, 0)]
	slices.SortStableFunc(rows, func(a, b firstboot.Status) int {
		if desc {
			return c.cmp(&b, &a, now)
		}
		return c.cmp(&a, &b, now)
	})
}

func instanceHref(name string) string { return Prefix + "instances/" + url.PathEscape(name) }

// duration formats d for a table: tenths of a second under a minute,
// seconds above.
func duration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
