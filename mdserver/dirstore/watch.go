//go:build unix

package dirstore

// Watching the directory: inotify events (inotify_linux.go) or a poll
// set off a debounced reload of the files that changed.

import "time"

// startWatching watches the directory as Options say: not at all, by
// polling, or with inotify (polling every 2s where inotify is
// unavailable).
func (s *Store) startWatching() {
	if s.opts.NoWatch {
		close(s.done)
		return
	}
	if s.opts.PollInterval > 0 {
		s.watching = "poll"
		go s.poll(s.opts.PollInterval)
		return
	}
	if err := s.startInotify(); err != nil {
		s.log.Warn("dirstore: inotify unavailable; polling every 2s", "err", err)
		s.watching = "poll"
		go s.poll(2 * time.Second)
	}
}

// watchLoop coalesces change notifications: the first one starts the
// debounce timer, those arriving before it fires are absorbed, then the
// directory is re-read once.
func (s *Store) watchLoop(events <-chan struct{}) {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case _, ok := <-events:
			if !ok {
				return
			}
		}
		t := time.NewTimer(s.opts.Debounce)
	drain:
		for {
			select {
			case <-s.stop:
				t.Stop()
				return
			case <-events:
			case <-t.C:
				break drain
			}
		}
		if !s.reloadOrStop() {
			return
		}
	}
}

// poll re-reads the directory every interval, for a file system without
// inotify (or Options.PollInterval): a reload compares the files' stamps
// and reads only those that changed.
func (s *Store) poll(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if !s.reloadOrStop() {
				return
			}
		}
	}
}

// reloadOrStop reloads, and returns false without waiting for the reload
// to end if the store is closed meanwhile.
func (s *Store) reloadOrStop() bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.reload(false)
	}()
	select {
	case <-done:
		return true
	case <-s.stop:
		return false
	}
}
