package cli

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/bootreport"
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
	if err != nil || !strings.Contains(string(ud), "endpoint: "+base+bootreport.EventsPath) || !strings.Contains(string(ud), bootreport.ReportUnit) {
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
	if !bytes.Contains(ign, []byte(bootreport.ReportUnit)) {
		t.Errorf("the Ignition config has no %s", bootreport.ReportUnit)
	}
	for _, bad := range []string{"ftp://192.0.2.1/", "http://user:pw@192.0.2.1/", "http://192.0.2.1/?a=b", "192.0.2.1:8080"} {
		code, _, stderr := run(t, "build", examples[1], "-o", filepath.Join(dir, "bad.iso"), "--report-to", bad)
		if code != ExitUsage || !strings.Contains(stderr, "--report-to") {
			t.Errorf("%q: exit %d: %s", bad, code, stderr)
		}
	}
}

// TestServeReportFlags: vminit serve points its guests at --report-url,
// or serves the data without the report with --boot-reports=false; a bad
// --report-url is a usage error naming the flag.
func TestServeReportFlags(t *testing.T) {
	dir := t.TempDir()
	spec := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: vm-1\nspec:\n  metadataServer:\n    addresses: [127.0.0.1]\n"
	if err := os.WriteFile(filepath.Join(dir, "vm.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	userData := func(args ...string) string {
		addr := freeAddr(t)
		stop := startServe(t, append([]string{"--listen", addr, "--instances", dir}, args...)...)
		defer stop()
		for range 100 {
			res, err := http.Get("http://" + addr + "/latest/user-data")
			if err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				return string(b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("serve never answered")
		return ""
	}
	const url = "http://192.0.2.1:8080"
	if ud := userData("--report-url", url+"/"); !strings.Contains(ud, "endpoint: "+url+bootreport.EventsPath) {
		t.Errorf("--report-url: user data:\n%s", ud)
	}
	if ud := userData("--boot-reports=false"); strings.Contains(ud, "reporting:") || !strings.HasPrefix(ud, "#cloud-config") {
		t.Errorf("--boot-reports=false: user data:\n%s", ud)
	}
	code, _, stderr := run(t, "serve", "--listen", freeAddr(t), "--instances", dir, "--report-url", "http://u:p@h/")
	if code != ExitUsage || !strings.Contains(stderr, "--report-url") {
		t.Errorf("a bad --report-url: exit %d: %s", code, stderr)
	}
}
