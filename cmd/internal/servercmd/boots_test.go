package servercmd

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/internal/testing/etcdtest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/etcdstore"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// server is a vminit-server running in the test: its log as it goes, and
// stop, which cancels it (SIGTERM's path) and returns Run's error.
type server struct {
	log  *testtools.SyncBuffer
	done chan struct{} // closed when it returned err
	err  error
	stop context.CancelFunc
}

// wait waits until the server returned, and returns its error.
func (s *server) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("vminit-server still runs a minute after it was stopped:\n%s", s.log)
	}
	return s.err
}

func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := New()
	s := &server{log: &testtools.SyncBuffer{}, done: make(chan struct{}), stop: cancel}
	cmd.SetErr(s.log)
	cmd.SetArgs(append([]string{"--allow-loopback-instances", "--log-format", "text"}, args...))
	go func() { s.err = cmd.ExecuteContext(ctx); close(s.done) }()
	t.Cleanup(func() { cancel(); s.wait(t) })
	return s
}

// waitLog waits until the server logged a line matching re (a hang
// bound, not a measure) and returns the match.
func (s *server) waitLog(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := rx.FindString(s.log.String()); m != "" {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never logged %q:\n%s", re, s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const bootDoc = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm}\nspec:\n  instanceID: i-vm\n  metadataServer: {addresses: [127.0.0.1]}\n"

// postEvent posts a cloud-init event as the guest at 127.0.0.1.
func postEvent(t *testing.T, addr, name string) {
	t.Helper()
	body := fmt.Sprintf(`{"name": %q, "event_type": "start", "description": "x"}`, name)
	resp, err := http.Post("http://"+addr+bootreport.EventsPath, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST %s: %s", name, resp.Status)
	}
}

// storedBoot reads vm's first-boot status from etcd (gzipped JSON).
func storedBoot(t *testing.T, e *etcdtest.Server) (firstboot.Status, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := e.Client().Get(ctx, "/vminit/instances.boot/vm")
	if err != nil || len(got.Kvs) == 0 {
		return firstboot.Status{}, false
	}
	zr, err := gzip.NewReader(bytes.NewReader(got.Kvs[0].Value))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	var st firstboot.Status
	if err := json.Unmarshal(plain, &st); err != nil {
		t.Fatal(err)
	}
	return st, true
}

func putDoc(t *testing.T, e *etcdtest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.Client().Put(ctx, etcdstore.DefaultPrefix+"vm", bootDoc); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownFlushWaitsForEtcd: a SIGTERM during an etcd outage. The
// server says how many accepted events are not written yet and tries
// again until --shutdown-timeout; etcd back meanwhile, they are written.
// With etcd down for good, the warning says how many are lost.
func TestShutdownFlushWaitsForEtcd(t *testing.T) {
	e := etcdtest.Start(t, nil)
	putDoc(t, e)
	addr := freeAddr(t)
	s := startServer(t, "--listen", addr, "--etcd-endpoints", e.ClientURL, "--shutdown-timeout", "30s")
	if got := instanceID(addr); got != "i-vm" {
		t.Fatalf("instance-id %q\n%s", got, s.log)
	}
	for { // the fetch written: what follows is what the outage holds back
		if _, ok := storedBoot(t, e); ok {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.Kill()
	for i := range 5 {
		postEvent(t, addr, fmt.Sprintf("init-network/m%d", i))
	}
	s.stop()
	// The five, and the fetch too when etcd committed its write but the
	// kill cut the answer: the server cannot tell, counts it, and writes
	// it again (the union makes that harmless).
	s.waitLog(t, `the last first-boot statuses are not written yet.* unwritten_events=[56] instances=1`)
	e.Restart()
	if err := s.wait(t); err != nil {
		t.Fatalf("vminit-server: %v\n%s", err, s.log)
	}
	s.waitLog(t, `the last first-boot statuses were written to the store`)
	st, _ := storedBoot(t, e)
	if n := len(st.Events); n != 6 { // the fetch and the five
		t.Errorf("stored %d events, want 6: %+v\n%s", n, st.Events, s.log)
	}

	// Down for good: the warning counts what is lost.
	s = startServer(t, "--listen", addr, "--etcd-endpoints", e.ClientURL, "--shutdown-timeout", "1s")
	if got := instanceID(addr); got != "i-vm" {
		t.Fatalf("instance-id %q\n%s", got, s.log)
	}
	for { // the fetch written
		if st, _ := storedBoot(t, e); len(st.Events) == 7 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.Kill()
	for i := range 3 {
		postEvent(t, addr, fmt.Sprintf("modules-config/m%d", i))
	}
	s.stop()
	s.wait(t)
	s.waitLog(t, `first-boot events accepted from guests were not written to the store and are lost.* unwritten_events=[34] instances=1`)
}

// TestStoreRefusesWrites: etcd at its quota (NOSPACE alarm) refuses the
// first-boot statuses; the server logs it once, not at every interval,
// and exports it (vminit_store_healthy 0, write errors counted).
func TestStoreRefusesWrites(t *testing.T) {
	e := etcdtest.StartArgs(t, nil, "--quota-backend-bytes", fmt.Sprint(2<<20))
	putDoc(t, e)
	addr, metrics := freeAddr(t), freeAddr(t)
	s := startServer(t, "--listen", addr, "--metrics-listen", metrics, "--etcd-endpoints", e.ClientURL)
	if got := instanceID(addr); got != "i-vm" {
		t.Fatalf("instance-id %q\n%s", got, s.log)
	}
	// Fill etcd until it raises its alarm.
	cli := e.Client()
	big := strings.Repeat("x", 256<<10)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("/fill/%d", i), big)
		cancel()
		if err == rpctypes.ErrNoSpace {
			break
		}
		if err != nil || i > 1000 {
			t.Fatalf("filling etcd: %d puts: %v", i, err)
		}
	}
	postEvent(t, addr, "init-network/config-ssh")
	s.waitLog(t, `etcd refuses writes: its database reached its quota \(NOSPACE alarm\)`)
	scrape := func() string {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	errorsTotal := regexp.MustCompile(`(?m)^vminit_store_write_errors_total (\d+)$`)
	for { // a few intervals of refused writes
		if m := errorsTotal.FindStringSubmatch(scrape()); m != nil {
			if n, _ := strconv.Atoi(m[1]); n >= 3 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if body := scrape(); !strings.Contains(body, "vminit_store_healthy 0\n") {
		t.Errorf("metrics with etcd refusing writes:\n%s", body)
	}
	log := s.log.String()
	for _, line := range []string{"reached its quota (NOSPACE alarm)", "not written to the store; trying again at every interval"} {
		if n := strings.Count(log, line); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", line, n, log)
		}
	}
}
