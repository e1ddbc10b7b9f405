package dirstore

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// startInotify watches the directory with inotify (Linux only; elsewhere
// startWatching falls back to polling).
func (s *Store) startInotify() error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return err
	}
	const mask = unix.IN_CREATE | unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
		unix.IN_DELETE | unix.IN_ATTRIB | unix.IN_MODIFY | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	if _, err := unix.InotifyAddWatch(fd, s.dir, mask); err != nil {
		unix.Close(fd)
		return err
	}
	// A non-blocking fd in an os.File goes through the runtime poller, so
	// Close unblocks the reader.
	f := os.NewFile(uintptr(fd), "inotify")
	events := make(chan struct{}, 1)
	s.watching = "inotify"
	s.closeFn = func() { f.Close() }
	go func() {
		defer close(events)
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				select {
				case <-s.stop:
				default:
					s.log.Error("dirstore: inotify read failed; changes are no longer noticed (send SIGHUP to reload)", "err", err)
				}
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0 {
					s.log.Error("dirstore: the watched directory was removed or moved; serving the last snapshot")
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
			select {
			case events <- struct{}{}:
			default:
			}
		}
	}()
	go s.watchLoop(events)
	return nil
}
