// Package etcdstore keeps the metadata server's instances in etcd, so that
// a fleet of `vminit serve` replicas shares one set of instances: each
// instance is one key, <prefix><metadata.name>, whose value is the spec
// document (YAML or JSON, files inlined: source.file is refused).
//
// Each Store keeps the whole set in memory: a full list at Open (paged, at
// one revision), then a Watch from the revision after it. Requests are
// answered from that memory (Snapshot is an atomic load and never waits for
// etcd), so replicas keep serving while etcd is unreachable and catch up
// when it returns. When the watch fails or its revision was compacted away,
// the store lists the prefix again and re-watches, backing off
// exponentially.
//
// A document in etcd that does not load (invalid, or taking another
// instance's name or address) is logged with its key and every problem,
// and the instance keeps its last good version. Put and Delete are etcd
// transactions; Put refuses a document that would be refused on load.
//
// The store also shares the instances' first-boot statuses between
// replicas (firstboot.Shared, firstboot.go): one key per instance,
// <BootPrefix><name>, beside the specs' prefix and never read by its
// list and watch.
package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vminit/vminit/internal/lib/parallel"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// DefaultPrefix is the key prefix instances live under.
const DefaultPrefix = "/vminit/instances/"

// Config configures a Store.
type Config struct {
	// Endpoints are etcd client URLs, e.g. https://etcd-0:2379.
	Endpoints []string
	// Prefix is the key prefix; default DefaultPrefix. Keys below it are
	// <prefix><instance name>.
	Prefix string
	// BootPrefix is where each instance's first-boot status is kept
	// (<BootPrefix><instance name>, firstboot.go); default Prefix with
	// ".boot/" for its final "/": /vminit/instances.boot/. It may be
	// neither below Prefix nor above it.
	BootPrefix string
	// TLS, when set, is used for the client connections (server CA and,
	// for client-certificate auth, the client certificate).
	TLS *tls.Config
	// Username and Password for etcd's own authentication (optional).
	Username, Password string
	// DialTimeout bounds connecting; default 5 s.
	DialTimeout time.Duration
	// RequestTimeout bounds each request: a page of a list (5,000 keys), a
	// Put, a Delete; default 5 s.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between re-list attempts
	// after a watch failure; defaults 100 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives bad documents and watch failures; default
	// slog.Default().
	Logger *slog.Logger
	// Checks are the server's rules beyond the spec's validation (see
	// registry.Checks), run on every document read and every Put.
	Checks registry.Checks
}

// Store is an etcd-backed registry.Store.
type Store struct {
	cfg Config
	cli *clientv3.Client
	log *slog.Logger
	ix  *registry.Index // keyed by etcd key; read and applied under mu

	mu      sync.Mutex
	modRevs map[string]int64 // each key's mod revision, as last applied
	rev     int64            // the etcd revision the index reflects
	revSig  chan struct{}    // closed and replaced when rev moves
	relists atomic.Int64
	health  health

	cancel  context.CancelFunc
	stopped <-chan struct{} // closed by Close
	done    chan struct{}
}

// beforeWatch is a test hook run before each Watch call; afterPage, after
// each page of a list but the last.
var beforeWatch, afterPage func()

// Open connects, lists the prefix and starts watching it. It fails when
// the first list fails (a replica with nothing to serve should not pretend
// to be ready); after that, etcd outages only delay updates.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.BootPrefix != "" && !strings.HasSuffix(cfg.BootPrefix, "/") {
		cfg.BootPrefix += "/"
	}
	if cfg.BootPrefix != "" && (strings.HasPrefix(cfg.BootPrefix, cfg.Prefix) || strings.HasPrefix(cfg.Prefix, cfg.BootPrefix)) {
		return nil, fmt.Errorf("etcdstore: the first-boot prefix %q and the instances' prefix %q overlap", cfg.BootPrefix, cfg.Prefix)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(10*time.Second, cfg.MinBackoff)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcdstore: no endpoints")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
		// Notice a dead server within seconds, not minutes.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		// Reach it again within seconds once it is back (health.go).
		DialOptions: dialOptions(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: %w", err)
	}
	s := &Store{cfg: cfg, cli: cli, log: cfg.Logger.With("store", "etcd", "prefix", cfg.Prefix),
		modRevs: map[string]int64{}, revSig: make(chan struct{}), done: make(chan struct{})}
	s.health.log = s.log
	s.ix = registry.NewIndex(registry.IndexOptions{Logger: s.log, KeyAttr: "key",
		Invalid: "etcdstore: invalid document skipped", Refused: "etcdstore: document refused", Checks: cfg.Checks})
	rev, err := s.list(ctx)
	if err != nil {
		cli.Close()
		if why := probe(ctx, cfg); why != nil {
			err = fmt.Errorf("%w; %w", err, why)
		}
		return nil, fmt.Errorf("etcdstore: listing %s: %w", cfg.Prefix, err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	s.cancel, s.stopped = stop, runCtx.Done()
	s.health.synced(rev)
	var wg sync.WaitGroup
	wg.Go(func() { s.run(runCtx, rev) })
	wg.Go(func() { s.monitor(runCtx) })
	go func() { wg.Wait(); close(s.done) }()
	return s, nil
}

// Snapshot returns the current index (an atomic load; never waits for etcd).
func (s *Store) Snapshot() *registry.Snapshot { return s.ix.Snapshot() }

// Revision is the etcd revision the snapshot reflects.
func (s *Store) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Relists counts full re-lists after watch failures or compaction.
func (s *Store) Relists() int64 { return s.relists.Load() }

// Close stops watching and closes the client.
func (s *Store) Close() error {
	s.cancel()
	<-s.done
	return s.cli.Close()
}

// version is one key's value at a revision; nil in a change set means the
// key was deleted.
type version struct {
	value  []byte
	modRev int64
	// createRev is the revision the key was created at: the record's UID
	// (a key deleted and written again is a new instance, and every
	// replica agrees on it).
	createRev int64
	// dec is value decoded: by list while it fetched the next page, or
	// by apply.
	dec *decoded
}

// listPage is how many keys (about 3 MB of specs) one range request of a
// list returns. A large fleet is listed as many bounded responses at one
// revision (as Kubernetes pages its lists) rather than one response holding
// every document, which etcd would have to build in memory at once and
// which a single request timeout would have to cover. Much smaller pages
// are slower: etcd 3.4 counts the rest of the range for every page.
var listPage int64 = 5000 // a variable for the tests

// list reads the whole prefix at one revision, a page at a time, decodes
// each page's changed documents while it fetches the next, and applies the
// result as the complete state. Each page has RequestTimeout; a revision
// compacted away between pages restarts the list.
func (s *Store) list(ctx context.Context) (int64, error) {
	for attempt := 1; ; attempt++ {
		rev, changes, err := s.fetchAll(ctx)
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < 3 {
			continue
		}
		if err != nil {
			return 0, err
		}
		s.mu.Lock()
		for k := range s.modRevs {
			if _, ok := changes[k]; !ok {
				changes[k] = nil
			}
		}
		s.mu.Unlock()
		s.apply(changes, rev)
		return rev, nil
	}
}

// fetchAll is one attempt of list: every key of the prefix at one
// revision, the changed ones decoded.
func (s *Store) fetchAll(ctx context.Context) (int64, map[string]*version, error) {
	var (
		changes = map[string]*version{}
		wg      sync.WaitGroup
	)
	defer wg.Wait()
	rev, err := s.listPages(ctx, s.cfg.Prefix, listPage, func(kvs []*mvccpb.KeyValue) {
		var keys []string
		var vers []*version
		s.mu.Lock()
		for _, kv := range kvs {
			k, v := string(kv.Key), &version{value: kv.Value, modRev: kv.ModRevision, createRev: kv.CreateRevision}
			changes[k] = v
			if m, ok := s.modRevs[k]; !ok || m != v.modRev {
				keys, vers = append(keys, k), append(vers, v)
			}
		}
		s.mu.Unlock()
		wg.Go(func() { s.decodeAll(keys, vers) })
	}, afterPage)
	if err != nil {
		return 0, nil, err
	}
	return rev, changes, nil
}

// listPages reads every key under prefix at one revision, limit keys a
// page, hands each page to each, and returns the revision; between (a
// test's hook, or nil) runs between two pages.
func (s *Store) listPages(ctx context.Context, prefix string, limit int64, each func([]*mvccpb.KeyValue), between func()) (int64, error) {
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(limit)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		pctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cli.Get(pctx, from, opts...)
		cancel()
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		each(resp.Kvs)
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		if between != nil {
			between()
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// jitter is a wait of about d: between d/2 and d, so that replicas that
// failed together do not retry together.
func jitter(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }

// run watches from rev+1; on a failed or compacted watch it re-lists and
// re-watches with exponential backoff.
func (s *Store) run(ctx context.Context, rev int64) {
	backoff := s.cfg.MinBackoff
	sleep := func() bool {
		d := jitter(backoff)
		backoff = min(backoff*2, s.cfg.MaxBackoff)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for ctx.Err() == nil {
		if rev == 0 {
			r, err := s.list(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("etcdstore: re-list failed; serving from memory", "err", err, "retry_in", backoff)
				}
				if !sleep() {
					return
				}
				continue
			}
			s.relists.Add(1)
			s.log.Info("etcdstore: re-listed", "revision", r, "instances", s.Snapshot().Len())
			s.health.synced(r)
			rev = r
		}
		if beforeWatch != nil {
			beforeWatch()
		}
		failed := s.watch(ctx, rev, func() { backoff = s.cfg.MinBackoff })
		if ctx.Err() != nil {
			return
		}
		if !failed {
			s.log.Warn("etcdstore: watch closed; re-listing")
		}
		rev = 0
		if !sleep() {
			return
		}
	}
}

// watch applies the changes after rev until the watch ends, and reports
// whether it failed (compacted, or an error) rather than closed. answered
// runs at every response that is not a failure.
func (s *Store) watch(ctx context.Context, rev int64, answered func()) (failed bool) {
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer wcancel()
	wch := s.cli.Watch(wctx, s.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	for resp := range wch {
		if resp.CompactRevision != 0 {
			s.log.Warn("etcdstore: watch revision compacted; re-listing", "wanted", rev+1, "compacted", resp.CompactRevision)
			return true
		}
		if err := resp.Err(); err != nil {
			s.log.Warn("etcdstore: watch failed; re-listing", "err", err)
			return true
		}
		answered()
		s.applyEvents(resp.Events, resp.Header.Revision)
		rev = resp.Header.Revision
		s.health.synced(rev)
	}
	return false
}

// applyEvents applies one watch response's events, at revision rev (none:
// a progress notification, which moves the revision alone).
func (s *Store) applyEvents(events []*clientv3.Event, rev int64) {
	if len(events) == 0 {
		s.apply(nil, rev)
		return
	}
	changes := map[string]*version{}
	for i, ev := range events {
		k := string(ev.Kv.Key)
		if _, again := changes[k]; again {
			// A key changed twice in one response (a replica
			// watching from before both): apply what came before,
			// so that each version is met in order and a refused
			// one keeps the good one before it, as when the two
			// come in separate responses.
			s.apply(changes, events[i-1].Kv.ModRevision)
			changes = map[string]*version{}
		}
		if ev.Type == clientv3.EventTypeDelete {
			changes[k] = nil
		} else {
			changes[k] = &version{value: ev.Kv.Value, modRev: ev.Kv.ModRevision, createRev: ev.Kv.CreateRevision}
		}
	}
	s.apply(changes, rev)
}

// apply loads the changed keys and swaps in a new snapshot.
func (s *Store) apply(changes map[string]*version, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decodeChanged(changes)
	cs := make([]registry.Change, 0, len(changes))
	for k, v := range changes {
		if v == nil {
			if _, ok := s.modRevs[k]; ok {
				delete(s.modRevs, k)
				cs = append(cs, registry.Change{Key: k})
			}
			continue
		}
		if m, ok := s.modRevs[k]; ok && m == v.modRev {
			continue // unchanged (a re-list)
		}
		s.modRevs[k] = v.modRev
		// Seq: of two documents claiming one address, the one written
		// first keeps it.
		cs = append(cs, registry.Change{Key: k, Record: v.dec.rec, Err: v.dec.err, Seq: v.modRev, Attrs: []any{"mod_revision", v.modRev}})
	}
	s.ix.Apply(cs)
	if rev > s.rev {
		s.rev = rev
		close(s.revSig)
		s.revSig = make(chan struct{})
	}
}

type decoded struct {
	rec *registry.Record
	err error
}

// decodeChanged decodes the versions that differ from what s.keys holds
// and that list has not decoded yet. Called with s.mu held.
func (s *Store) decodeChanged(changes map[string]*version) {
	var keys []string
	var vers []*version
	for k, v := range changes {
		if m, ok := s.modRevs[k]; v != nil && v.dec == nil && (!ok || m != v.modRev) {
			keys, vers = append(keys, k), append(vers, v)
		}
	}
	s.decodeAll(keys, vers)
}

// decodeAll decodes vers[i] (the value of keys[i]) on every core: the
// first list of a large prefix is otherwise seconds of YAML parsing on one.
func (s *Store) decodeAll(keys []string, vers []*version) {
	out := parallel.Map(len(keys), 0, func(i int) decoded {
		rec, err := s.decode(keys[i], vers[i])
		return decoded{rec, err}
	})
	for i := range out {
		vers[i].dec = &out[i]
	}
}

func (s *Store) decode(key string, v *version) (*registry.Record, error) {
	rec, err := s.ix.Decode(v.value, "")
	if err != nil {
		return nil, err
	}
	if want := strings.TrimPrefix(key, s.cfg.Prefix); rec.Name != want {
		return nil, spec.Errors{{Field: "metadata.name", Message: fmt.Sprintf("is %q but the key names %q", rec.Name, want)}}
	}
	rec.UID = "c" + strconv.FormatInt(v.createRev, 10)
	return rec, nil
}

// waitRev waits until the index reflects rev (the store's own writes are
// visible to its Snapshot when Put and Delete return).
func (s *Store) waitRev(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	for {
		s.mu.Lock()
		cur, sig := s.rev, s.revSig
		s.mu.Unlock()
		if cur >= rev {
			return nil
		}
		select {
		case <-sig:
		case <-ctx.Done():
			return fmt.Errorf("%w: the change was written (revision %d) but the watch has not delivered it yet", registry.ErrUnavailable, rev)
		}
	}
}

// Put stores doc under <prefix><metadata.name> in a transaction that
// checks the key is still at the version this store's conflict check saw.
func (s *Store) Put(ctx context.Context, doc []byte) (*registry.Record, error) {
	rec, err := s.ix.Decode(doc, "")
	if err != nil {
		return nil, err
	}
	key := s.cfg.Prefix + rec.Name
	for range 5 {
		s.mu.Lock()
		err := s.ix.Check(key, rec)
		modRev := s.modRevs[key]
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cli.Txn(tctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, string(doc))).Commit()
		cancel()
		s.health.wrote(err)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", registry.ErrUnavailable, storeError(err))
		}
		if err := s.waitRev(ctx, resp.Header.Revision); err != nil {
			return nil, err
		}
		if !resp.Succeeded {
			continue // changed by someone else meanwhile; check again
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if pending, why := s.ix.Pending(key); pending != nil && why != nil {
			return nil, why
		}
		if got := s.ix.Served(key); got != nil && got.Revision == rec.Revision {
			return got, nil
		}
		return rec, nil // superseded by a later write already
	}
	return nil, fmt.Errorf("%w: %s keeps changing concurrently", registry.ErrConflict, key)
}

// Delete removes the instance's key, and its first-boot status with it;
// ErrNotFound if etcd has no such key.
func (s *Store) Delete(ctx context.Context, name string) error {
	key := s.cfg.Prefix + name
	tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	resp, err := s.cli.Txn(tctx).If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(s.bootPrefix()+name)).Commit()
	cancel()
	s.health.wrote(err)
	if err != nil {
		return fmt.Errorf("%w: %v", registry.ErrUnavailable, storeError(err))
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %q", registry.ErrNotFound, name)
	}
	return s.waitRev(ctx, resp.Header.Revision)
}

// probe finds out why etcd could not be reached, after the first list
// failed. The gRPC client retries connection errors until the request
// times out and then reports only "context deadline exceeded", which hides
// the usual cause (a TLS handshake refused: no client certificate, an
// unknown CA, TLS against a plain-HTTP port). probe connects to each
// endpoint itself and returns the first such error, or nil when every
// endpoint accepts a connection (the failure lies elsewhere).
func probe(ctx context.Context, cfg Config) error {
	var errs []error
	for _, ep := range cfg.Endpoints {
		if err := probeEndpoint(ctx, ep, cfg); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
		}
	}
	return errors.Join(errs...)
}

func probeEndpoint(ctx context.Context, endpoint string, cfg Config) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil // the client's own error says it
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return err
	}
	defer conn.Close()
	if u.Scheme != "https" && u.Scheme != "unixs" {
		return nil
	}
	tc := cfg.TLS
	if tc == nil {
		tc = &tls.Config{}
	}
	tc = tc.Clone()
	if tc.ServerName == "" {
		tc.ServerName = u.Hostname()
	}
	c := tls.Client(conn, tc)
	if err := c.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	// With TLS 1.3 the server checks the client's certificate after the
	// client's side of the handshake is done, and says so in an alert
	// that arrives on the first read. A server that accepted us sends
	// nothing and waits for gRPC's preface, so the read times out.
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		if errors.Is(err, io.EOF) {
			return errors.New("TLS: the server closed the connection after the handshake (does it require a client certificate?)")
		}
		return fmt.Errorf("TLS: %w", err)
	}
	return nil
}
