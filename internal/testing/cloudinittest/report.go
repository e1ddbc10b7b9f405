package cloudinittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vminit/vminit/bootreport"
)

// RunReportScript runs script (cloudinit/report.py) as its unit does,
// with Python and its paths under root, posting to url, env added to its
// environment (PATH=… for systemctl and journalctl stubs: without one it
// finds none, and reports no system state); it returns what the script
// printed.
func RunReportScript(t testing.TB, script []byte, root, url string, env ...string) string {
	t.Helper()
	Require(t)
	scriptFile := filepath.Join(t.TempDir(), "report.py")
	if err := os.WriteFile(scriptFile, script, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Python, scriptFile)
	cmd.Env = []string{bootreport.ReportURLEnv + "=" + url, "VMINIT_REPORT_TEST_ROOT=" + root, "VMINIT_REPORT_TEST_DELAY=0"}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("report.py: %v\n%s", err, out)
	}
	return string(out)
}

// WriteTree writes files, by path under root, as a guest's files.
func WriteTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
