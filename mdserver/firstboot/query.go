package firstboot

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The query parameters of a fleet filter, shared by every HTTP surface
// that selects boots (the admin API's fleet summary, the web page, and
// the CLI that builds the admin API's query):
//
//	state=failed,stalled   any of these states (repeatable, or comma-separated)
//	agent=cloud-init       spec.agent: cloud-init, ignition or cloudbase-init
//	name=web               a substring of the instance name
//	min-age=10m            Elapsed at least (a Go duration)
//	max-age=1h             Elapsed at most
const (
	QueryState  = "state"
	QueryAgent  = "agent"
	QueryName   = "name"
	QueryMinAge = "min-age"
	QueryMaxAge = "max-age"
)

// Agents a filter may name (spec.agent's values).
var Agents = []string{"cloud-init", "ignition", "cloudbase-init"}

// ParseFilter reads a Filter from a query, its states in the order of
// States (one filter, one URL, whatever order the query named them in).
// Every problem is reported, one
// per parameter, joined; other parameters are ignored (a page adds its
// own: sort, page).
func ParseFilter(q url.Values) (Filter, error) {
	var f Filter
	var errs []error
	asked := map[State]bool{}
	for _, v := range q[QueryState] {
		for s := range strings.SplitSeq(v, ",") {
			st := State(strings.TrimSpace(s))
			if st != "" && !slices.Contains(States, st) {
				errs = append(errs, fmt.Errorf("%s=%q: want one of %s", QueryState, s, stateNames()))
			}
			asked[st] = true
		}
	}
	for _, st := range States { // in one order, whatever the query's
		if asked[st] {
			f.States = append(f.States, st)
		}
	}
	if a := q.Get(QueryAgent); a != "" && !slices.Contains(Agents, a) {
		errs = append(errs, fmt.Errorf("%s=%q: want one of %s", QueryAgent, a, strings.Join(Agents, ", ")))
	} else {
		f.Agent = a
	}
	f.Name = q.Get(QueryName)
	var err error
	if f.MinAge, err = age(q, QueryMinAge); err != nil {
		errs = append(errs, err)
	}
	if f.MaxAge, err = age(q, QueryMaxAge); err != nil {
		errs = append(errs, err)
	}
	if f.MaxAge > 0 && f.MinAge > f.MaxAge {
		errs = append(errs, fmt.Errorf("%s=%s is more than %s=%s", QueryMinAge, f.MinAge, QueryMaxAge, f.MaxAge))
	}
	return f, errors.Join(errs...)
}

// Values is the query ParseFilter reads back as f.
func (f *Filter) Values() url.Values {
	q := url.Values{}
	for _, st := range f.States {
		q.Add(QueryState, string(st))
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set(QueryAgent, f.Agent)
	set(QueryName, f.Name)
	if f.MinAge > 0 {
		q.Set(QueryMinAge, f.MinAge.String())
	}
	if f.MaxAge > 0 {
		q.Set(QueryMaxAge, f.MaxAge.String())
	}
	return q
}

func age(q url.Values, key string) (time.Duration, error) {
	v := q.Get(key)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration such as 90s, 10m or 2h", key, v)
	}
	return d, nil
}

func stateNames() string {
	names := make([]string, len(States))
	for i, st := range States {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}
