package mdserver

import (
	"sync"
	"unsafe"

	"github.com/vminit/vminit/mdserver/registry"
)

// entry is the rendered data of one record revision: a slot for each
// piece the dialects declared (newPiece), rendered on first use,
// separately: an EC2 guest never pays for the NoCloud or ConfigDrive
// metadata, and a piece that fails to render fails only the requests that
// need it.
type entry struct {
	key   registry.Key
	slots []slot // by piece.slot

	mu      sync.Mutex // guards the metrics accounting below
	size    int64      // bytes added to the cache metrics
	counted bool       // counted in vminit_mdserver_cache_entries
	dropped bool       // out of the cache: rendering it no longer counts
}

// slot holds one piece of an entry: the rendered value, or a
// renderError. One field for both keeps a slot at 32 bytes, on every
// rendered instance.
type slot struct {
	once sync.Once
	v    any
}

// renderError is a slot's value when its piece failed to render.
type renderError struct{ err error }

// A piece is what a dialect renders from a record and keeps for the
// record's revision: declared at package level, beside the dialect's
// register call (or in userdata.go when dialects share it).
type piece[T any] struct {
	slot   int
	render func(h *Handler, rec *registry.Record) (T, error)
	size   func(T) int64 // what a rendered piece adds to the cache metrics
}

// pieces is the number of pieces declared: the slots of an entry.
var pieces int

// newPiece declares a piece of every record's cache entry.
func newPiece[T any](render func(h *Handler, rec *registry.Record) (T, error), size func(T) int64) *piece[T] {
	if sealed.Load() {
		panic("mdserver: piece declared after NewHandler")
	}
	pieces++
	return &piece[T]{slot: pieces - 1, render: render, size: size}
}

// get returns the piece of rec's revision, rendering it on first use.
func (p *piece[T]) get(h *Handler, rec *registry.Record) (T, error) {
	e := h.entry(rec)
	s := &e.slots[p.slot]
	s.once.Do(func() {
		v, err := p.render(h, rec)
		if err != nil {
			s.v = renderError{err}
			return
		}
		s.v = v
		h.account(e, p.size(v))
	})
	if re, ok := s.v.(renderError); ok {
		var zero T
		return zero, re.err
	}
	return s.v.(T), nil
}

func (h *Handler) entry(rec *registry.Record) *entry {
	v, ok := h.cache.Load(rec.Name)
	if ok {
		if e := v.(*entry); e.key.Revision == rec.Revision {
			return e
		}
	}
	e := &entry{key: rec.Key(), slots: make([]slot, pieces)}
	if ok {
		if h.cache.CompareAndSwap(rec.Name, v, e) {
			h.uncount(v.(*entry))
		} else if v2, ok := h.cache.Load(rec.Name); ok && v2.(*entry).key.Revision == rec.Revision {
			return v2.(*entry)
		}
		return e
	}
	if v, loaded := h.cache.LoadOrStore(rec.Name, e); loaded {
		return v.(*entry)
	}
	return e
}

// account adds n rendered bytes of e to the cache metrics.
func (h *Handler) account(e *entry, n int64) {
	if h.metrics == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dropped {
		return
	}
	if !e.counted {
		e.counted = true
		h.metrics.cacheEntries.Add(1)
	}
	e.size += n
	h.metrics.cacheBytes.Add(n)
}

// uncount takes e, dropped from the cache, out of the metrics.
func (h *Handler) uncount(e *entry) {
	if h.metrics == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dropped = true
	if e.counted {
		e.counted = false
		h.metrics.cacheEntries.Add(-1)
		h.metrics.cacheBytes.Add(-e.size)
	}
}

// treeBytes is the size of the trees' paths and bodies, each counted once
// however many trees share it (the EC2 levels share most of theirs).
func treeBytes(trees ...map[string][]byte) int64 {
	var n int64
	seen := map[uintptr]bool{}
	once := func(ptr uintptr, size int) {
		if size > 0 && !seen[ptr] {
			seen[ptr] = true
			n += int64(size)
		}
	}
	for _, m := range trees {
		for k, v := range m {
			once(uintptr(unsafe.Pointer(unsafe.StringData(k))), len(k))
			once(uintptr(unsafe.Pointer(unsafe.SliceData(v))), len(v))
		}
	}
	return n
}

func bytesLen(b []byte) int64 { return int64(len(b)) }

// sweep drops the state of instances that are gone, the passwords and
// first boots of incarnations that are gone, and the entries of versions
// that are no longer served.
func (h *Handler) sweep(s *registry.Snapshot) {
	h.passwords.Range(func(k, v any) bool {
		if !s.Incarnation(k.(string), v.(*password).uid) {
			h.passwords.CompareAndDelete(k, v)
		}
		return true
	})
	h.boots.Retain(s.Incarnation)
	h.cache.Range(func(k, v any) bool {
		if !s.Serves(v.(*entry).key) {
			if h.cache.CompareAndDelete(k, v) {
				h.uncount(v.(*entry))
			}
		}
		return true
	})
	h.limits.forget(s)
	h.writes.forget(s)
}
