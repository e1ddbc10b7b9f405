package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/spec"
)

// The fleet's first boots, as the guests' handler (Options.Metadata)
// tracks them:
//
//	GET /v1/instances/{name}/boot   one instance's firstboot.Status, stages and events included
//	GET /v1/boots?FILTER            a firstboot.Summary: counts per state, rows without events
//	GET /v1/boots?watch=true&FILTER the same as server-sent events: at once, then at each change
//
// FILTER is state=failed,stalled (any of), agent=cloud-init|ignition,
// name=SUBSTRING, minAge=5m, maxAge=1h (bounds on the elapsed time since
// the first fetch); FilterQuery and ParseFilter are its two directions.

// The query parameters of GET /v1/boots.
const (
	paramState  = "state"
	paramAgent  = "agent"
	paramName   = "name"
	paramMinAge = "minAge"
	paramMaxAge = "maxAge"
	paramWatch  = "watch"
)

// FilterQuery is f as the query of GET /v1/boots.
func FilterQuery(f firstboot.Filter) url.Values {
	q := url.Values{}
	if len(f.States) > 0 {
		names := make([]string, len(f.States))
		for i, s := range f.States {
			names[i] = string(s)
		}
		q.Set(paramState, strings.Join(names, ","))
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set(paramAgent, f.Agent)
	set(paramName, f.Name)
	if f.MinAge > 0 {
		q.Set(paramMinAge, f.MinAge.String())
	}
	if f.MaxAge > 0 {
		q.Set(paramMaxAge, f.MaxAge.String())
	}
	return q
}

// ParseFilter reads the filter of GET /v1/boots from its query, and
// whether it asks for a watch. Every problem is listed, each naming its
// parameter and value; an unknown parameter is one (a misspelt filter
// would otherwise select everything).
func ParseFilter(q url.Values) (f firstboot.Filter, watch bool, err error) {
	var errs spec.Errors
	bad := func(param, format string, args ...any) {
		errs = append(errs, &spec.FieldError{Field: param, Message: fmt.Sprintf(format, args...)})
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		v := q.Get(k)
		if len(q[k]) > 1 {
			bad(k, "given %d times: give it once (state takes a comma-separated list)", len(q[k]))
			continue
		}
		switch k {
		case paramState:
			for s := range strings.SplitSeq(v, ",") {
				if st := firstboot.State(strings.TrimSpace(s)); slices.Contains(firstboot.States, st) {
					f.States = append(f.States, st)
				} else {
					bad(k, "%q: want one or more of %s, comma-separated", s, stateNames())
				}
			}
		case paramAgent:
			if v != spec.AgentCloudInit && v != spec.AgentIgnition {
				bad(k, "%q: want %s or %s", v, spec.AgentCloudInit, spec.AgentIgnition)
			}
			f.Agent = v
		case paramName:
			f.Name = v
		case paramMinAge, paramMaxAge:
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				bad(k, "%q: want a duration such as 90s, 5m or 1h", v)
			}
			if k == paramMinAge {
				f.MinAge = d
			} else {
				f.MaxAge = d
			}
		case paramWatch:
			if v != "true" && v != "false" {
				bad(k, "%q: want true or false", v)
			}
			watch = v == "true"
		default:
			bad(k, "unknown parameter: want %s, %s, %s, %s, %s or %s", paramState, paramAgent, paramName, paramMinAge, paramMaxAge, paramWatch)
		}
	}
	if f.MaxAge > 0 && f.MinAge > f.MaxAge {
		bad(paramMinAge, "%s is more than maxAge %s: nothing can match", f.MinAge, f.MaxAge)
	}
	if len(errs) > 0 {
		return firstboot.Filter{}, false, errs
	}
	return f, watch, nil
}

// stateNames lists the states a filter may name.
func stateNames() string {
	names := make([]string, len(firstboot.States))
	for i, s := range firstboot.States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Boot returns the first boot of the instance called name, stages and
// events included; an unknown instance wraps registry.ErrNotFound.
func (l *Local) Boot(_ context.Context, name string) (*firstboot.Status, error) {
	st, ok := l.opts.Metadata.Boot(name)
	if !ok {
		return nil, notFound(name)
	}
	return &st, nil
}

// Boots returns the first boots of every instance the store serves that
// pass f (pending when its guest was never heard from), without their
// stages and events, and the count of each state among them.
func (l *Local) Boots(_ context.Context, f firstboot.Filter) (*firstboot.Summary, error) {
	sum := l.opts.Metadata.Fleet(f)
	return &sum, nil
}

// How a watch paces itself. A change of any boot wakes it, but it reads
// the fleet at most once per watchCoalesce (a fleet booting posts
// hundreds of events a second), and sends only what differs from what it
// sent. It also reads every watchRefresh, for what no event announces: a
// boot turning stalled, an instance added to or removed from the store.
const (
	watchCoalesce = 500 * time.Millisecond
	watchRefresh  = 15 * time.Second
)

// WatchBoots calls fn with the summary of the boots that pass f at once,
// then with each new summary as boots change, until ctx ends (it returns
// ctx's error) or fn returns an error (it returns that error).
func (l *Local) WatchBoots(ctx context.Context, f firstboot.Filter, fn func(firstboot.Summary) error) error {
	return l.watch(ctx, f, fn, nil)
}

// watch is WatchBoots, calling idle (when set) at each refresh that found
// nothing new: the handler's keep-alive.
func (l *Local) watch(ctx context.Context, f firstboot.Filter, fn func(firstboot.Summary) error, idle func() error) error {
	md := l.opts.Metadata
	refresh := time.NewTicker(watchRefresh)
	defer refresh.Stop()
	var last *firstboot.Summary
	refreshed := false
	for {
		// Taken before reading, so that a change while reading wakes the
		// next wait.
		changes := md.Boots().Changes()
		sum := md.Fleet(f)
		switch {
		case last == nil || !reflect.DeepEqual(sum, *last):
			if err := fn(sum); err != nil {
				return err
			}
			last = &sum
			if err := pause(ctx, watchCoalesce); err != nil {
				return err
			}
		case refreshed && idle != nil:
			if err := idle(); err != nil {
				return err
			}
		}
		refreshed = false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changes:
		case <-refresh.C:
			refreshed = true
		}
	}
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// FollowBoots makes l's boots those a store shared between replicas holds
// (firstboot.Shared: a cluster's Instance statuses, or etcd's keys,
// written by the servers), for a Local whose handler serves no guest of
// its own: `vminit instances status --kubeconfig`. It merges what is
// stored before it returns, calling the store's FollowBoots with a
// context already ended (the stores read once, then, and return), and
// then follows the store's changes until ctx ends. On a store that
// shares nothing it does nothing, and every instance reads as pending:
// only the server that fed a guest, or a store it wrote to, knows of its
// boot.
func (l *Local) FollowBoots(ctx context.Context) error {
	sh, ok := l.store.(firstboot.Shared)
	if !ok {
		return nil
	}
	tr := l.opts.Metadata.Boots()
	once, cancel := context.WithCancel(ctx)
	cancel()
	if err := sh.FollowBoots(once, tr); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("reading the first-boot statuses: %w", err)
	}
	go func() {
		if err := sh.FollowBoots(ctx, tr); err != nil && ctx.Err() == nil {
			l.opts.Logger.Warn("admin: following the stored first-boot statuses stopped", "err", err)
		}
	}()
	return nil
}
