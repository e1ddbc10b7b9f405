package servekit

import "testing"

// TestGuestHops: --guest-hops defaults to one router in node mode (the
// virt-launcher pod's), none elsewhere, and is bounded.
func TestGuestHops(t *testing.T) {
	for _, tc := range []struct {
		f    serveFlags
		want int
		ok   bool
	}{
		{serveFlags{guestHops: -1}, 0, true},
		{serveFlags{guestHops: -1, node: "n1"}, 1, true},
		{serveFlags{guestHops: 0, node: "n1"}, 0, true},
		{serveFlags{guestHops: 3}, 3, true},
		{serveFlags{guestHops: 9}, 0, false},
		{serveFlags{guestHops: -2}, 0, false},
	} {
		got, err := guestHops(tc.f)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("guestHops(%+v) = %d, %v", tc.f, got, err)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8443": true, "[::1]:1": true, "localhost:1": true,
		"0.0.0.0:8443": false, ":8443": false, "10.0.0.1:1": false, "nonsense": false} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
}
