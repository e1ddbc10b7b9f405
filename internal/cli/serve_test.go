package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServe(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "vm.yaml"), []byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: vm-1
spec:
  instanceID: i-cli
  metadataServer:
    addresses: [127.0.0.1]
`), 0o644)
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	addr, maddr := free(), free()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := NewRootCommand()
	var stderr bytes.Buffer
	root.SetErr(&stderr)
	cache := filepath.Join(t.TempDir(), "instances.cache")
	root.SetArgs([]string{"serve", "--listen", addr, "--instances", dir, "--instances-cache", cache, "--metrics-listen", maddr, "--log-format", "text"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	getBody := func(url string) string {
		for range 100 {
			res, err := http.Get(url)
			if err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				return string(b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s never answered", url)
		return ""
	}
	if got := getBody("http://" + addr + "/latest/meta-data/instance-id"); got != "i-cli" {
		t.Errorf("instance-id %q", got)
	}
	if m := getBody("http://" + maddr + "/metrics"); !strings.Contains(m, "vminit_mdserver_instances_loaded 1") {
		t.Errorf("metrics:\n%s", m)
	}
	if res, err := http.Get("http://" + addr + "/metrics"); err == nil && res.StatusCode != 404 {
		t.Errorf("/metrics on the guest listener: %d", res.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
	// The spec was written just now, so the cache exists but may not
	// hold it yet (see dirstore's racy-file rule).
	if _, err := os.Stat(cache); err != nil {
		t.Errorf("no start-up cache after shutdown: %v", err)
	}
	if !strings.Contains(stderr.String(), "msg=fetch") || !strings.Contains(stderr.String(), "instance=vm-1") {
		t.Errorf("no audit line:\n%s", stderr.String())
	}
}
