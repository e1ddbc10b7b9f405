// Package reporttest is a loopback listener in the place of a vminit
// server's report path, for the tests of the report scripts the renderers
// put in guests (cloudinit, ignition): it answers the codes a test wants
// (a 503 to make a script retry) and keeps what was posted; and the
// systemctl and journalctl the scripts ask about the boot. The real
// server's handling of the same scripts' reports is mdserver's tests'.
package reporttest

import (
	"encoding/json"
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
// inactive) a unit in that state, which `systemctl show` describes with
// What, Options, Requires, InactiveExit and, if Skipped, a condition that
// failed; a mount or swap unit among them is enabled, one `systemctl
// list-unit-files --type=mount,swap --state=enabled` lists. With Job set
// the boot's journal holds its start job's failure with that JOB_RESULT
// (dependency, timeout, failed) and Message, in the order of the units
// given, at JobAt (microseconds of CLOCK_MONOTONIC; 0: a millisecond
// after the previous one so placed, the first after Userspace).
type FailedUnit struct {
	Unit, Journal              string
	ActiveState, What, Options string
	Skipped                    bool
	Requires                   string
	InactiveExit               int64
	Job, Message               string
	JobAt                      int64
}

// Userspace is the stubs' UserspaceTimestampMonotonic: when the root's
// systemd started, after the initrd's. A job whose JobAt is earlier is
// the initrd's.
const Userspace = 2_000_000

// jobEntry is a line of `journalctl -o json --output-fields=UNIT,JOB_RESULT,MESSAGE`
// for a failed start job: compact, the cursor, the timestamps and the boot
// ID always there, in the order of its hash table, here the order
// journalctl 252 (Debian 12) gave on 2026-11-29 for an entry logged with
// `logger --journald`:
//
//	{"__REALTIME_TIMESTAMP":"1795945149758598","UNIT":"dev-disk-by\\x2dlabel-x.device","__CURSOR":"s=…","JOB_RESULT":"timeout","_BOOT_ID":"…","__MONOTONIC_TIMESTAMP":"31960687671","MESSAGE":"Timed out waiting for device …"}
type jobEntry struct {
	Realtime  string `json:"__REALTIME_TIMESTAMP"`
	Unit      string `json:"UNIT"`
	Cursor    string `json:"__CURSOR"`
	Result    string `json:"JOB_RESULT"`
	BootID    string `json:"_BOOT_ID"`
	Monotonic string `json:"__MONOTONIC_TIMESTAMP"`
	Message   string `json:"MESSAGE"`
}

// JobFailedMatch is the journal match of the failed start jobs the
// scripts ask for (cloudinit/report.py, ignition/report.sh: systemd's
// catalog entry "A start job for unit UNIT has failed").
const JobFailedMatch = "MESSAGE_ID=be02cf6855d2428ba40df7e9d022f03d"

// Systemd writes systemctl and journalctl stand-ins into a new directory,
// for a report script's PATH (the tests run no systemd), and returns it:
// `systemctl is-system-running [--wait]` says state, `systemctl
// list-units --failed …` and `list-unit-files …` list units, `systemctl
// show … -- UNIT` gives its properties (and without a unit, systemd's
// UserspaceTimestampMonotonic), `journalctl -b -u UNIT …` prints that
// unit's journal, and `journalctl -b -o json … _PID=1 MESSAGE_ID=…` the
// failed start jobs.
func Systemd(t testing.TB, state string, units []FailedUnit) string {
	t.Helper()
	var failed, enabled, show, journal, jobs strings.Builder
	at := int64(Userspace)
	for i, u := range units {
		if u.ActiveState == "" {
			fmt.Fprintf(&failed, "%s loaded failed failed %s\n", u.Unit, u.Unit)
		} else {
			if strings.HasSuffix(u.Unit, ".mount") || strings.HasSuffix(u.Unit, ".swap") {
				fmt.Fprintf(&enabled, "%s enabled enabled\n", u.Unit)
			}
			cond := "ConditionResult=yes\nConditionTimestampMonotonic=0"
			if u.Skipped {
				cond = "ConditionResult=no\nConditionTimestampMonotonic=5000000"
			}
			fmt.Fprintf(&show, "[ \"$last\" = %q ] && { cat <<'EOF'\nWhat=%s\nOptions=%s\nActiveState=%s\n%s\nInactiveExitTimestampMonotonic=%d\nRequires=%s\nRequisite=\nBindsTo=\nEOF\nexit 0; }\n",
				u.Unit, u.What, u.Options, u.ActiveState, cond, u.InactiveExit, u.Requires)
		}
		fmt.Fprintf(&journal, "[ \"$3\" = %q ] && { cat <<'EOF'\n%s\nEOF\nexit 0; }\n", u.Unit, u.Journal)
		if u.Job != "" {
			at += 1000
			jobAt := at
			if u.JobAt != 0 {
				jobAt = u.JobAt
			}
			line, err := json.Marshal(jobEntry{Cursor: fmt.Sprintf("s=0;i=%x", i+1), Realtime: fmt.Sprint(1_796_000_000_000_000 + jobAt), Monotonic: fmt.Sprint(jobAt),
				BootID: "0123456789abcdef0123456789abcdef", Message: u.Message, Unit: u.Unit, Result: u.Job})
			if err != nil {
				t.Fatal(err)
			}
			jobs.Write(line)
			jobs.WriteByte('\n')
		}
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755) // the script may run as another user (a guest's namespace)
	if err := os.WriteFile(filepath.Join(dir, "jobs.json"), []byte(jobs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	systemctl := fmt.Sprintf("case \"$1\" in\nis-system-running) echo %s ;;\nlist-units) cat <<'EOF'\n%sEOF\n;;\nlist-unit-files) cat <<'EOF'\n%sEOF\n;;\nshow) last=${!#}\n[ \"$last\" = UserspaceTimestampMonotonic ] && echo UserspaceTimestampMonotonic=%d\n%s;;\nesac\nexit 0\n",
		state, failed.String(), enabled.String(), Userspace, show.String())
	// The failed jobs only for the scripts' match: PID 1's, of the catalog's message.
	jobsQuery := fmt.Sprintf("[ \"$2 $3\" = \"-o json\" ] && { [[ \" $* \" == *\" _PID=1 %s \"* ]] && cat %q; exit 0; }\n", JobFailedMatch, filepath.Join(dir, "jobs.json"))
	for name, body := range map[string]string{
		"systemctl":  systemctl,
		"journalctl": "# journalctl -b -u UNIT ... or -b -o json ...\n" + jobsQuery + journal.String() + "exit 0\n",
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

// missingDeviceUnit is MissingDevice's device unit, and the message of
// its start job's timeout (systemd 252, StatusUnitFormat=combined).
const (
	missingDeviceUnit    = `dev-disk-by\x2dlabel-vminit\x2dtest\x2dno\x2dsuch\x2dlabel.device`
	missingDeviceTimeout = "Timed out waiting for device " + missingDeviceUnit + " - " + MissingDevice + "."
)

// InactiveMounts is a boot, in the running state with no failed unit,
// whose enabled mount srv-data.mount never started because its device
// never appeared (systemd leaves a unit whose dependency failed inactive),
// beside an active mount, a nofail one (whose start job failed as a
// dependency too), one its condition skipped, and an inactive swap whose
// device is there. CheckInactiveMounts checks what a report script posted
// for it: each unit once, and not the nofail mount.
func InactiveMounts() []FailedUnit {
	return []FailedUnit{
		{Unit: "srv-ok.mount", ActiveState: "active", What: "/dev/null"},
		{Unit: missingDeviceUnit, ActiveState: "inactive", Job: "timeout", Message: missingDeviceTimeout},
		{Unit: "srv-data.mount", ActiveState: "inactive", What: MissingDevice, Options: "noatime", Journal: inactiveJournal,
			Requires: "system.slice " + missingDeviceUnit, Job: "dependency", Message: "Dependency failed for srv-data.mount - Mount LABEL=vminit-test-no-such-label at /srv/data."},
		{Unit: "srv-maybe.mount", ActiveState: "inactive", What: MissingDevice, Options: "noatime,nofail",
			Requires: missingDeviceUnit, Job: "dependency", Message: "Dependency failed for srv-maybe.mount."},
		{Unit: "srv-cond.mount", ActiveState: "inactive", What: MissingDevice, Skipped: true},
		{Unit: "swap-x.swap", ActiveState: "inactive", What: "/dev/null"},
	}
}

// DependencyFailed is a boot, in the running state with no failed unit
// and no inactive mount the reports take for one, in whose journal a
// device's start job timed out, so that app.service, which needs it, never started, nor
// web.service, which needs app.service; both end inactive, as a oneshot
// that ran does. Beside them, units whose start jobs failed as a
// dependency too but that are not failures: one of the initrd's (before
// Userspace), one started since and active, a oneshot that ran since, and
// a nofail mount. CheckDependencyFailed checks what a report script
// posted for it.
func DependencyFailed() []FailedUnit {
	dep := func(unit, requires string) FailedUnit {
		return FailedUnit{Unit: unit, ActiveState: "inactive", Requires: "sysinit.target " + requires + " system.slice", Job: "dependency",
			Message: "Dependency failed for " + unit + " - " + strings.TrimSuffix(unit, ".service") + ".",
			Journal: "Nov 29 03:41:31 debian systemd[1]: Dependency failed for " + unit + " - " + strings.TrimSuffix(unit, ".service") + "."}
	}
	initrd, retried, ran := dep("initrd-thing.service", "initrd-fs.target"), dep("retried.service", missingDeviceUnit), dep("ran.service", missingDeviceUnit)
	initrd.JobAt = Userspace / 2
	retried.ActiveState = "active"
	ran.InactiveExit = Userspace + 1_000_000
	return []FailedUnit{
		initrd,
		{Unit: missingDeviceUnit, ActiveState: "inactive", Job: "timeout", Message: missingDeviceTimeout},
		dep("app.service", missingDeviceUnit),
		dep("web.service", "app.service"),
		retried,
		ran,
		{Unit: "srv-maybe.mount", ActiveState: "inactive", What: MissingDevice, Options: "nofail", Requires: missingDeviceUnit, Job: "dependency"},
	}
}

// CheckDependencyFailed checks the report posted for DependencyFailed:
// the running state, and as failed units app.service, saying that the
// device it needs timed out, then web.service, saying that app.service
// failed (as a dependency) after the device's timeout, each with its
// journal and the reason last; the server reads the boot as failed, its
// first error app.service's reason.
func CheckDependencyFailed(t testing.TB, g firstboot.GuestReport) {
	t.Helper()
	journal := func(unit string) string {
		return "Nov 29 03:41:31 debian systemd[1]: Dependency failed for " + unit + " - " + strings.TrimSuffix(unit, ".service") + ".\n"
	}
	appWhy := "never started: a unit it needs failed: " + missingDeviceTimeout
	want := []firstboot.UnitReport{
		{Unit: "app.service", Log: journal("app.service") + appWhy},
		{Unit: "web.service", Log: journal("web.service") + "never started: a unit it needs failed: app.service (dependency), after: " + missingDeviceTimeout},
	}
	if g.SystemState != "running" || !slices.Equal(g.FailedUnits, want) {
		t.Fatalf("state %q, failed units %q, want running and %q", g.SystemState, g.FailedUnits, want)
	}
	r, err := g.Report()
	if err != nil || !r.Failed {
		t.Fatalf("the server's reading: %+v %v", r, err)
	}
	if st := (firstboot.Status{Errors: r.Errors}); st.FirstError() != "app.service: "+appWhy {
		t.Errorf("first error %q", st.FirstError())
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
