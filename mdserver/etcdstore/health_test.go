package etcdstore

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestOutageLoggedAndReported: etcd killed while a store follows it; the
// store says so (log, Healthy), and once etcd is back the watch resumes
// and says at which revision, with nothing changed meanwhile, and the
// store is healthy again with a later LastSync.
func TestOutageLoggedAndReported(t *testing.T) {
	e := startEtcd(t)
	s, logs := open(t, e, "")
	if !s.Healthy() || s.LastSync().IsZero() {
		t.Fatalf("a store just opened: healthy %v, last sync %v", s.Healthy(), s.LastSync())
	}
	e.Kill()
	eventually(t, "the loss to be logged", func() bool { return strings.Contains(logs.String(), "connection to etcd lost") })
	if s.Healthy() {
		t.Error("healthy with etcd down")
	}
	before := s.LastSync()
	e.Restart()
	eventually(t, "the watch's resumption to be logged", func() bool { return strings.Contains(logs.String(), "watch resumed") })
	if !regexp.MustCompile(`watch resumed.* revision=\d+`).MatchString(logs.String()) {
		t.Errorf("the resumption names no revision: %s", logs)
	}
	eventually(t, "the store to be healthy again", s.Healthy)
	if !s.LastSync().After(before) {
		t.Errorf("last sync %v, not after the outage (%v)", s.LastSync(), before)
	}
	// Writes go through again.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Put(ctx, []byte(doc("vm", "10.7.0.1", "vm"))); err != nil {
		t.Fatal(err)
	}
	t.Logf("log:\n%s", logs)
	if n := strings.Count(logs.String(), "connection to etcd lost"); n != 1 {
		t.Errorf("the loss logged %d times, want once:\n%s", n, logs)
	}
}
