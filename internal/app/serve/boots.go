package serve

import (
	"context"
	"sync"
	"time"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// persistEvery is how often the server writes the first boots that
// changed to a shared store, flushTimeout how long its last write may
// take as it stops; followRetry how long it waits before following the
// other replicas' again after FollowBoots failed. Variables for the
// tests.
var (
	persistEvery = time.Second
	flushTimeout = 10 * time.Second
	followRetry  = 5 * time.Second
)

// shareBoots, for a store that shares first-boot statuses (nil: none),
// writes the handler's to it (firstboot.Tracker.Persist) and merges what
// the other replicas write (Shared.FollowBoots, again after a failure);
// stop ends both, and writes what changed since the last write
// (Tracker.Flush, for at most flushTimeout). Failures are logged: the
// server serves on, from its own tracker.
func (s *Server) shareBoots(ctx context.Context, shared firstboot.Shared) (stop func()) {
	if shared == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	boots := s.Handler.Boots()
	var wg sync.WaitGroup
	wg.Go(func() {
		boots.Persist(ctx, shared, persistEvery, func(err error) {
			s.log.Warn("first-boot statuses not written to the store; retrying", "error", err)
		})
	})
	wg.Go(func() { s.followBoots(ctx, shared, boots) })
	return func() {
		cancel()
		wg.Wait()
		fctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		if err := boots.Flush(fctx, shared); err != nil {
			s.log.Warn("the last first-boot statuses were not written to the store", "error", err)
		}
	}
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
