package admin

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// The fleet's first boots, as the guests' handler (Options.Metadata)
// tracks them:
//
//	GET /v1/instances/{name}/boot   one instance's firstboot.Status, stages, events and errors included
//	GET /v1/boots?FILTER&PAGE       a page of firstboot.Summary: counts per state, a row per instance
//	GET /v1/boots?watch=true&FILTER server-sent events: the summary at once, then its changes
//
// FILTER is firstboot's fleet filter (firstboot.ParseFilter, the web
// page's too): state=failed,stalled (any of), agent=cloud-init|ignition,
// name=SUBSTRING, min-age=5m, max-age=1h (bounds on the time since the
// first fetch). A row is firstboot.Tracker.Brief's: no stages or events,
// the first error only, its message one line of at most 256 bytes.
//
// PAGE is limit=N (DefaultBootsPage rows when absent, at most
// MaxBootsPage) and continue=TOKEN, the "continue" of the page before:
// rows come by name, and a fleet read page by page sees each instance
// once. The counts are those of the whole selection, on every page.

// Pages of GET /v1/boots. A row is at most about 1.5 KiB (a name, its
// stage and module, the first error's names and 256 bytes of its
// message) and 200 bytes for most: a page is at most 1.5 MiB, whatever
// the guests post.
const (
	DefaultBootsPage = 500
	MaxBootsPage     = 1000
)

// The parameters of GET /v1/boots besides the filter's.
const (
	paramWatch    = "watch"
	paramLimit    = "limit"
	paramContinue = "continue"
)

// bootsParams are the parameters GET /v1/boots knows.
var bootsParams = []string{firstboot.QueryState, firstboot.QueryAgent, firstboot.QueryName, firstboot.QueryMinAge, firstboot.QueryMaxAge,
	paramLimit, paramContinue, paramWatch}

// bootsQuery is a parsed GET /v1/boots.
type bootsQuery struct {
	filter firstboot.Filter
	watch  bool
	limit  int    // rows of the page
	after  string // the name the page starts after
}

// parseBootsQuery reads GET /v1/boots's query, or every problem, each
// naming its parameter and value. An unknown parameter is one: a
// misspelt filter would select everything.
func parseBootsQuery(q url.Values) (bq bootsQuery, problems []string) {
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
	bq.filter, bq.limit = f, DefaultBootsPage
	switch v := q.Get(paramWatch); v {
	case "", "false":
	case "true":
		bq.watch = true
	default:
		problems = append(problems, fmt.Sprintf("%s=%q: want true or false", paramWatch, v))
	}
	if v := q.Get(paramLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxBootsPage {
			problems = append(problems, fmt.Sprintf("%s=%q: want a number of rows from 1 to %d", paramLimit, v, MaxBootsPage))
		}
		bq.limit = n
	}
	if v := q.Get(paramContinue); v != "" {
		name, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(name) == 0 {
			problems = append(problems, fmt.Sprintf("%s=%q: want the continue of the page before", paramContinue, v))
		}
		bq.after = string(name)
	}
	if bq.watch && (q.Has(paramLimit) || q.Has(paramContinue)) {
		problems = append(problems, fmt.Sprintf("%s=true: a watch sends the whole selection, then its changes: %s and %s page a read", paramWatch, paramLimit, paramContinue))
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(bootsParams, k) {
			problems = append(problems, fmt.Sprintf("%s: unknown parameter: want %s", k, strings.Join(bootsParams, ", ")))
		}
	}
	return bq, problems
}

// continueToken is the continue of a page whose last row is name: opaque
// to clients, which hand it back.
func continueToken(name string) string {
	if name == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(name))
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
// the fleet at most once per watchCoalesce, and less often as its reads
// and sends cost more (firstboot.WatchPause), and sends only what differs
// from what it sent. It also reads every watchRefresh, for what no event
// announces: a boot turning stalled, an instance added to or removed from
// the store.
var (
	watchCoalesce = 500 * time.Millisecond
	watchRefresh  = 15 * time.Second
)

// WatchBoots calls fn with the summary of the boots that pass f at once,
// then with each new summary as boots change, until ctx ends (it returns
// ctx's error) or fn returns an error (it returns that error).
func (l *Local) WatchBoots(ctx context.Context, f firstboot.Filter, fn func(firstboot.Summary) error) error {
	return l.watch(ctx, f, func(sum, _ firstboot.Summary, _ bool) (int, error) { return 0, fn(sum) }, nil)
}

// watch reads the fleet at once and at each change, and calls send with
// the summary read and its changes since the last one sent (first is
// set for the first, which has no changes), until ctx ends or send
// fails. send returns the bytes it sent, which pace the next read; idle,
// when set, is called at each refresh that found nothing new: the
// handler's keep-alive.
func (l *Local) watch(ctx context.Context, f firstboot.Filter, send func(sum, changes firstboot.Summary, first bool) (int, error), idle func() error) error {
	md := l.opts.Metadata
	refresh := time.NewTicker(watchRefresh)
	defer refresh.Stop()
	var last *firstboot.Summary
	refreshed := false
	for {
		// Taken before reading, so that a change while reading wakes the
		// next wait.
		changes := md.Boots().Changes()
		began := time.Now()
		sum := md.Fleet(f)
		read := time.Since(began)
		var ch firstboot.Summary
		if last != nil {
			ch = sum.Changes(*last)
		}
		switch {
		case last == nil || !ch.Unchanged(last.Counts):
			n, err := send(sum, ch, last == nil)
			if err != nil {
				return err
			}
			last = &sum
			if err := pause(ctx, firstboot.WatchPause(watchCoalesce, n, read)); err != nil {
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
