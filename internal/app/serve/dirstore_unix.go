//go:build unix

package serve

import (
	"log/slog"

	"github.com/vminit/vminit/mdserver/dirstore"
	"github.com/vminit/vminit/mdserver/registry"
)

// openDir opens a directory of spec files (dirstore needs a Unix).
func openDir(cfg StoreConfig, checks registry.Checks, logger *slog.Logger) (Store, error) {
	return dirstore.Open(cfg.Dir, dirstore.Options{Logger: logger, CacheFile: cfg.DirCache, Checks: checks, DeferChecks: true})
}
