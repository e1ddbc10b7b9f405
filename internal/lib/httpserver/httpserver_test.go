package httpserver

import (
	"net/http"
	"testing"
	"time"
)

// TestNew: the shared limits and the listener's own are all set.
func TestNew(t *testing.T) {
	h := http.NotFoundHandler()
	s := New(h, 10*time.Second, 30*time.Second)
	if s.Handler == nil || s.ReadHeaderTimeout != 5*time.Second || s.ReadTimeout != 10*time.Second ||
		s.WriteTimeout != 30*time.Second || s.IdleTimeout != 60*time.Second || s.MaxHeaderBytes != 16<<10 {
		t.Errorf("%+v", s)
	}
}
