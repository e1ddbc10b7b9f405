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
)

// The fleet's first boots, as the guests' handler (Options.Metadata)
// tracks them:
//
//	GET /v1/instances/{name}/boot   one instance's firstboot.Status, stages and events included
//	GET /v1/boots?FILTER            a firstboot.Summary: counts per state, rows without events
//	GET /v1/boots?watch=true&FILTER the same as server-sent events: at once, then at each change
//
// FILTER is firstboot's fleet filter (firstboot.ParseFilter, the web
// page's too): state=failed,stalled (any of), agent=cloud-init|ignition,
// name=SUBSTRING, min-age=5m, max-age=1h (bounds on the time since the
// first fetch).

// paramWatch asks GET /v1/boots for a watch stream.
const paramWatch = "watch"

// bootsParams are the parameters GET /v1/boots knows.
var bootsParams = []string{firstboot.QueryState, firstboot.QueryAgent, firstboot.QueryName, firstboot.QueryMinAge, firstboot.QueryMaxAge, paramWatch}

// parseBootsQuery reads the filter of GET /v1/boots and whether it asks
// for a watch, or every problem, each naming its parameter and value. An
// unknown parameter is one: a misspelt filter would select everything.
func parseBootsQuery(q url.Values) (f firstboot.Filter, watch bool, problems []string) {
	f, err := firstboot.ParseFilter(q)
	if err != nil {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				problems = append(problems, e.Error())
			}
		} else {
			problems = append(problems, err.Error())
		}
	}
	switch v := q.Get(paramWatch); v {
	case "", "false":
	case "true":
		watch = true
	default:
		problems = append(problems, fmt.Sprintf("%s=%q: want true or false", paramWatch, v))
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(bootsParams, k) {
			problems = append(problems, fmt.Sprintf("%s: unknown parameter: want %s", k, strings.Join(bootsParams, ", ")))
		}
	}
	return f, watch, problems
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
var (
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
