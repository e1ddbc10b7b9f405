// Package kubestore keeps the metadata server's instances in Kubernetes,
// as Instance objects (vminit.dev/v1alpha1, package kube/api/v1alpha1), so
// that a cluster operator manages them with kubectl and `vminit serve
// --kubernetes` replicas need no directory or etcd of their own.
//
// Each Store holds every Instance of its namespaces in memory (in node
// mode, Config.Node, only those its node's VMIs lead to, selected by the
// controller's node label: node.go): a list,
// then a watch, through client-go's Reflector (which resumes, re-lists
// after a watch expires and backs off while the API server is away).
// Requests are answered from that memory (Snapshot is an atomic load), so
// the server keeps serving while the API server is unreachable and catches
// up when it returns. A list is applied as one change, and so is every
// watch event: a request sees the set before it or after it, never a part.
//
// An object stands for its spec document (v1alpha1.SpecDocumentOf), loaded
// by registry.Index.Decode like an etcd key's or an admin API put's: an
// object that does not load is logged with every problem and its
// instance keeps its last good version. Namespaces are tenants: a record
// is named namespace/name (the key, in the snapshot, the signed proxy
// header and the admin API), so two namespaces' `web` are two instances.
//
// Who is served at which address is kuberules.Claims' rule, not the
// Index's first-claim-wins (VMIs' addresses of their pod network beat the
// addresses specs list, inside the networks Config.Addresses gives a
// namespace); the controller (vminit-controller) reports it in the Served
// condition with the same rule.
//
// An Instance's Secret and ConfigMap references (secretKeyRef,
// configMapKeyRef) are read in its own namespace, never another
// (kuberules.Refs, read here by refs.go); the store watches ConfigMaps as
// metadata and decodes again the Instances that refer to one that changes. It never lists or watches
// Secrets (that right would hand it every Secret of a namespace, data and
// all): it reads the ones an Instance names by name, and decodes the
// Instance again when its status.secrets, the resourceVersions the
// controller saw, changes, so a rotated Secret is served without a
// change of the spec.
//
// Put and Delete write Instance objects (in Config.Namespace) and return
// once the store's watch has applied the write.
//
// The store shares the instances' first-boot statuses between replicas
// (firstboot.Shared, firstboot.go): WriteBoot applies an Instance's
// status.firstBoot and its FirstBoot condition (server-side apply of the
// status subresource, under its own field manager, merged with what the
// object shows and paced per Instance) and records a FirstBootFailed
// Event; FollowBoots hands a tracker what the watch reads back of them.
package kubestore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/vminit/vminit/internal/lib/parallel"
	"github.com/vminit/vminit/internal/lib/revindex"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/kuberules"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/cluster"
	"github.com/vminit/vminit/spec"
)

// Config configures a Store.
type Config struct {
	// REST is the API server's client configuration.
	REST *rest.Config
	// Namespaces are watched; empty watches every namespace.
	Namespaces []string
	// Namespace is where Put creates Instances; default the first of
	// Namespaces, else "default".
	Namespace string
	// KubeVirt also identifies guests by their VirtualMachineInstances'
	// addresses (the KubeVirt CRDs must exist).
	KubeVirt bool
	// RequestTimeout bounds each request of Put and Delete, and how long
	// they wait for the watch to deliver their write; default 10 s.
	RequestTimeout time.Duration
	// Logger receives objects that do not load and watch failures;
	// default slog.Default().
	Logger *slog.Logger
	// Checks are the server's rules beyond the spec's validation (see
	// registry.Checks), run on every object read and every Put; the
	// policy also on the addresses a VMI adds.
	Checks registry.Checks
	// Addresses are the addresses Instances' specs may claim, by
	// namespace; default none (see kuberules.Claims).
	Addresses kuberules.AddressPolicy
	// BootWriteEvery is the least time between two first-boot writes of
	// one Instance that leave its state as it was (a new stage, module
	// or error: WriteBoot); default 10 s. A change of state is written
	// at once.
	BootWriteEvery time.Duration
	// Node, when set, is node mode (node.go): the store serves the VMs
	// of that Kubernetes node alone, watching only the
	// VirtualMachineInstances KubeVirt labels kubevirt.io/nodeName=Node,
	// the Instances the controller labels v1alpha1.NodeLabel(Node), and,
	// by name, what those do not cover that the VMIs lead to. It needs
	// KubeVirt, and writes no Instance (Put, Delete).
	Node string
	// MaxFollow bounds the objects node mode follows by name, a watch
	// each (Instances, VirtualMachines and ConfigMaps together); default
	// DefaultMaxFollow.
	MaxFollow int
}

// Store is a registry.Store backed by Instance objects.
type Store struct {
	cfg Config
	log *slog.Logger
	dyn dynamic.Interface

	// resolver reads the Secrets and ConfigMaps Instances refer to; meta
	// watches their metadata (refs.go).
	resolver platform.Resolver
	meta     metadata.Interface

	mu        sync.Mutex
	ix        *registry.Index // keyed by namespace/name
	instances map[string]*instance
	refDeps   revindex.Index       // kuberules.RefKey → the instances referring to it
	claims    *kuberules.Claims    // who is served at which address
	sig       chan struct{}        // closed and replaced at every apply
	followers []*firstboot.Tracker // FollowBoots' trackers (firstboot.go)
	boots     bootWrites           // WriteBoot's pacing (firstboot.go)
	node      *nodeFollow          // node mode's followers (node.go); nil otherwise

	cancel  context.CancelFunc
	stopped <-chan struct{} // closed by Close
	done    sync.WaitGroup
	errMu   sync.Mutex
	lastErr error
}

type instance struct {
	rv int64
	// base is the last version that loaded, named namespace/name, with
	// the addresses its spec lists; nil when none did. It claims them
	// while a newer version does not load, as it is what is served.
	base *registry.Record
	err  error // why the latest version does not load
	// refs are the Secrets and ConfigMaps the version refers to (kuberules.RefKey),
	// and src, kept only when there are some, what decodes it again when
	// one of them changes.
	refs map[string]bool
	src  *source
	// seen is what the object's status says of its first boot.
	seen seenBoot
	// sum is the SHA-256 of the document the version stands for, and
	// secrets what its status.secrets says (secretsOf): a change of
	// either decodes it again.
	sum     [sha256.Size]byte
	secrets string
}

// source is what an Instance object is decoded from.
type source struct {
	namespace, name, uid string
	rv                   int64
	doc                  []byte
}

// addresses are those the served version's spec lists.
func (in *instance) addresses() []netip.Addr {
	if in == nil || in.base == nil {
		return nil
	}
	return in.base.Addresses
}

// Open starts watching and returns once every watched resource has been
// listed, or fails when ctx ends first (an API server that cannot be
// reached, a missing CRD, a forbidden list): a replica with nothing to
// serve should not pretend to be ready.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.REST == nil {
		return nil, errors.New("kubestore: no client configuration")
	}
	if cfg.Node != "" && !cfg.KubeVirt {
		return nil, errors.New("kubestore: node mode serves the VirtualMachineInstances of a node, and the cluster does not serve KubeVirt's (kubevirt.io/v1)")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
		if len(cfg.Namespaces) > 0 {
			cfg.Namespace = cfg.Namespaces[0]
		}
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BootWriteEvery <= 0 {
		cfg.BootWriteEvery = 10 * time.Second
	}
	dyn, err := dynamic.NewForConfig(cfg.REST)
	if err != nil {
		return nil, fmt.Errorf("kubestore: %w", err)
	}
	s := &Store{cfg: cfg, log: cfg.Logger.With("store", "kubernetes"), dyn: dyn,
		instances: map[string]*instance{}, sig: make(chan struct{}),
		boots: bootWrites{last: map[string]time.Time{}, pending: map[string]firstboot.Status{}, wake: make(chan struct{}, 1)}}
	if s.meta, err = metadata.NewForConfig(cfg.REST); err != nil {
		return nil, fmt.Errorf("kubestore: %w", err)
	}
	if s.resolver, err = cluster.New(cfg.REST); err != nil {
		return nil, fmt.Errorf("kubestore: %w", err)
	}
	s.ix = registry.NewIndex(registry.IndexOptions{Logger: s.log, KeyAttr: "object",
		Invalid: "kubestore: invalid Instance skipped", Refused: "kubestore: Instance refused", Checks: cfg.Checks})
	s.claims = kuberules.NewClaims(cfg.Addresses, func(a netip.Addr) bool {
		err := s.ix.Admit(&registry.Record{Addresses: []netip.Addr{a}})
		if err != nil {
			s.log.Warn("kubestore: a VirtualMachineInstance reports an address the server never serves", "address", a, "problem", err.Error())
		}
		return err != nil
	})
	namespaces := cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel, s.stopped = cancel, runCtx.Done()
	s.done.Go(func() { s.flushBoots(runCtx) })
	if cfg.Node != "" {
		s.node = newNodeFollow(s, runCtx)
	}
	var synced []<-chan struct{}
	for _, ns := range namespaces {
		if cfg.Node != "" {
			// Node mode: the node's VMIs, and what they lead to by name
			// (node.go).
			synced = append(synced, s.watch(runCtx, v1alpha1.KubeVirtVirtualMachineInstances, ns, nodeSelector(cfg.Node), &sink{ns: ns, put: s.putVMIs}),
				s.watch(runCtx, v1alpha1.GroupVersionResource, ns, labelled(cfg.Node), s.node.labelledSink(s, ns)))
			continue
		}
		// Secrets are not watched (the server may not list them: refs.go);
		// the controller's status.secrets says when one changed.
		synced = append(synced, s.watch(runCtx, v1alpha1.GroupVersionResource, ns, nil, &sink{ns: ns, put: s.putInstances}),
			s.watchRefs(runCtx, spec.RefConfigMap, ns, ""))
		if cfg.KubeVirt {
			synced = append(synced, s.watch(runCtx, v1alpha1.KubeVirtVirtualMachineInstances, ns, nil, &sink{ns: ns, put: s.putVMIs}))
			synced = append(synced, s.watch(runCtx, v1alpha1.KubeVirtVirtualMachines, ns, nil, &sink{ns: ns, put: s.putVMs}))
		}
	}
	fail := func() (*Store, error) {
		s.Close()
		err := ctx.Err()
		if last := s.lastError(); last != nil {
			err = fmt.Errorf("%w (%w)", last, err)
		}
		return nil, fmt.Errorf("kubestore: listing the Instances: %w", err)
	}
	for _, c := range synced {
		select {
		case <-c:
		case <-ctx.Done():
			return fail()
		}
	}
	if err := s.node.settle(ctx, s); err != nil {
		return fail()
	}
	return s, nil
}

// watch runs a Reflector of gvr in namespace ns feeding sink, its list
// options narrowed by sel (nil: none), and returns a channel closed once
// the first list has been applied.
func (s *Store) watch(ctx context.Context, gvr schema.GroupVersionResource, ns string, sel func(*metav1.ListOptions), sink *sink) <-chan struct{} {
	client := s.dyn.Resource(gvr).Namespace(ns)
	s.reflect(ctx, gvr, &unstructured.Unstructured{}, sink,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if sel != nil {
				sel(&opts)
			}
			return client.List(ctx, opts)
		},
		func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if sel != nil {
				sel(&opts)
			}
			return client.Watch(ctx, opts)
		})
	return sink.synced()
}

// reflect runs a Reflector of gvr, listing and watching with list and
// watchFn, into sink: the one place the store's errors are noted and a
// watch cut by Close ends quietly.
func (s *Store) reflect(ctx context.Context, gvr schema.GroupVersionResource, example runtime.Object, sink cache.ReflectorStore,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := list(ctx, opts)
			s.noteErr(gvr, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := watchFn(ctx, opts)
			if err != nil && ctx.Err() != nil {
				// Cut by Close: a watch that ends with the context, not an
				// error, which the Reflector would log as "Failed to watch
				// ... context canceled" after every short-lived store (a
				// one-shot command closes its store while the watch that
				// follows the list is still on its way).
				return watch.NewFake(), nil
			}
			s.noteErr(gvr, err)
			return w, err
		},
	}
	r := cache.NewReflectorWithOptions(lw, example, sink, cache.ReflectorOptions{Name: "kubestore " + gvr.Resource})
	s.done.Go(func() { r.RunWithContext(ctx) })
}

// noteErr keeps the last list or watch error (for Open's message) and
// logs it: the Reflector retries by itself, with backoff.
func (s *Store) noteErr(gvr schema.GroupVersionResource, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	s.errMu.Lock()
	s.lastErr = err
	s.errMu.Unlock()
	s.log.Warn("kubestore: the API server did not answer; serving from memory", "resource", gvr.Resource, "err", err)
}

func (s *Store) lastError() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.lastErr
}

// Snapshot returns the current index (an atomic load; never waits for
// the API server).
func (s *Store) Snapshot() *registry.Snapshot { return s.ix.Snapshot() }

// Close stops watching, and writes the first-boot statuses whose write
// waits (WriteBoot), for at most Config.RequestTimeout.
func (s *Store) Close() error {
	s.cancel()
	s.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	s.flushPending(ctx)
	return nil
}

// decodeInstance loads an Instance object's document; prev is the key's
// last version, whose base stays when this one does not load. The
// record's name is the object's namespace/name, and its UID the
// object's: a new one when the object is deleted and created again, the
// same on every replica.
func (s *Store) decodeInstance(u *unstructured.Unstructured, prev *instance) *instance {
	rv, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	sp, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec")
	doc, err := v1alpha1.SpecDocumentOf(u.GetName(), u.GetLabels(), sp)
	if err != nil {
		in := &instance{rv: rv, err: err}
		if prev != nil {
			in.base = prev.base
		}
		return in
	}
	sum, secrets := sha256.Sum256(doc), secretsOf(u)
	if prev != nil && prev.err == nil && prev.base != nil && prev.base.UID == string(u.GetUID()) && prev.sum == sum && prev.secrets == secrets {
		// The same document at a new resourceVersion, its Secrets as
		// they were: a status write (the controller's, or a first
		// boot's). Decoding and checking it again would render it on
		// every replica at every write.
		in := *prev
		in.rv = rv
		if prev.src != nil {
			src := *prev.src
			src.rv = rv
			in.src = &src
		}
		return &in
	}
	in := s.decodeSource(&source{namespace: u.GetNamespace(), name: u.GetName(), uid: string(u.GetUID()), rv: rv, doc: doc}, prev)
	in.secrets = secrets
	return in
}

// secretsOf is what an Instance's status.secrets says: the Secrets its
// spec refers to and the resourceVersion of each, as the controller last
// saw them ("name=version" lines).
func secretsOf(u *unstructured.Unstructured) string {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "secrets")
	var b strings.Builder
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			fmt.Fprintf(&b, "%v=%v\n", m["name"], m["resourceVersion"])
		}
	}
	return b.String()
}

// decodeSource loads an Instance's document, reading the Secrets and
// ConfigMaps it refers to in its own namespace.
func (s *Store) decodeSource(src *source, prev *instance) *instance {
	in := &instance{rv: src.rv, sum: sha256.Sum256(src.doc)}
	if prev != nil {
		in.seen, in.secrets = prev.seen, prev.secrets
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	refs := kuberules.NewRefs(ctx, s.resolver, src.namespace)
	var err error
	in.base, err = s.ix.DecodeWith(spec.Loader{Refs: refs, IdentifiedByPlatform: true}, src.doc, "")
	if in.refs = refs.Deps(); len(in.refs) > 0 {
		in.src = src
	}
	if in.base != nil {
		in.base.Name = kuberules.Key(src.namespace, src.name)
		in.base.UID = src.uid
	} else if prev != nil {
		in.base = prev.base
	}
	in.err = err
	return in
}

// apply hands the Index the load errors in failed (logged; the key keeps
// what it serves) and the records the keys serve now, as kuberules.Claims resolve
// their addresses, and wakes the writers waiting for it. Called with
// s.mu held.
func (s *Store) apply(failed []registry.Change, keys []string) {
	cs := failed
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, k := range keys {
		in := s.instances[k]
		switch {
		case in == nil:
			cs = append(cs, registry.Change{Key: k})
		case in.base != nil:
			cs = append(cs, registry.Change{Key: k, Record: s.claims.Record(k, in.base), Seq: in.rv})
		}
	}
	s.ix.Apply(cs)
	close(s.sig)
	s.sig = make(chan struct{})
}

// sink hands what a Reflector reads to one of the Store's put methods: a
// watch event as a batch of one, a list as the whole set of its namespace
// (objects missing from it are gone). It closes synced at the first list.
type sink struct {
	// ns is the namespace the Reflector lists ("": every namespace): a
	// list replaces that namespace's objects only; key, when set, is the
	// one object it lists (node mode's followers, node.go); holds, when
	// set, says which objects of the namespace are the Reflector's (node
	// mode's labelled Instances), and track is told of each object it
	// delivers (nil: gone). Both are called with the Store's mu held.
	ns, key string
	holds   func(key string) bool
	track   func(key string, u *unstructured.Unstructured)
	put     func(b batch)
	// live, when set, says (called with the Store's mu held) whether the
	// Reflector still counts: a follower stopped while one of its
	// events waited for the lock must not bring its object back.
	live func() bool
	once sync.Once
	ch   chan struct{}
}

// batch is what changed: objs, deleted (gone), or the complete list of
// the namespaces that covers says (replace); nothing when live says the
// Reflector no longer counts.
type batch struct {
	objs          []any
	gone, replace bool
	covers        func(key string) bool
	live          func() bool
	track         func(key string, u *unstructured.Unstructured)
}

// stale reports whether b comes from a Reflector that no longer counts.
// Called with the Store's mu held.
func (b batch) stale() bool { return b.live != nil && !b.live() }

func (k *sink) covers(key string) bool {
	if k.key != "" {
		return key == k.key
	}
	if k.holds != nil {
		return k.holds(key)
	}
	return k.ns == "" || strings.HasPrefix(key, k.ns+"/")
}

func (k *sink) synced() <-chan struct{} { return k.init() }

func (k *sink) init() chan struct{} {
	k.once.Do(func() { k.ch = make(chan struct{}) })
	return k.ch
}

func (k *sink) Add(obj any) error { return k.Update(obj) }
func (k *sink) Update(obj any) error {
	k.put(batch{objs: []any{obj}, covers: k.covers, live: k.live, track: k.track})
	return nil
}
func (k *sink) Delete(obj any) error {
	k.put(batch{objs: []any{obj}, gone: true, covers: k.covers, live: k.live, track: k.track})
	return nil
}
func (k *sink) Resync() error { return nil }

func (k *sink) Replace(list []any, _ string) error {
	k.put(batch{objs: list, replace: true, covers: k.covers, live: k.live, track: k.track})
	if ch := k.init(); !isClosed(ch) {
		close(ch)
	}
	return nil
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func asUnstructured(obj any) (*unstructured.Unstructured, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// walk calls set for every object of b: with the object, or nil when the
// batch says it is gone; and, for a list, with nil for every key of known
// that the list covers but does not hold (deleted while no watch ran).
// It returns the instances whose resolution the calls may have changed.
func (b batch) walk(known []string, set func(key string, u *unstructured.Unstructured) []string) []string {
	out := kuberules.Affected{}
	seen := make(map[string]bool, len(b.objs))
	for _, o := range b.objs {
		u, ok := asUnstructured(o)
		if !ok {
			continue
		}
		key := kuberules.Key(u.GetNamespace(), u.GetName())
		seen[key] = true
		if b.gone {
			u = nil
		}
		for _, k := range set(key, u) {
			out[k] = true
		}
	}
	if b.replace {
		for _, key := range known {
			if !seen[key] && b.covers(key) {
				for _, k := range set(key, nil) {
					out[k] = true
				}
			}
		}
	}
	return out.Keys()
}

// putInstances applies Instance objects, decoding a list on every core.
func (s *Store) putInstances(b batch) {
	decoded := s.decodeChanged(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.stale() {
		return
	}
	var failed []registry.Change
	affected := b.walk(slices.Collect(maps.Keys(s.instances)), func(key string, u *unstructured.Unstructured) []string {
		if b.track != nil {
			b.track(key, u)
		}
		var in *instance
		if u != nil {
			var ok bool
			if in, ok = decoded[key]; !ok {
				return nil // already applied at this resourceVersion
			}
			if in.err != nil {
				failed = append(failed, registry.Change{Key: key, Err: in.err, Seq: in.rv, Attrs: []any{"resource_version", in.rv}})
			}
		}
		if in == nil {
			return s.forget(key)
		}
		s.setRefDeps(key, in)
		s.followBoot(key, in, u)
		s.instances[key] = in
		return s.claims.SetSpec(key, in.addresses())
	})
	s.apply(failed, append(affected, s.follow()...))
}

// forget drops instance key, and returns the instances whose resolution
// may have changed. Called with s.mu held.
func (s *Store) forget(key string) []string {
	s.setRefDeps(key, nil)
	delete(s.instances, key)
	return s.claims.SetSpec(key, nil)
}

// decodeChanged decodes, on every core, the Instance objects of b not
// yet applied at their resourceVersion (a re-list after a watch expired
// repeats them all), by key.
func (s *Store) decodeChanged(b batch) map[string]*instance {
	if b.gone {
		return nil
	}
	var todo []*unstructured.Unstructured
	var prev []*instance
	s.mu.Lock()
	for _, o := range b.objs {
		u, ok := asUnstructured(o)
		if !ok {
			continue
		}
		old := s.instances[kuberules.Key(u.GetNamespace(), u.GetName())]
		if rv, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64); old == nil || old.rv != rv {
			todo, prev = append(todo, u), append(prev, old)
		}
	}
	s.mu.Unlock()
	decoded := parallel.Map(len(todo), 0, func(i int) *instance { return s.decodeInstance(todo[i], prev[i]) })
	out := make(map[string]*instance, len(todo))
	for i, u := range todo {
		out[kuberules.Key(u.GetNamespace(), u.GetName())] = decoded[i]
	}
	return out
}

// putVMIs applies VirtualMachineInstances: their addresses, and the
// instance they name.
func (s *Store) putVMIs(b batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.stale() {
		return
	}
	keys := b.walk(s.claims.VMIs(), s.claims.SetVMI)
	s.apply(nil, append(keys, s.follow()...))
}

// putVMs applies VirtualMachines: the instance each names.
func (s *Store) putVMs(b batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.stale() {
		return
	}
	keys := b.walk(s.claims.VMs(), s.claims.SetVM)
	s.apply(nil, append(keys, s.follow()...))
}

// Put validates doc and creates or updates its Instance object in
// Config.Namespace, then waits until the store has applied the write. A
// document refused on load (invalid, or taking another instance's name or
// address) is refused without writing.
func (s *Store) Put(ctx context.Context, doc []byte) (*registry.Record, error) {
	if s.node != nil {
		return nil, errNodeWrites
	}
	rec, err := s.ix.DecodeWith(spec.Loader{Refs: kuberules.NewRefs(ctx, s.resolver, s.cfg.Namespace), IdentifiedByPlatform: true}, doc, "")
	if err != nil {
		return nil, err
	}
	inst, _, err := spec.Decode(doc)
	if err != nil {
		return nil, err
	}
	key := kuberules.Key(s.cfg.Namespace, rec.Name)
	if err := s.cfg.Addresses.Check(s.cfg.Namespace, rec.Addresses); err != nil {
		return nil, err
	}
	rec.Name = key
	s.mu.Lock()
	err = s.ix.Check(key, rec)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	obj := v1alpha1.FromSpec(inst)
	obj.Namespace = s.cfg.Namespace
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	client := s.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(s.cfg.Namespace)
	var written *unstructured.Unstructured
	for range 5 {
		tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		cur, err := client.Get(tctx, inst.Metadata.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			written, err = client.Create(tctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{FieldManager: "vminit"})
		case err == nil:
			cur.Object["spec"] = u["spec"]
			cur.SetLabels(obj.Labels)
			written, err = client.Update(tctx, cur, metav1.UpdateOptions{FieldManager: "vminit"})
		}
		cancel()
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue // changed by someone else meanwhile
		}
		if err != nil {
			return nil, unavailable(err)
		}
		break
	}
	if written == nil {
		return nil, fmt.Errorf("%w: %s keeps changing concurrently", registry.ErrConflict, key)
	}
	rv, _ := strconv.ParseInt(written.GetResourceVersion(), 10, 64)
	if err := s.waitFor(ctx, func() bool { in := s.instances[key]; return in != nil && in.rv >= rv }); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if pending, why := s.ix.Pending(key); pending != nil && why != nil {
		return nil, why
	}
	if got := s.ix.Served(key); got != nil {
		return got, nil
	}
	return rec, nil
}

// Delete removes the named instance's object: namespace/name, as the
// store names its records, or a bare name in Config.Namespace (where Put
// writes); ErrNotFound when the store holds no such object.
func (s *Store) Delete(ctx context.Context, name string) error {
	if s.node != nil {
		return errNodeWrites
	}
	key := name
	if !strings.Contains(name, "/") {
		key = kuberules.Key(s.cfg.Namespace, name)
	}
	s.mu.Lock()
	_, ok := s.instances[key]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", registry.ErrNotFound, name)
	}
	ns, name, _ := strings.Cut(key, "/")
	tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	err := s.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Delete(tctx, name, metav1.DeleteOptions{})
	cancel()
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %q", registry.ErrNotFound, name)
	}
	if err != nil {
		return unavailable(err)
	}
	return s.waitFor(ctx, func() bool { return s.instances[key] == nil })
}

// waitFor waits until done (called with s.mu held) is true.
func (s *Store) waitFor(ctx context.Context, done func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	for {
		s.mu.Lock()
		ok, sig := done(), s.sig
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-sig:
		case <-ctx.Done():
			return fmt.Errorf("%w: the change was written but the watch has not delivered it yet", registry.ErrUnavailable)
		}
	}
}

// unavailable marks errors that say the API server could not be reached
// (or would not answer) as registry.ErrUnavailable; refusals (forbidden,
// invalid) keep their own meaning.
func unavailable(err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsUnauthorized(err) {
		return err
	}
	return fmt.Errorf("%w: %v", registry.ErrUnavailable, err)
}
