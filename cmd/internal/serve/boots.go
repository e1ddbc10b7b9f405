package serve

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/vminit/vminit/internal/lib/outcome"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// persistEvery is how often the server writes the first boots that
// changed to a shared store (an instance's status at most every
// firstboot.PaceTicks of them, unless its state changed); flushRetry how
// often it tries its last write again as it stops while the store refuses
// it; followRetry how long it waits before following the other replicas'
// again after FollowBoots failed. Variables for the tests.
var (
	persistEvery = time.Second
	flushRetry   = time.Second
	followRetry  = 5 * time.Second
)

// shareBoots, for a store that shares first-boot statuses (nil: none),
// writes the handler's to it (firstboot.Tracker.Persist) and merges what
// the other replicas write (Shared.FollowBoots, again after a failure);
// stop ends both, and writes what changed since the last write
// (Tracker.Flush), trying again while the store refuses, for at most its
// timeout. Failures are logged once per change of condition: the server
// serves on, from its own tracker.
func (s *Server) shareBoots(ctx context.Context, shared firstboot.Shared) (stop func(timeout time.Duration)) {
	if shared == nil {
		return func(time.Duration) {}
	}
	ctx, cancel := context.WithCancel(ctx)
	boots := s.Handler.Boots()
	sink := &loggedSink{Sink: shared, log: s.log}
	var wg sync.WaitGroup
	wg.Go(func() { boots.Persist(ctx, sink, persistEvery, nil) })
	wg.Go(func() { s.followBoots(ctx, shared, boots) })
	return func(timeout time.Duration) {
		cancel()
		wg.Wait()
		s.flushBoots(boots, sink, timeout)
	}
}

// flushBoots writes what the guests posted since Persist's last write,
// again every flushRetry while the store refuses (an etcd outage as the
// server stops), for at most timeout. What it could not write is counted
// in the warning: those events are lost with the process.
func (s *Server) flushBoots(boots *firstboot.Tracker, sink firstboot.Sink, timeout time.Duration) {
	fctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := boots.Flush(fctx, sink)
		if err == nil {
			if attempt > 1 {
				s.log.Info("the last first-boot statuses were written to the store", "attempts", attempt)
			}
			return
		}
		changes, instances := boots.Unwritten()
		if attempt == 1 {
			s.log.Warn("the last first-boot statuses are not written yet; trying again until the shutdown timeout",
				"unwritten_events", changes, "instances", instances, "timeout", timeout, "error", err)
		}
		select {
		case <-fctx.Done():
			s.log.Warn("first-boot events accepted from guests were not written to the store and are lost",
				"unwritten_events", changes, "instances", instances, "attempts", attempt, "error", err)
			return
		case <-time.After(flushRetry):
		}
	}
}

// loggedSink logs the writes that fail, once per change of condition
// (failing, failing otherwise, written again) rather than at every
// interval of an outage.
type loggedSink struct {
	firstboot.Sink
	log *slog.Logger

	last outcome.Last // the last write's error; "" when it went through
}

func (l *loggedSink) WriteBoot(ctx context.Context, sts []firstboot.Status) error {
	err := l.Sink.WriteBoot(ctx, sts)
	if err != nil && ctx.Err() != nil {
		return err // the server stops: flushBoots says what became of it
	}
	why := ""
	if err != nil {
		why = err.Error()
	}
	switch {
	case !l.last.Record(why):
	case why != "":
		l.log.Warn("first-boot statuses not written to the store; trying again at every interval", "error", err)
	default:
		l.log.Info("first-boot statuses are written to the store again")
	}
	return err
}

// followBoots runs FollowBoots until ctx ends, again after it failed.
func (s *Server) followBoots(ctx context.Context, shared firstboot.Shared, boots *firstboot.Tracker) {
	for {
		err := shared.FollowBoots(ctx, boots)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("following the other replicas' first-boot statuses stopped; following again", "error", err, "in", followRetry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(followRetry):
		}
	}
}
