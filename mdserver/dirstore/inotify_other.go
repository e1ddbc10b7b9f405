//go:build unix && !linux

package dirstore

import (
	"errors"
	"runtime"
)

// startInotify has no inotify to use outside Linux: startWatching polls.
func (s *Store) startInotify() error {
	return errors.New("inotify is Linux-only; " + runtime.GOOS + " polls")
}
