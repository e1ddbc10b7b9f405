package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	if n := strings.Count(line, "default"); n != 1 {
		t.Errorf("--max-connections shows %d defaults: %s", n, line)
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
