package httppath

import "testing"

func TestIsCanonical(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/latest/meta-data/": true, "/latest/user-data": true, "/openstack": true,
		"": false, "//": false, "latest": false, "//latest": false, "/latest//x": false, "/./x": false,
		"/x/.": false, "/x/..": false, "/a/../b": false, "/x/": true, "/x//": false, "*": false,
	} {
		if got := IsCanonical(p); got != want {
			t.Errorf("IsCanonical(%q) = %v, want %v", p, got, want)
		}
	}
}

// FuzzIsCanonical: a canonical path is what path.Clean leaves alone (but
// for one trailing slash), so ServeMux routes it without a redirect.
func FuzzIsCanonical(f *testing.F) {
	for _, p := range []string{"/", "//", "/a/../b", "/latest/meta-data/", "/x/./", ""} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !IsCanonical(p) {
			return
		}
		if p[0] != '/' || len(p) > 1 && p[:2] == "//" {
			t.Fatalf("%q accepted", p)
		}
		for i := 0; i+1 < len(p); i++ {
			if p[i] == '/' && p[i+1] == '/' {
				t.Fatalf("%q accepted", p)
			}
		}
	})
}
