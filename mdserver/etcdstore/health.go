package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	"github.com/vminit/vminit/internal/lib/outcome"
)

// What the store knows of etcd, for the server's metrics (Healthy,
// WriteErrors, LastSync) and its log. The store serves from memory
// whatever etcd does; these say how stale that memory may be and whether
// what the replica writes reaches etcd. Each change of condition is
// logged once: the connection lost and back, the watch resumed (at which
// revision), etcd refusing writes and taking them again.

// reconnectMax caps the wait between two attempts to reach etcd again.
// gRPC's default grows to two minutes: after an outage of a minute a
// replica went on serving what it had for 11–22 s more after etcd was
// back. At most reconnectMax, a replica is back within about that.
const reconnectMax = 2 * time.Second

// dialOptions are the client's gRPC options: the reconnection backoff,
// capped at reconnectMax.
func dialOptions() []grpc.DialOption {
	bc := backoff.DefaultConfig
	bc.MaxDelay = reconnectMax
	return []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: 5 * time.Second})}
}

// health is the store's condition. Its methods are safe for concurrent
// use.
type health struct {
	log *slog.Logger

	writeErrors atomic.Uint64
	lastSync    atomic.Int64 // unix nanoseconds; 0: never

	write outcome.Last // the last write's failure ("": it went through)

	mu   sync.Mutex
	lost bool // the connection was lost, and the watch has not answered since
}

// wrote records a write's outcome (nil: it went through), and logs a
// change of condition.
func (h *health) wrote(err error) {
	if err != nil && errors.Is(err, context.Canceled) {
		return // the caller gave up: nothing is known of etcd
	}
	why := ""
	if err != nil {
		h.writeErrors.Add(1)
		why = err.Error()
		if errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) {
			why = "NOSPACE"
		}
	}
	switch {
	case !h.write.Record(why):
	case why == "NOSPACE":
		h.log.Error("etcdstore: etcd refuses writes: its database reached its quota (NOSPACE alarm); "+
			"first-boot statuses and instance changes are not written until it is compacted, defragmented and the alarm disarmed (deploy/README.md)", "error", err)
	case why != "":
		h.log.Warn("etcdstore: writes to etcd fail", "error", err)
	default:
		h.log.Info("etcdstore: writes to etcd go through again")
	}
}

// storeError names etcd's refusal of writes for what it is.
func storeError(err error) error {
	if errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) {
		return fmt.Errorf("etcd refuses writes, its database is full (NOSPACE alarm): %w", err)
	}
	return err
}

// synced records that the watch heard from etcd at revision rev (a
// response, or a list), and logs the watch's resumption after a loss.
func (h *health) synced(rev int64) {
	h.lastSync.Store(time.Now().UnixNano())
	h.mu.Lock()
	was := h.lost
	h.lost = false
	h.mu.Unlock()
	if was {
		h.log.Info("etcdstore: watch resumed", "revision", rev)
	}
}

// connection records the client's connection state, and logs its loss.
// It reports whether the watch is still to answer since a loss.
func (h *health) connection(ready bool) (waiting bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ready && !h.lost {
		h.lost = true
		h.log.Warn("etcdstore: connection to etcd lost; serving from memory, watching again when it is back", "last_sync", time.Unix(0, h.lastSync.Load()).UTC())
	}
	return h.lost
}

// Healthy reports whether etcd is reachable from the store and takes its
// writes: the connection is up, the watch answered since it came back,
// and the last write went through.
func (s *Store) Healthy() bool {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return !s.health.lost && !s.health.write.Failing()
}

// WriteErrors counts the writes to etcd that failed: first-boot
// statuses, Put and Delete.
func (s *Store) WriteErrors() uint64 { return s.health.writeErrors.Load() }

// LastSync is when the store last heard from etcd: a list, or a watch
// response (events, or the progress it asks for after a reconnection).
// What it serves is etcd's state at that time or later.
func (s *Store) LastSync() time.Time {
	if n := s.health.lastSync.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// monitor follows the client's connection until ctx ends: its loss is
// logged, and once it is back the store asks the watch for its progress
// (every probeEvery until it answers), so that the watch says at which
// revision it resumed even when nothing changed meanwhile.
func (s *Store) monitor(ctx context.Context) {
	conn := s.cli.ActiveConnection()
	state := conn.GetState()
	for {
		ready := state == connectivity.Ready
		waiting := s.health.connection(ready)
		if ready && waiting {
			s.cli.RequestProgress(clientv3.WithRequireLeader(ctx))
			pctx, cancel := context.WithTimeout(ctx, probeEvery)
			conn.WaitForStateChange(pctx, state)
			cancel()
		} else if !conn.WaitForStateChange(ctx, state) {
			return
		}
		if ctx.Err() != nil {
			return
		}
		state = conn.GetState()
	}
}

// probeEvery is how often the store asks the watch for its progress
// after the connection came back, until it answers.
const probeEvery = time.Second
