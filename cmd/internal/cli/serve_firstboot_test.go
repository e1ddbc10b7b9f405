package cli

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// TestServeFirstBoot: vminit serve takes its guests' first-boot events on
// the metadata listener (audited as writes), counts its instances by
// first-boot state in the metrics, and reads a boot silent for
// --stall-after as stalled (1ns: at once).
func TestServeFirstBoot(t *testing.T) {
	dir := t.TempDir()
	for name, addr := range map[string]string{"vm-1": "127.0.0.1", "vm-2": "127.0.0.2"} {
		os.WriteFile(filepath.Join(dir, name+".yaml"), []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: "+name+
			"\nspec:\n  metadataServer:\n    addresses: ["+addr+"]\n"), 0o644)
	}
	addr, maddr := freeAddr(t), freeAddr(t)
	stop := startServe(t, "--listen", addr, "--instances", dir, "--metrics-listen", maddr, "--log-format", "text", "--stall-after", "1ns")
	var res *http.Response
	for range 100 { // until it listens
		var err error
		if res, err = http.Post("http://"+addr+bootreport.EventsPath, "", strings.NewReader(`{"name": "init-network/config-ssh", "event_type": "start"}`)); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res == nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("POST an event: %v", res)
	}
	res.Body.Close()
	res, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`vminit_first_boots{state="stalled"} 1`, `vminit_first_boots{state="pending"} 1`, `vminit_first_boot_writes_total{kind="event",result="accepted"} 1`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if stderr := stop(); !strings.Contains(stderr, "msg=write") || !strings.Contains(stderr, "dialect=firstboot") || strings.Contains(stderr, "config-ssh") {
		t.Errorf("audit lines of the write:\n%s", stderr)
	}
}

// TestServeStallAfterUsage: --stall-after must be positive.
func TestServeStallAfterUsage(t *testing.T) {
	for _, v := range []string{"0s", "-1m"} {
		stderr, err := testtools.RunUntilStopped(t, NewRootCommand(), "", "serve", "--instances", t.TempDir(), "--listen", freeAddr(t), "--stall-after", v)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--stall-after") {
			t.Errorf("--stall-after %s: %v, want a usage error naming the flag\n%s", v, err, stderr)
		}
	}
}
