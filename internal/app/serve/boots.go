package serve

import (
	"context"
	"sync"
	"time"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// persistEvery is how often the server writes the first boots that
// changed to a shared store; followRetry how long it waits before
// following the other replicas' again after FollowBoots failed (a
// variable for the tests).
const persistEvery = time.Second

var followRetry = 5 * time.Second

// shareBoots, for a store that shares first-boot statuses (nil: none),
// writes the handler's to it (firstboot.Tracker.Persist) and merges what
// the other replicas write (Shared.FollowBoots, again after a failure),
// until ctx ends; stop waits for both to return. Failures are logged:
// the server serves on, from its own tracker.
func (s *Server) shareBoots(ctx context.Context, shared firstboot.Shared) (stop func()) {
	if shared == nil {
		return func() {}
	}
	boots := s.Handler.Boots()
	var wg sync.WaitGroup
	wg.Go(func() {
		boots.Persist(ctx, shared, persistEvery, func(err error) {
			s.log.Warn("first-boot statuses not written to the store; retrying", "error", err)
		})
	})
	wg.Go(func() {
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
	})
	return wg.Wait
}
