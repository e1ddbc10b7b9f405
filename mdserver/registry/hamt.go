package registry

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"sync/atomic"
)

// hamt is a persistent hash map (a hash array mapped trie): a version is
// never modified once published, and a new version that differs by one
// key shares all but the path to that key with the old one (O(log n)
// new nodes). Snapshots hold their indexes in hamts so that a change of
// one instance costs O(changed), not a copy of every map.
//
// Updates go through an editor: the nodes an editor created are its own
// and are changed in place, so that building a version of n keys from
// scratch allocates about what a Go map would, and only the nodes shared
// with earlier versions are copied.
type hamt[K comparable, V comparable] struct {
	root *hnode[K, V]
	len  int
}

// hnode is a trie node. In a branch node, bitmap has a bit set for each of
// the 32 values of the hash's next 5 bits that has a slot, and slots are
// in the order of those bits. Past the hash's 64 bits (keys whose hashes
// collide), a node is a plain list of leaves (collision).
type hnode[K comparable, V comparable] struct {
	gen       uint64 // the editor that owns the node (may change it in place)
	bitmap    uint32
	collision bool
	slots     []hslot[K, V]
}

// hslot is a subtree (sub != nil) or one key and its value.
type hslot[K comparable, V comparable] struct {
	sub  *hnode[K, V]
	hash uint64
	key  K
	val  V
}

var (
	hamtSeed = maphash.MakeSeed()
	hamtGens atomic.Uint64
)

const hamtBits = 5

func hashOf[K comparable](k K) uint64 { return maphash.Comparable(hamtSeed, k) }

// get returns the value of k.
func (m hamt[K, V]) get(k K) (V, bool) { return m.getHashed(hashOf(k), k) }

func (m hamt[K, V]) getHashed(h uint64, k K) (V, bool) {
	n := m.root
	for shift := uint(0); n != nil; shift += hamtBits {
		if n.collision {
			for _, s := range n.slots {
				if s.key == k {
					return s.val, true
				}
			}
			break
		}
		bit := uint32(1) << ((h >> shift) & 31)
		if n.bitmap&bit == 0 {
			break
		}
		s := &n.slots[bits.OnesCount32(n.bitmap&(bit-1))]
		if s.sub == nil {
			if s.hash == h && s.key == k {
				return s.val, true
			}
			break
		}
		n = s.sub
	}
	var zero V
	return zero, false
}

// each calls f for every key and value, in no particular order.
func (m hamt[K, V]) each(f func(K, V)) {
	var walk func(*hnode[K, V])
	walk = func(n *hnode[K, V]) {
		for i := range n.slots {
			if s := &n.slots[i]; s.sub != nil {
				walk(s.sub)
			} else {
				f(s.key, s.val)
			}
		}
	}
	if m.root != nil {
		walk(m.root)
	}
}

// hamtEditor derives a new version of a hamt. The version it returns
// (done) must not be edited any more by it.
type hamtEditor[K comparable, V comparable] struct {
	m   hamt[K, V]
	gen uint64
}

func (m hamt[K, V]) edit() *hamtEditor[K, V] {
	return &hamtEditor[K, V]{m: m, gen: hamtGens.Add(1)}
}

func (e *hamtEditor[K, V]) done() hamt[K, V] {
	m := e.m
	e.m, e.gen = hamt[K, V]{}, 0
	return m
}

// own returns n, or a copy of it that e may change.
func (e *hamtEditor[K, V]) own(n *hnode[K, V], extra int) *hnode[K, V] {
	if n.gen == e.gen {
		return n
	}
	c := &hnode[K, V]{gen: e.gen, bitmap: n.bitmap, collision: n.collision, slots: make([]hslot[K, V], len(n.slots), len(n.slots)+extra)}
	copy(c.slots, n.slots)
	return c
}

// set gives k the value v.
func (e *hamtEditor[K, V]) set(k K, v V) { e.setHashed(hashOf(k), k, v) }

func (e *hamtEditor[K, V]) setHashed(h uint64, k K, v V) {
	if e.m.root == nil {
		e.m.root = &hnode[K, V]{gen: e.gen}
	}
	var added bool
	e.m.root, added = e.setIn(e.m.root, 0, h, k, v)
	if added {
		e.m.len++
	}
}

func (e *hamtEditor[K, V]) setIn(n *hnode[K, V], shift uint, h uint64, k K, v V) (*hnode[K, V], bool) {
	if n.collision {
		for i, s := range n.slots {
			if s.key == k {
				if s.val == v {
					return n, false
				}
				n = e.own(n, 0)
				n.slots[i].val = v
				return n, false
			}
		}
		n = e.own(n, 1)
		n.slots = append(n.slots, hslot[K, V]{hash: h, key: k, val: v})
		return n, true
	}
	bit := uint32(1) << ((h >> shift) & 31)
	i := bits.OnesCount32(n.bitmap & (bit - 1))
	if n.bitmap&bit == 0 {
		n = e.own(n, 1)
		n.bitmap |= bit
		n.slots = slices.Insert(n.slots, i, hslot[K, V]{hash: h, key: k, val: v})
		return n, true
	}
	s := n.slots[i]
	switch {
	case s.sub != nil:
		sub, added := e.setIn(s.sub, shift+hamtBits, h, k, v)
		if sub != s.sub {
			n = e.own(n, 0)
			n.slots[i].sub = sub
		}
		return n, added
	case s.hash == h && s.key == k:
		if s.val == v {
			return n, false
		}
		n = e.own(n, 0)
		n.slots[i].val = v
		return n, false
	}
	// Two keys in one slot: push both down a level.
	sub := &hnode[K, V]{gen: e.gen}
	if shift+hamtBits >= 64 {
		sub.collision = true
		sub.slots = []hslot[K, V]{s}
	} else {
		sub, _ = e.setIn(sub, shift+hamtBits, s.hash, s.key, s.val)
	}
	sub, _ = e.setIn(sub, shift+hamtBits, h, k, v)
	n = e.own(n, 0)
	n.slots[i] = hslot[K, V]{sub: sub}
	return n, true
}

// del removes k.
func (e *hamtEditor[K, V]) del(k K) { e.delHashed(hashOf(k), k) }

func (e *hamtEditor[K, V]) delHashed(h uint64, k K) {
	if e.m.root == nil {
		return
	}
	var removed bool
	e.m.root, removed = e.delIn(e.m.root, 0, h, k)
	if removed {
		e.m.len--
	}
}

// delIn returns n without k (nil when nothing is left).
func (e *hamtEditor[K, V]) delIn(n *hnode[K, V], shift uint, h uint64, k K) (*hnode[K, V], bool) {
	if n.collision {
		for i, s := range n.slots {
			if s.key == k {
				if len(n.slots) == 1 {
					return nil, true
				}
				n = e.own(n, 0)
				n.slots = slices.Delete(n.slots, i, i+1)
				return n, true
			}
		}
		return n, false
	}
	bit := uint32(1) << ((h >> shift) & 31)
	if n.bitmap&bit == 0 {
		return n, false
	}
	i := bits.OnesCount32(n.bitmap & (bit - 1))
	s := n.slots[i]
	if s.sub != nil {
		sub, removed := e.delIn(s.sub, shift+hamtBits, h, k)
		if !removed {
			return n, false
		}
		if sub != nil {
			n = e.own(n, 0)
			n.slots[i].sub = sub
			return n, true
		}
	} else if s.hash != h || s.key != k {
		return n, false
	}
	if len(n.slots) == 1 {
		return nil, true
	}
	n = e.own(n, 0)
	n.bitmap &^= bit
	n.slots = slices.Delete(n.slots, i, i+1)
	return n, true
}
