package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// The Store shares first-boot statuses between replicas (firstboot.Shared)
// as one key per instance, <BootPrefix><name>, whose value is the
// firstboot.Status JSON, event log included. The keys live beside the
// specs' prefix, not below it, so the specs' list and watch never read
// them. A status is written only while its incarnation's spec key exists
// (a compare of its create revision in the same transaction); Delete
// removes both keys at once. A spec deleted behind the store's back (etcdctl
// del) leaves its status key, which nothing reads: FollowBoots merges only
// the statuses of the incarnations the store serves, and the next
// incarnation's first write replaces it.
var _ firstboot.Shared = (*Store)(nil)

// The bounds of a WriteBoot transaction: etcd refuses a transaction of
// more than --max-txn-ops operations (default 128) or a request of more
// than --max-request-bytes (default 1.5 MiB).
const (
	maxTxnOps   = 64
	maxTxnBytes = 1 << 20
	// maxBootValue bounds one status's value: the tracker's limits keep
	// it well below (64 events of at most 2 KiB messages); a status
	// larger still is written without its event log.
	maxBootValue = 256 << 10
	// bootPage is how many status keys one range request of FollowBoots'
	// list reads.
	bootPage = 500
)

// bootPrefix is where the statuses live: Config.BootPrefix, else the
// specs' prefix with ".boot/" for its final "/" (/vminit/instances.boot/
// beside /vminit/instances/).
func (s *Store) bootPrefix() string {
	if s.cfg.BootPrefix != "" {
		return s.cfg.BootPrefix
	}
	return strings.TrimSuffix(s.cfg.Prefix, "/") + ".boot/"
}

// WriteBoot writes the statuses, in as few transactions as the bounds
// allow. A status whose instance is gone or is another incarnation is
// not written (its put is conditional on the spec key's create
// revision).
func (s *Store) WriteBoot(ctx context.Context, statuses []firstboot.Status) error {
	var ops []clientv3.Op
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
		_, err := s.cli.Txn(tctx).Then(ops...).Commit()
		ops, size = ops[:0], 0
		if err != nil {
			return fmt.Errorf("etcdstore: writing first boots: %w", err)
		}
		return nil
	}
	for i := range statuses {
		st := &statuses[i]
		createRev, ok := createRevOf(st.UID)
		if !ok || strings.Contains(st.Name, "/") {
			continue // no incarnation of this store's
		}
		value, err := bootValue(st)
		if err != nil {
			return err
		}
		if len(ops) == maxTxnOps || size+len(value) > maxTxnBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		ops = append(ops, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.cfg.Prefix+st.Name), "=", createRev)},
			[]clientv3.Op{clientv3.OpPut(s.bootPrefix()+st.Name, string(value))}, nil))
		size += len(value)
	}
	return flush()
}

// closed reports whether Close was called.
func (s *Store) closed() bool {
	select {
	case <-s.stopped:
		return true
	default:
		return false
	}
}

// bootValue is st as stored, within maxBootValue.
func bootValue(st *firstboot.Status) ([]byte, error) {
	value, err := json.Marshal(st)
	if err == nil && len(value) > maxBootValue {
		short := *st
		short.Events = nil
		value, err = json.Marshal(&short)
	}
	return value, err
}

// createRevOf reads the spec key's create revision back from a record's
// UID ("c<revision>", decode's).
func createRevOf(uid string) (int64, bool) {
	rest, ok := strings.CutPrefix(uid, "c")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n > 0
}

// FollowBoots merges into t the statuses stored, then every one written
// after (another replica's, or this one's read back: Merge keeps only
// what is further on), of the incarnations the store serves, until ctx
// ends or the store is closed; a failed watch lists again, with backoff.
// With ctx already ended it reads once and returns: a one-shot reader
// (the CLI) opens the store and calls it so.
func (s *Store) FollowBoots(ctx context.Context, t *firstboot.Tracker) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := s.cfg.MinBackoff
	for first := true; ; first = false {
		// The first list runs even with ctx ended, bounded by its timeout.
		lctx := ctx
		if first {
			lctx = context.WithoutCancel(ctx)
		}
		rev, err := s.listBoots(lctx, t)
		switch {
		case s.closed():
			return nil
		case first && ctx.Err() != nil:
			return err
		case err == nil:
			backoff = s.cfg.MinBackoff
			err = s.watchBoots(ctx, t, rev)
		}
		if ctx.Err() != nil || s.closed() {
			return nil
		}
		s.log.Warn("etcdstore: following first boots failed; listing again", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(jitter(backoff)):
		}
		backoff = min(backoff*2, s.cfg.MaxBackoff)
	}
}

// listBoots merges every stored status into t, a page at a time at one
// revision, and returns the revision.
func (s *Store) listBoots(ctx context.Context, t *firstboot.Tracker) (int64, error) {
	return s.listPages(ctx, s.bootPrefix(), bootPage, func(kvs []*mvccpb.KeyValue) {
		for _, kv := range kvs {
			s.mergeBoot(t, string(kv.Key), kv.Value)
		}
	}, nil)
}

// watchBoots merges the statuses written after rev until the watch ends;
// it returns why it ended.
func (s *Store) watchBoots(ctx context.Context, t *firstboot.Tracker, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.cli.Watch(wctx, s.bootPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut {
				s.mergeBoot(t, string(ev.Kv.Key), ev.Kv.Value)
			}
		}
	}
	return errors.New("watch closed")
}

// mergeBoot merges one stored status, if it is of an incarnation the
// store serves under the key's name.
func (s *Store) mergeBoot(t *firstboot.Tracker, key string, value []byte) {
	name := strings.TrimPrefix(key, s.bootPrefix())
	var st firstboot.Status
	if len(value) > maxBootValue || json.Unmarshal(value, &st) != nil || st.Name != name {
		s.log.Warn("etcdstore: first-boot status skipped: not one this store writes", "key", key)
		return
	}
	if rec, ok := s.Snapshot().ByName(name); !ok || rec.UID != st.UID {
		return // gone, or another incarnation's
	}
	t.Merge(st)
}
