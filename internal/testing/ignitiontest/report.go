package ignitiontest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/testing/reporttest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// Boot is how the first boot that RunReport reports ended, as systemd
// would tell the completion unit's script: the tests run no systemd, so
// systemctl and journalctl are stubs that say this.
type Boot struct {
	// State is `systemctl is-system-running --wait`'s answer (running,
	// degraded, ...).
	State string
	// Failed are the failed units, in order, each with its journal.
	Failed []FailedUnit
	// Wrap runs the script (its program and arguments, before bash's),
	// e.g. {"ip", "netns", "exec", GUEST} from a guest's namespace.
	Wrap []string
	// CurlArgs go before the script's own curl arguments, e.g.
	// {"--interface", "127.0.0.3"} for a source address on loopback.
	CurlArgs []string
}

// FailedUnit is one unit `systemctl list-units --failed` lists, and what
// `journalctl -u` prints for it.
type FailedUnit = reporttest.FailedUnit

// ReportURL is the URL a report unit (ignition's or cloud-init's, as
// written) hands its script in its Environment= line; "" if none.
func ReportURL(unit []byte) string {
	m := regexp.MustCompile(`Environment="` + bootreport.ReportURLEnv + `=([^"]+)"`).FindSubmatch(unit)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// RunReport runs the completion unit's script that ignition wrote under
// root (Apply's), with the URL of the unit ignition wrote beside it and
// the real curl, as the unit runs it once boot has settled as b says.
func RunReport(t *testing.T, root string, b Boot) {
	t.Helper()
	curl := testtools.Require(t, "curl")
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system", bootreport.ReportUnit))
	if err != nil || ReportURL(unit) == "" {
		t.Fatalf("the completion unit as ignition wrote it (%v) names no report URL:\n%s", err, unit)
	}
	stubs := reporttest.Systemd(t, b.State, b.Failed)
	curlStub := "#!/bin/bash\nexec " + curl + " " + shellQuote(b.CurlArgs) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(stubs, "curl"), []byte(curlStub), 0o755); err != nil {
		t.Fatal(err)
	}
	script := reportScript(unit)
	if script == "" {
		t.Fatalf("the completion unit as ignition wrote it runs no script with bash:\n%s", unit)
	}
	args := append(slices.Clone(b.Wrap), testtools.Require(t, "bash"), filepath.Join(root, script))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{"PATH=" + stubs + ":/usr/bin:/bin", bootreport.ReportURLEnv + "=" + ReportURL(unit),
		"VMINIT_REPORT_TEST_ROOT=" + t.TempDir(), "VMINIT_REPORT_TEST_DELAY=0"}
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// execStart matches the completion unit's ExecStart=/bin/bash SCRIPT.
var execStart = regexp.MustCompile(`(?m)^ExecStart=/bin/bash (\S+)$`)

// reportScript is the script the completion unit runs (ignition's
// ReportScript), read from the unit: ignition's own tests use this
// package, so it may not import ignition.
func reportScript(unit []byte) string {
	m := execStart.FindSubmatch(unit)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// shellQuote quotes each argument for bash.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
