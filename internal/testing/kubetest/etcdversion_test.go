package kubetest

import "testing"

// TestWatchCacheEtcd: the releases with etcd's progress-notification fix,
// per release line (Debian's 3.4.23 lacks it).
func TestWatchCacheEtcd(t *testing.T) {
	for _, c := range []struct {
		v    [3]int
		want bool
	}{
		{[3]int{3, 4, 23}, false}, {[3]int{3, 4, 31}, true}, {[3]int{3, 5, 0}, false},
		{[3]int{3, 5, 12}, false}, {[3]int{3, 5, 13}, true}, {[3]int{3, 6, 0}, true},
		{[3]int{3, 6, 16}, true}, {[3]int{3, 3, 99}, false}, {[3]int{4, 0, 0}, true},
	} {
		if got := watchCacheEtcd(c.v); got != c.want {
			t.Errorf("watchCacheEtcd(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}
