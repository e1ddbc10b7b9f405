package firstboot

import (
	"context"
	"sync"
	"testing"
	"time"
)

type sinkFunc func(context.Context, []Status) error

func (f sinkFunc) WriteBoot(ctx context.Context, sts []Status) error { return f(ctx, sts) }

// TestFlush: what changed after Persist's last write is written by
// Flush, once Persist returned; nothing is written twice.
func TestFlush(t *testing.T) {
	c := newClock()
	tr := New(Options{Now: c.now})
	var mu sync.Mutex
	var wrote []string
	sink := sinkFunc(func(_ context.Context, sts []Status) error {
		mu.Lock()
		defer mu.Unlock()
		for _, st := range sts {
			wrote = append(wrote, st.Name+":"+string(st.State))
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Persist(ctx, sink, time.Hour, nil); close(done) }()
	for !tr.persisting.Load() { // Persist marks changes from here on
		time.Sleep(time.Millisecond)
	}
	tr.Fetch("vm", "u", AgentCloudInit, "nocloud", "/nocloud/meta-data")
	cancel()
	<-done
	if len(wrote) != 0 {
		t.Fatalf("written before the hour: %v", wrote)
	}
	if err := tr.Flush(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	if err := tr.Flush(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	if len(wrote) != 1 || wrote[0] != "vm:fetched" {
		t.Errorf("flushed %v, want vm:fetched once", wrote)
	}
}
