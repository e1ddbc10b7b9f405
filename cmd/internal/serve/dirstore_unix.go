//go:build unix

package serve

import (
	"log/slog"
	"runtime/debug"

	"github.com/vminit/vminit/mdserver/dirstore"
	"github.com/vminit/vminit/mdserver/registry"
)

// openDir opens a directory of spec files (dirstore needs a Unix). A
// change of the directory that serves an instance no address identifies
// warns as New does at start.
// Once the checks deferred at start are done, the memory they and the
// load used and no longer do goes back to the system at once: they make
// several times the live heap in garbage (each instance decoded and
// rendered once), and the runtime's scavenger would return it over
// minutes, so that a server that has just started would hold its
// start-up's peak meanwhile (docs/benchmarks.md, "Beside the peers").
func openDir(cfg StoreConfig, checks registry.Checks, logger *slog.Logger) (Store, error) {
	s, err := dirstore.Open(cfg.Dir, dirstore.Options{Logger: logger, CacheFile: cfg.DirCache, Checks: checks, DeferChecks: true,
		Unaddressed: func(names []string) { warnUnaddressed(names, false, logger) }})
	if err != nil {
		return nil, err
	}
	go func() {
		<-s.ChecksDone()
		debug.FreeOSMemory()
	}()
	return s, nil
}
