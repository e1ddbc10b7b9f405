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
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/mdserver/firstboot"
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

// FailedUnit is one unit the report scripts ask systemd about, and what
// `journalctl -u` prints for it. With ActiveState "" it is a failed unit,
// one `systemctl list-units --failed` lists; with any other (active,
// inactive) an enabled mount or swap unit in that state, one `systemctl
// list-unit-files --type=mount,swap --state=enabled` lists and `systemctl
// show` describes with What, Options and, if Skipped, a condition that
// failed.
type FailedUnit struct {
	Unit, Journal              string
	ActiveState, What, Options string
	Skipped                    bool
}

// Systemd writes systemctl and journalctl stand-ins into a new directory,
// for a report script's PATH (the tests run no systemd), and returns it:
// `systemctl is-system-running [--wait]` says state, `systemctl
// list-units --failed …` and `list-unit-files …` list units, `systemctl
// show … -- UNIT` gives its properties, and `journalctl -b -u UNIT …`
// prints that unit's journal.
func Systemd(t testing.TB, state string, units []FailedUnit) string {
	t.Helper()
	var failed, enabled, show, journal strings.Builder
	for _, u := range units {
		if u.ActiveState == "" {
			fmt.Fprintf(&failed, "%s loaded failed failed %s\n", u.Unit, u.Unit)
		} else {
			fmt.Fprintf(&enabled, "%s enabled enabled\n", u.Unit)
			cond := "ConditionResult=yes\nConditionTimestampMonotonic=0"
			if u.Skipped {
				cond = "ConditionResult=no\nConditionTimestampMonotonic=5000000"
			}
			fmt.Fprintf(&show, "[ \"$last\" = %q ] && { cat <<'EOF'\nWhat=%s\nOptions=%s\nActiveState=%s\n%s\nEOF\nexit 0; }\n", u.Unit, u.What, u.Options, u.ActiveState, cond)
		}
		fmt.Fprintf(&journal, "[ \"$3\" = %q ] && { cat <<'EOF'\n%s\nEOF\nexit 0; }\n", u.Unit, u.Journal)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755) // the script may run as another user (a guest's namespace)
	systemctl := fmt.Sprintf("case \"$1\" in\nis-system-running) echo %s ;;\nlist-units) cat <<'EOF'\n%sEOF\n;;\nlist-unit-files) cat <<'EOF'\n%sEOF\n;;\nshow) last=${!#}\n%s;;\nesac\nexit 0\n",
		state, failed.String(), enabled.String(), show.String())
	for name, body := range map[string]string{
		"systemctl":  systemctl,
		"journalctl": "# journalctl -b -u UNIT ...\n" + journal.String() + "exit 0\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// MissingDevice is a device path no test machine has: a LABEL= link that
// never appeared.
const MissingDevice = "/dev/disk/by-label/vminit-test-no-such-label"

// InactiveMounts is a boot, in the running state with no failed unit,
// whose enabled mount srv-data.mount never started because its device
// never appeared (systemd leaves a unit whose dependency failed inactive),
// beside an active mount, a nofail one, one its condition skipped, and an
// inactive swap whose device is there. CheckInactiveMounts checks what a
// report script posted for it.
func InactiveMounts() []FailedUnit {
	return []FailedUnit{
		{Unit: "srv-ok.mount", ActiveState: "active", What: "/dev/null"},
		{Unit: "srv-data.mount", ActiveState: "inactive", What: MissingDevice, Options: "noatime", Journal: inactiveJournal},
		{Unit: "srv-maybe.mount", ActiveState: "inactive", What: MissingDevice, Options: "noatime,nofail"},
		{Unit: "srv-cond.mount", ActiveState: "inactive", What: MissingDevice, Skipped: true},
		{Unit: "swap-x.swap", ActiveState: "inactive", What: "/dev/null"},
	}
}

const inactiveJournal = "Nov 29 03:41:31 debian systemd[1]: Dependency failed for srv-data.mount - Mount LABEL=vminit-test-no-such-label at /srv/data."

// CheckInactiveMounts checks the report posted for InactiveMounts: the
// running state, and as failed units srv-data.mount then swap-x.swap,
// each with its journal and the reason last, which the server reads as
// the boot's cause.
func CheckInactiveMounts(t testing.TB, g firstboot.GuestReport) {
	t.Helper()
	want := []firstboot.UnitReport{
		{Unit: "srv-data.mount", Log: inactiveJournal + "\nenabled but not active once the boot settled: its device " + MissingDevice + " was not found"},
		{Unit: "swap-x.swap", Log: "enabled but not active once the boot settled: a unit it needs failed, or it was stopped"},
	}
	if g.SystemState != "running" || !slices.Equal(g.FailedUnits, want) {
		t.Fatalf("state %q, failed units %q, want running and %q", g.SystemState, g.FailedUnits, want)
	}
	r, err := g.Report()
	if err != nil || !r.Failed {
		t.Fatalf("the server's reading: %+v %v", r, err)
	}
	if st := (firstboot.Status{Errors: r.Errors}); st.FirstError() != "srv-data.mount: enabled but not active once the boot settled: its device "+MissingDevice+" was not found" {
		t.Errorf("first error %q", st.FirstError())
	}
}

// Report is the one report posted, as the server parses it.
func (s *Server) Report(t testing.TB) firstboot.GuestReport {
	t.Helper()
	bodies := s.Bodies()
	if len(bodies) != 1 {
		t.Fatalf("%d posts, want 1", len(bodies))
	}
	g, err := firstboot.ParseGuestReport(bodies[0])
	if err != nil {
		t.Fatalf("%v: %s", err, bodies[0])
	}
	return g
}
