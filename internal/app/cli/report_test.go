package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// TestReportTo: --report-to puts the first-boot report in what render and
// build make, the same bytes every time, for cloud-init and Ignition; a
// bad URL is a usage error naming the flag.
func TestReportTo(t *testing.T) {
	const base = "http://192.0.2.1:8080"
	dir := t.TempDir()
	out := filepath.Join(dir, "seed")
	if code, _, stderr := run(t, "render", examples[1], "-o", out, "--report-to", base+"/"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	ud, err := os.ReadFile(filepath.Join(out, "user-data"))
	if err != nil || !strings.Contains(string(ud), "endpoint: "+base+firstboot.EventsPath) || !strings.Contains(string(ud), firstboot.ReportUnit) {
		t.Errorf("user-data without the report (%v):\n%s", err, ud)
	}
	build := func(name string, args ...string) []byte {
		p := filepath.Join(dir, name)
		if code, _, stderr := run(t, append([]string{"build", "-o", p, "--report-to", base}, args...)...); code != ExitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if a, b := build("a.iso", examples[1]), build("b.iso", examples[1]); !bytes.Equal(a, b) {
		t.Errorf("two builds with --report-to differ")
	}
	ign := build("config.ign", "../../../examples/fcos-server.yaml")
	if !bytes.Contains(ign, []byte(firstboot.ReportUnit)) {
		t.Errorf("the Ignition config has no %s", firstboot.ReportUnit)
	}
	for _, bad := range []string{"ftp://192.0.2.1/", "http://user:pw@192.0.2.1/", "http://192.0.2.1/?a=b", "192.0.2.1:8080"} {
		code, _, stderr := run(t, "build", examples[1], "-o", filepath.Join(dir, "bad.iso"), "--report-to", bad)
		if code != ExitUsage || !strings.Contains(stderr, "--report-to") {
			t.Errorf("%q: exit %d: %s", bad, code, stderr)
		}
	}
}
