package registry

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// TestHamt holds the persistent map to a Go map through random sets and
// deletes, with hashes that collide often (every level and past the
// hash's 64 bits), and checks that every earlier version is unchanged.
func TestHamt(t *testing.T) {
	for _, hash := range []struct {
		name string
		f    func(int) uint64
	}{
		{"maphash", func(k int) uint64 { return hashOf(k) }},
		{"few", func(k int) uint64 { return uint64(k % 7) }},               // deep paths, full collisions
		{"shared-prefix", func(k int) uint64 { return uint64(k%3) << 59 }}, // collisions below the last level
	} {
		t.Run(hash.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			type version struct {
				m    hamt[int, int]
				want map[int]int
			}
			var versions []version
			m, want := hamt[int, int]{}, map[int]int{}
			for round := range 200 {
				e := m.edit()
				for range rng.IntN(20) + 1 {
					k := rng.IntN(64)
					if rng.IntN(3) == 0 {
						e.delHashed(hash.f(k), k)
						delete(want, k)
					} else {
						v := rng.IntN(1000)
						e.setHashed(hash.f(k), k, v)
						want[k] = v
					}
				}
				m = e.done()
				versions = append(versions, version{m, maps.Clone(want)})
				for _, v := range versions {
					checkHamt(t, round, v.m, v.want, hash.f)
				}
			}
		})
	}
}

func checkHamt(t *testing.T, round int, m hamt[int, int], want map[int]int, hash func(int) uint64) {
	t.Helper()
	if m.len != len(want) {
		t.Fatalf("round %d: len %d, want %d", round, m.len, len(want))
	}
	for k := range 64 {
		v, ok := m.getHashed(hash(k), k)
		if w, wok := want[k]; ok != wok || v != w {
			t.Fatalf("round %d: key %d = %d, %v; want %d, %v", round, k, v, ok, w, wok)
		}
	}
	n := 0
	m.each(func(k, v int) {
		n++
		if want[k] != v {
			t.Fatalf("round %d: each gave %d=%d", round, k, v)
		}
	})
	if n != len(want) {
		t.Fatalf("round %d: each gave %d keys, want %d", round, n, len(want))
	}
}
