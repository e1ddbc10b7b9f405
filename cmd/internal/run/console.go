package run

import (
	"bytes"
	"strings"
	"sync"
)

// MaxConsole bounds the serial console a Guest keeps (Console): the last
// 4 MiB. A chatty or hostile guest cannot make vminit grow without limit.
const MaxConsole = 4 << 20

// maxLine bounds one console line handed to the watcher; the rest of a
// longer line is dropped (the console buffer keeps it).
const maxLine = 64 << 10

// ring keeps the last max bytes written to it.
type ring struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	if len(p) >= r.max {
		r.buf = append(r.buf[:0], p[len(p)-r.max:]...)
		return n, nil
	}
	if len(r.buf)+len(p) > 2*r.max {
		// Compact: keep the last max-len(p) bytes, then append.
		keep := r.buf[len(r.buf)-(r.max-len(p)):]
		r.buf = append(r.buf[:0], keep...)
	}
	r.buf = append(r.buf, p...)
	return n, nil
}

// Bytes returns the last max bytes written.
func (r *ring) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buf
	if len(b) > r.max {
		b = b[len(b)-r.max:]
	}
	return bytes.Clone(b)
}

// tail returns the last n lines of a console, each made printable (no
// escape sequences, other control characters made visible).
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(b), "\r", ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}

// lineSplitter calls fn with every complete line written to it, and with
// the first maxLine bytes of longer lines.
type lineSplitter struct {
	buf  []byte
	skip bool // inside an over-long line
	fn   func(string)
}

func (s *lineSplitter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !s.skip {
				s.buf = append(s.buf, p...)
				if len(s.buf) > maxLine {
					s.fn(string(s.buf[:maxLine]))
					s.buf, s.skip = s.buf[:0], true
				}
			}
			break
		}
		if !s.skip {
			s.buf = append(s.buf, p[:i]...)
			if len(s.buf) > maxLine {
				s.buf = s.buf[:maxLine]
			}
			s.fn(string(s.buf))
		}
		s.buf, s.skip = s.buf[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// flush hands over a last line without its newline.
func (s *lineSplitter) flush() {
	if len(s.buf) > 0 && !s.skip {
		s.fn(string(s.buf))
	}
	s.buf = s.buf[:0]
}
