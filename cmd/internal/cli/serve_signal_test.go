package cli

import (
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeSIGHUP sends the test process a real SIGHUP while `vminit
// serve` runs in it, and checks the server re-reads its specs: the change
// is to a files[].source.file outside the spec directory, which the
// directory watch does not see, so only the SIGHUP reload can pick it up.
//
// The test holds its own SIGHUP subscription for its whole duration: as
// long as any channel is subscribed, Go does not apply SIGHUP's default
// action (exit), so the signal cannot kill the test binary even if it
// arrived before serve subscribed or after it stopped.
func TestServeSIGHUP(t *testing.T) {
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGHUP)
	defer signal.Stop(guard)

	// The source file lives in the store's directory: a spec there may
	// read nothing outside it.
	dir := t.TempDir()
	banner := filepath.Join(dir, "banner")
	if err := os.WriteFile(banner, []byte("banner-before-sighup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "vm.yaml"), []byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: vm-1}
spec:
  files:
    - path: /etc/banner
      source: {file: `+banner+`}
  metadataServer: {addresses: [127.0.0.1]}
`), 0o644)
	addr := freeAddr(t)
	stop := startServe(t, "--listen", addr, "--instances", dir, "--log-format", "text")

	userData := func() string {
		res, err := http.Get("http://" + addr + "/nocloud/user-data")
		if err != nil {
			return ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	waitFor := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !strings.Contains(userData(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: user-data never contained %q:\n%s\nlog:\n%s", what, want, userData(), stop())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("serving", "banner-before-sighup")

	if err := os.WriteFile(banner, []byte("banner-after-sighup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("after SIGHUP", "banner-after-sighup")
	if logs := stop(); !strings.Contains(logs, "msg=reloaded") {
		t.Errorf("no reload logged:\n%s", logs)
	}
}
