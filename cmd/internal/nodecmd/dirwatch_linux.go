package nodecmd

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// dirEvents are the changes to a directory's entries that may make a
// runtime read another network configuration: a file created, written
// and closed, renamed in or out (how CNIs and atomicfile replace a
// file), deleted, or its mode changed. IN_MODIFY is left out: a file
// half-written is not worth reading; its IN_CLOSE_WRITE follows.
const dirEvents = unix.IN_CREATE | unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
	unix.IN_DELETE | unix.IN_ATTRIB

// watchDir returns a channel that receives after the entries of dir
// change, until ctx ends. It has room for one signal, so a burst of
// changes (a CNI writing a temporary file and renaming it, then our own
// edit) wakes its reader once or twice, never queues: the reader reads
// the directory afresh each time, so what the events were does not
// matter. If dir itself is removed or replaced the kernel drops the
// watch and the channel goes quiet: the caller's slow poll still runs.
//
// It is Linux's inotify through golang.org/x/sys/unix, which the agent
// links already, rather than github.com/fsnotify/fsnotify: one
// directory, no event decoding, and fsnotify is in this module's graph
// only as a requirement of k8s.io/apiextensions-apiserver, never built.
func watchDir(ctx context.Context, dir string) (<-chan struct{}, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, dirEvents); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify on %s: %w", dir, err)
	}
	// A non-blocking descriptor goes to Go's poller: a Read waits
	// without holding a thread, and Close ends it.
	f := os.NewFile(uintptr(fd), "inotify:"+dir)
	changed := make(chan struct{}, 1)
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go func() {
		// Room for one event with the longest name (NAME_MAX) and more.
		buf := make([]byte, 4096)
		for {
			if _, err := f.Read(buf); err != nil {
				return // closed: ctx ended
			}
			select {
			case changed <- struct{}{}:
			default: // a signal is pending already
			}
		}
	}()
	return changed, nil
}
