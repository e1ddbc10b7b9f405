// Package httppath says whether a request path is one the servers'
// ServeMux routes as is: ServeMux answers any other with a redirect whose
// body is HTML, which the metadata server and the admin API never send
// (their errors are empty or JSON), so they refuse such paths themselves.
package httppath

import "path"

// IsCanonical reports whether p is rooted and has no empty, "." or ".."
// element: the form ServeMux serves without redirecting. A trailing slash
// is kept ("/latest/meta-data/"), but "//" is not the root.
func IsCanonical(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	return c == p || c != "/" && c+"/" == p
}
