package etcdstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
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

// WriteBoot writes each status as the union of it and what the store
// holds for its incarnation (firstboot.MergeStatus): a guest may post one
// event to this replica and the next to another, and neither write may
// drop the other's. It reads the keys, merges, and puts each only while
// the key is still at the revision read and the spec key at the
// incarnation's create revision (compare-and-swap); when another replica
// wrote first, the transaction's else branch reads what is there and the
// merge is made again, at most casAttempts times. A status whose
// instance is gone or is another incarnation is not written; one that
// adds nothing to what is stored is not written again.
//
// The transactions are flat (compares, then puts), never nested: etcd
// 3.4 counts no put of a nested transaction against its quota, and lets
// them through while its NOSPACE alarm is raised.
func (s *Store) WriteBoot(ctx context.Context, statuses []firstboot.Status) error {
	var ws []*bootWrite
	for i := range statuses {
		st := &statuses[i]
		createRev, ok := createRevOf(st.UID)
		if !ok || strings.Contains(st.Name, "/") {
			continue // no incarnation of this store's
		}
		ws = append(ws, &bootWrite{st: st, key: s.bootPrefix() + st.Name, specKey: s.cfg.Prefix + st.Name, createRev: createRev})
	}
	err := s.writeBoots(ctx, ws)
	s.health.wrote(err)
	return err
}

// bootWrite is one status on its way to the store: what WriteBoot writes,
// and the key as last read.
type bootWrite struct {
	st           *firstboot.Status
	key, specKey string
	createRev    int64  // the incarnation's: the spec key's create revision
	modRev       int64  // the status key's, as read (0: none)
	stored       []byte // its value, as read
	gone         bool   // the spec key is gone or another incarnation's
	value        []byte // what the next put writes
}

// casAttempts bounds the compare-and-swap rounds of one group of writes:
// each failed round means another replica wrote one of its keys meanwhile.
const casAttempts = 8

func (s *Store) writeBoots(ctx context.Context, ws []*bootWrite) error {
	for len(ws) > 0 {
		n := min(len(ws), maxTxnOps/2) // two compares (and two gets) a status
		if err := s.readBoots(ctx, ws[:n]); err != nil {
			return err
		}
		group := ws[:n]
		for len(group) > 0 {
			// As many as fit one request; a value grows little by a
			// retry's merge (maxTxnBytes leaves room below etcd's limit).
			size, k := 0, 0
			for k < len(group) {
				if err := group[k].merge(); err != nil {
					return err
				}
				if k > 0 && size+len(group[k].value) > maxTxnBytes {
					break
				}
				size += len(group[k].value)
				k++
			}
			if err := s.casBoots(ctx, group[:k]); err != nil {
				return err
			}
			group = group[k:]
		}
		ws = ws[n:]
	}
	return nil
}

// readBoots reads the status keys of ws, in one transaction.
func (s *Store) readBoots(ctx context.Context, ws []*bootWrite) error {
	ops := make([]clientv3.Op, len(ws))
	for i, w := range ws {
		ops[i] = clientv3.OpGet(w.key)
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Txn(tctx).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("etcdstore: reading first boots: %w", err)
	}
	for i, w := range ws {
		w.read(resp.Responses[i].GetResponseRange())
	}
	return nil
}

// read takes the status key as a range response shows it.
func (w *bootWrite) read(r *etcdserverpb.RangeResponse) {
	w.modRev, w.stored = 0, nil
	if r != nil && len(r.Kvs) > 0 {
		w.modRev, w.stored = r.Kvs[0].ModRevision, r.Kvs[0].Value
	}
}

// merge sets w.value: the union of the status and what the key holds
// for the same incarnation (the status alone when it holds another's, or
// nothing readable).
func (w *bootWrite) merge() error {
	st := *w.st
	if old, err := decodeBoot(w.stored); err == nil && old.UID == st.UID && old.Name == st.Name {
		st = firstboot.MergeStatus(old, st)
	}
	value, err := bootValue(&st)
	w.value = value
	return err
}

// casBoots puts the values of ws in one transaction, if no key moved
// since it was read; else it reads them again, merges and tries again.
func (s *Store) casBoots(ctx context.Context, ws []*bootWrite) error {
	for range casAttempts {
		var cmps []clientv3.Cmp
		var puts, gets []clientv3.Op
		var sent []*bootWrite
		for _, w := range ws {
			if w.gone || bytes.Equal(w.value, w.stored) {
				continue // nobody's now, or nothing new
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(w.specKey), "=", w.createRev),
				clientv3.Compare(clientv3.ModRevision(w.key), "=", w.modRev))
			puts = append(puts, clientv3.OpPut(w.key, string(w.value)))
			gets = append(gets, clientv3.OpGet(w.specKey, clientv3.WithKeysOnly()), clientv3.OpGet(w.key))
			sent = append(sent, w)
		}
		if len(sent) == 0 {
			return nil
		}
		tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cli.Txn(tctx).If(cmps...).Then(puts...).Else(gets...).Commit()
		cancel()
		if err != nil {
			return fmt.Errorf("etcdstore: writing first boots: %w", storeError(err))
		}
		if resp.Succeeded {
			return nil
		}
		for i, w := range sent {
			spec := resp.Responses[2*i].GetResponseRange()
			w.gone = spec == nil || len(spec.Kvs) == 0 || spec.Kvs[0].CreateRevision != w.createRev
			w.read(resp.Responses[2*i+1].GetResponseRange())
			if err := w.merge(); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("etcdstore: writing first boots: their keys kept changing for %d attempts; trying again later", casAttempts)
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

// bootValue is st as stored: its JSON, gzipped (a boot's event log is
// names and times that repeat: about a sixth of the bytes, for every
// revision etcd keeps), within maxBootValue uncompressed; a status larger
// still is written without its event log. The same status is the same
// bytes (no time in the gzip header): a write that adds nothing is seen
// as such and skipped.
func bootValue(st *firstboot.Status) ([]byte, error) {
	value, err := json.Marshal(st)
	if err == nil && len(value) > maxBootValue {
		short := *st
		short.Events = nil
		value, err = json.Marshal(&short)
	}
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	zw.Write(value)
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gzipWriters are reused: a new writer allocates its tables, most of a
// millisecond a status.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// decodeBoot reads a stored status: gzipped JSON, or JSON (as written
// before the values were compressed, or by hand), of at most
// maxBootValue bytes.
func decodeBoot(value []byte) (firstboot.Status, error) {
	var st firstboot.Status
	if len(value) == 0 {
		return st, errors.New("empty")
	}
	plain := value
	if len(value) >= 2 && value[0] == 0x1f && value[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(value))
		if err != nil {
			return st, err
		}
		if plain, err = io.ReadAll(io.LimitReader(zr, maxBootValue+1)); err != nil {
			return st, err
		}
	}
	if len(plain) > maxBootValue {
		return st, errors.New("larger than a status is written")
	}
	err := json.Unmarshal(plain, &st)
	return st, err
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
// after (another replica's, or this one's read back: Merge takes the
// union), of the incarnations the store serves, until ctx
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
	st, err := decodeBoot(value)
	if err != nil || st.Name != name {
		s.log.Warn("etcdstore: first-boot status skipped: not one this store writes", "key", key)
		return
	}
	if rec, ok := s.Snapshot().ByName(name); !ok || rec.UID != st.UID {
		return // gone, or another incarnation's
	}
	t.Merge(st)
}
