//go:build unix

package dirstore

// The deferred checks (Options.DeferChecks): Open indexes the files
// unchecked, and checkDeferred checks them in the background while the
// server already serves, a record's first lookup checking it first.

import (
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vminit/vminit/internal/lib/parallel"
	"github.com/vminit/vminit/mdserver/registry"
)

// ChecksDone is closed when the background pass of Options.DeferChecks
// has ended (at once when there was none): every instance Open read is
// checked, or the store is closed.
func (s *Store) ChecksDone() <-chan struct{} {
	if s.checksDone == nil {
		return closedChan
	}
	return s.checksDone
}

// closedChan is what ChecksDone returns when there was no pass to wait for.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// checkDeferred is the background pass of Options.DeferChecks: it checks
// every record Open indexed unchecked, takes out those that fail, and
// then lets the start-up cache be written with the rest. It stops early
// when the store is closed.
func (s *Store) checkDeferred() {
	defer close(s.checksDone)
	if h := deferHook.Load(); h != nil {
		(*h)()
	}
	start := time.Now()
	todo := s.uncheckedRecords()
	stopped := func() bool {
		select {
		case <-s.stop:
			return true
		default:
			return false
		}
	}
	// Half the workers: the other half serves the guests meanwhile, and
	// the garbage the checks make (their renderings) comes at half the
	// rate, so that less of it outlives a collection.
	errs := parallel.Map(len(todo), max(1, s.opts.Workers/2), func(i int) error {
		if stopped() {
			return nil
		}
		err := todo[i].rec.Verify()
		// The guests' requests go first: on a core of its own, a worker
		// would hold it until preempted (10 ms), and an early guest's
		// accept, read and answer would each wait for that.
		runtime.Gosched()
		return err
	})
	s.mu.Lock()
	refused := s.refuseFailedLocked(todo, errs)
	s.cacheChangedLocked() // the records checked now may be cached
	s.mu.Unlock()
	if stopped() {
		return
	}
	s.log.Info("dirstore: deferred checks done", "checked", len(todo), "refused", refused, "duration", time.Since(start))
}

// unchecked is a record the background pass is to check.
type unchecked struct {
	file   string
	rec    *registry.Record
	served bool // else pending: refused for now, for a name or an address
}

// uncheckedRecords lists, by file name, the records, served or pending,
// whose content checks have not passed.
func (s *Store) uncheckedRecords() []unchecked {
	s.mu.Lock()
	var todo []unchecked
	// A record a request checked first is here too if it failed.
	s.ix.Each(func(file string, rec *registry.Record) {
		if ran, err := rec.Checked(); !ran || err != nil {
			todo = append(todo, unchecked{file, rec, true})
		}
	})
	s.ix.EachPending(func(file string, rec *registry.Record) {
		if ran, err := rec.Checked(); !ran || err != nil {
			todo = append(todo, unchecked{file, rec, false})
		}
	})
	s.mu.Unlock()
	slices.SortFunc(todo, func(a, b unchecked) int { return strings.Compare(a.file, b.file) })
	return todo
}

// refuseFailedLocked takes out each record of todo whose check failed
// (errs[i] is todo[i]'s), if it is still the file's version, and counts
// those it took out; with s.mu held.
func (s *Store) refuseFailedLocked(todo []unchecked, errs []error) (refused int) {
	for i, err := range errs {
		switch it := todo[i]; {
		case err == nil:
		case it.served:
			if s.ix.Unserve(it.file, it.rec, err) {
				refused++
				s.reloads.Add(1)
			}
		default:
			if p, _ := s.ix.Pending(it.file); p == it.rec { // a version that does not load, after all
				s.applyLocked([]registry.Change{{Key: it.file, Err: err}})
				refused++
			}
		}
	}
	return refused
}

// deferHook, when set by a test, runs before the background pass of
// Options.DeferChecks.
var deferHook atomic.Pointer[func()]
