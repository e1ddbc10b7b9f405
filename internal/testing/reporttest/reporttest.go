// Package reporttest is a loopback listener in the place of a vminit
// server's report path, for the tests of the report scripts the renderers
// put in guests (cloudinit, ignition): it answers the codes a test wants
// (a 503 to make a script retry) and keeps what was posted. The real
// server's handling of the same scripts' reports is mdserver's tests'.
package reporttest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/vminit/vminit/bootreport"
)

// Server answers each POST with the next of its codes (200 when they run
// out) and keeps the bodies.
type Server struct {
	*httptest.Server
	mu     sync.Mutex
	codes  []int
	bodies [][]byte
}

// NewServer starts a Server, closed when the test ends. A request that is
// not a JSON POST to bootreport.ReportPath is a test error.
func NewServer(t *testing.T, codes ...int) *Server {
	s := &Server{codes: codes}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != bootreport.ReportPath || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s (%s)", r.Method, r.URL, r.Header.Get("Content-Type"))
		}
		s.bodies = append(s.bodies, body)
		code := http.StatusOK
		if len(s.codes) > 0 {
			code, s.codes = s.codes[0], s.codes[1:]
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

// Bodies returns what was posted, in order.
func (s *Server) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies
}
