package firstboot

import "context"

// Loader is optionally implemented by a Shared store: LoadBoots merges
// what the store holds into t (Tracker.Merge) once, and returns. A reader
// that answers once (`vminit instances status --kubeconfig`) calls it
// before reading, so that it does not read before FollowBoots, which runs
// beside it, has merged anything.
type Loader interface {
	LoadBoots(ctx context.Context, t *Tracker) error
}
