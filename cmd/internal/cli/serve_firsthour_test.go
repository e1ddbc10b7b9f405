package cli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/mdserver"
)

// An address this host does not have (TEST-NET-1, RFC 5737): binding it
// fails with "cannot assign requested address" and sends nothing.
const unassignedListen = "192.0.2.1:0"

func TestServeUnassignedAddressSaysHowToAddIt(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := run(t, "serve", "--instances", dir, "--listen", unassignedListen)
	if code == ExitOK {
		t.Fatal("serve on an address this host lacks succeeded")
	}
	for _, want := range []string{"192.0.2.1", "ip addr add 192.0.2.1/32 dev lo", "--listen 127.0.0.1:8080 --allow-loopback-instances"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the error does not say %q:\n%s", want, stderr)
		}
	}
}

func TestServeHelpShowsLoopbackFlagAndOneDefault(t *testing.T) {
	code, stdout, stderr := run(t, "serve", "--help")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "--allow-loopback-instances") {
		t.Error("--allow-loopback-instances is not in serve --help")
	}
	line := regexp.MustCompile(`(?m)^.*--max-connections int.*$`).FindString(stdout)
	if n := strings.Count(line, "default"); n != 1 || !strings.HasSuffix(line, fmt.Sprintf("(default %d)", mdserver.DefaultTotal())) ||
		regexp.MustCompile(`\b\d+ where`).MatchString(line) {
		t.Errorf("--max-connections states more than its one default: %s", line)
	}
	// The help once said GOGC=200 while serve ran at 150, and never
	// named the web page.
	if want := fmt.Sprintf("GOGC=%d unless", mdserver.GCPercent); !strings.Contains(stdout, want) || strings.Count(stdout, "GOGC=") != 1 {
		t.Errorf("serve --help does not say %q (once)", want)
	}
	if !strings.Contains(stdout, "/ui/") || !strings.Contains(stdout, "text on a terminal") {
		t.Error("serve --help names neither the web page /ui/ nor the log format on a terminal")
	}
}

// TestServeSaysWhereTheWebPageIs: serve with an admin listener logs the
// page's URL, and the GOGC it runs at is the one its help gives.
func TestServeSaysWhereTheWebPageIs(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("web-page-token-0123456789\n"), 0o600)
	adminAddr := freeAddr(t)
	stop := startServe(t, "--listen", freeAddr(t), "--instances", t.TempDir(), "--log-format", "text", "--admin-listen", adminAddr, "--admin-token-file", token)
	for i := 0; i < 500; i++ {
		if c, err := net.Dial("tcp", adminAddr); err == nil {
			c.Close()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	logged := stop()
	if want := "msg=\"web page\" url=http://" + adminAddr + "/ui/"; !strings.Contains(logged, want) {
		t.Errorf("serve does not log %q:\n%s", want, logged)
	}
	if want := fmt.Sprintf("gc_percent=%d", mdserver.GCPercent); os.Getenv("GOGC") == "" && !strings.Contains(logged, want) {
		t.Errorf("serve does not log %s:\n%s", want, logged)
	}
}

// A --instances-cache in a directory that does not exist yet is created
// at start-up (0700: only vminit reads it), so the cache is written.
func TestServeCreatesInstancesCacheDirectory(t *testing.T) {
	dir := t.TempDir()
	cacheDir := filepath.Join(t.TempDir(), "vminit", "cache")
	cache := filepath.Join(cacheDir, "instances.cache")
	stop := startServe(t, "--listen", freeAddr(t), "--instances", dir, "--instances-cache", cache, "--log-format", "text")
	stderr := stop()
	if strings.Contains(stderr, "level=ERROR") {
		t.Errorf("an ERROR at start-up:\n%s", stderr)
	}
	st, err := os.Stat(cacheDir)
	if err != nil {
		t.Fatalf("the cache's directory was not created: %v\n%s", err, stderr)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("the cache's directory is %v, want 0700", st.Mode().Perm())
	}
	if _, err := os.Stat(cache); err != nil {
		t.Errorf("no start-up cache after shutdown: %v", err)
	}
}

// TestServeWarnsOfInstancesNoGuestCanFetch walks the first try of issue
// 34: serve the examples (none lists an address) and put the README's
// examples/dev-vm.yaml through the admin API. Both say that no guest can
// fetch those instances, and how one gets an address, rather than
// leaving them pending for ever in silence.
func TestServeWarnsOfInstancesNoGuestCanFetch(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"dev-vm.yaml", "cloud-config-vm.yaml"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o600)
	}
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("first-hour-token-0123456789\n"), 0o600)
	admin := freeAddr(t)
	stop := startServe(t, "--listen", freeAddr(t), "--instances", dir, "--log-format", "text", "--admin-listen", admin, "--admin-token-file", token)
	for i := 0; ; i++ { // until the admin API listens
		c, err := net.Dial("tcp", admin)
		if err == nil {
			c.Close()
			break
		}
		if i == 500 {
			t.Fatalf("the admin API does not listen: %v\n%s", err, stop())
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, stdout, stderr := run(t, "instances", "put", filepath.Join(repoRoot, "examples", "metadata-server", "try.yaml"), filepath.Join(repoRoot, "examples", "dev-vm.yaml"),
		"--server", "http://"+admin, "--token-file", token)
	logged := stop()
	if want := `msg="instances no guest can fetch: no address identifies them" count=2 instances="dev, web"`; !strings.Contains(logged, want) ||
		!strings.Contains(logged, "spec.metadataServer.addresses") {
		t.Errorf("serve's start does not warn %q:\n%s", want, logged)
	}
	if code != ExitOK || !strings.Contains(stdout, "stored dev") || strings.Count(stderr, "warning:") != 1 ||
		!strings.Contains(stderr, "dev-vm.yaml: no guest can fetch dev yet, no address identifies it: list the address its VM's requests come from in spec.metadataServer.addresses") {
		t.Errorf("put of a spec without an address: %d %s\n%s", code, stdout, stderr)
	}
}
