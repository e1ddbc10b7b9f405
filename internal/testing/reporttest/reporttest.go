// Package reporttest is a loopback listener in the place of a vminit
// server's report path, for the tests of the report scripts the renderers
// put in guests (cloudinit, ignition): it answers the codes a test wants
// (a 503 to make a script retry) and keeps what was posted; and the
// systemctl and journalctl the scripts ask about the boot. The real
// server's handling of the same scripts' reports is mdserver's tests'.
package reporttest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

// FailedUnit is one unit `systemctl list-units --failed` lists, and what
// `journalctl -u` prints for it.
type FailedUnit struct{ Unit, Journal string }

// Systemd writes systemctl and journalctl stand-ins into a new directory,
// for a report script's PATH (the tests run no systemd), and returns it:
// `systemctl is-system-running [--wait]` says state, `systemctl
// list-units --failed …` lists failed, and `journalctl -b -u UNIT …`
// prints that unit's journal.
func Systemd(t testing.TB, state string, failed []FailedUnit) string {
	t.Helper()
	var list, journal strings.Builder
	for _, u := range failed {
		fmt.Fprintf(&list, "%s loaded failed failed %s\n", u.Unit, u.Unit)
		fmt.Fprintf(&journal, "[ \"$3\" = %q ] && { cat <<'EOF'\n%s\nEOF\nexit 0; }\n", u.Unit, u.Journal)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755) // the script may run as another user (a guest's namespace)
	for name, body := range map[string]string{
		"systemctl":  fmt.Sprintf("case \"$1\" in\nis-system-running) echo %s ;;\nlist-units) cat <<'EOF'\n%sEOF\n;;\nesac\nexit 0\n", state, list.String()),
		"journalctl": "# journalctl -b -u UNIT ...\n" + journal.String() + "exit 0\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
