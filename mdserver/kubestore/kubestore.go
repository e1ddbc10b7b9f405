// Package kubestore keeps the metadata server's instances in Kubernetes,
// as Instance objects (vminit.dev/v1alpha1, package kube/api/v1alpha1), so
// that a cluster operator manages them with kubectl and `vminit serve
// --kubernetes` replicas need no directory or etcd of their own.
//
// Each Store holds every Instance of its namespaces in memory: a list,
// then a watch, through client-go's Reflector (which resumes, re-lists
// after a watch expires and backs off while the API server is away).
// Requests are answered from that memory (Snapshot is an atomic load), so
// the server keeps serving while the API server is unreachable and catches
// up when it returns. A list is applied as one change, and so is every
// watch event: a request sees the set before it or after it, never a part.
//
// An object stands for its spec document (v1alpha1.SpecDocumentOf), loaded
// by registry.Index.Decode like an etcd key's or an admin API put's: an
// object that does not load, or that takes another instance's name or
// address, is logged with every problem and its instance keeps its last
// good version (registry.Index; keys are namespace/name, and instance
// names are unique across the watched namespaces). The controller (`vminit
// controller`) writes the same problems into the object's status.
//
// With KubeVirt set, a guest is also known by its VirtualMachineInstance:
// the addresses in a VMI's status.interfaces (ipAddress, ipAddresses) are
// added to the Instance that the VMI names with the vminit.dev/instance
// annotation, or that its VirtualMachine (of the same name) names.
//
// Put and Delete write Instance objects (in Config.Namespace) and return
// once the store's watch has applied the write.
package kubestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
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
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/vminit/vminit/internal/lib/parallel"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/spec"
)

// The KubeVirt resources a Store reads with Config.KubeVirt.
var (
	VirtualMachineInstances = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	VirtualMachines         = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
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
}

// Store is a registry.Store backed by Instance objects.
type Store struct {
	cfg Config
	log *slog.Logger
	dyn dynamic.Interface

	mu        sync.Mutex
	ix        *registry.Index // keyed by namespace/name
	instances map[string]*instance
	vmis      map[string]vmi    // namespace/name
	vms       map[string]string // namespace/name → the instance it names
	extra     map[string][]netip.Addr
	sig       chan struct{} // closed and replaced at every apply

	cancel  context.CancelFunc
	done    sync.WaitGroup
	errMu   sync.Mutex
	lastErr error
}

type instance struct {
	rv   int64
	base *registry.Record // as the document says, nil when it does not load
	err  error
}

type vmi struct {
	instance string // the Instance's key, "" when it names none
	addrs    []netip.Addr
}

// Open starts watching and returns once every watched resource has been
// listed, or fails when ctx ends first (an API server that cannot be
// reached, a missing CRD, a forbidden list): a replica with nothing to
// serve should not pretend to be ready.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.REST == nil {
		return nil, errors.New("kubestore: no client configuration")
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
	dyn, err := dynamic.NewForConfig(cfg.REST)
	if err != nil {
		return nil, fmt.Errorf("kubestore: %w", err)
	}
	s := &Store{cfg: cfg, log: cfg.Logger.With("store", "kubernetes"), dyn: dyn,
		instances: map[string]*instance{}, vmis: map[string]vmi{}, vms: map[string]string{},
		extra: map[string][]netip.Addr{}, sig: make(chan struct{})}
	s.ix = registry.NewIndex(registry.IndexOptions{Logger: s.log, KeyAttr: "object",
		Invalid: "kubestore: invalid Instance skipped", Refused: "kubestore: Instance refused", Checks: cfg.Checks})
	namespaces := cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	var synced []<-chan struct{}
	for _, ns := range namespaces {
		synced = append(synced, s.watch(runCtx, v1alpha1.GroupVersionResource, ns, &sink{ns: ns, put: s.putInstances}))
		if cfg.KubeVirt {
			synced = append(synced, s.watch(runCtx, VirtualMachineInstances, ns, &sink{ns: ns, put: s.putVMIs}))
			synced = append(synced, s.watch(runCtx, VirtualMachines, ns, &sink{ns: ns, put: s.putVMs}))
		}
	}
	for _, c := range synced {
		select {
		case <-c:
		case <-ctx.Done():
			s.Close()
			err := ctx.Err()
			if last := s.lastError(); last != nil {
				err = fmt.Errorf("%w (%w)", last, err)
			}
			return nil, fmt.Errorf("kubestore: listing the Instances: %w", err)
		}
	}
	return s, nil
}

// watch runs a Reflector of gvr in namespace ns feeding sink, and returns
// a channel closed once the first list has been applied.
func (s *Store) watch(ctx context.Context, gvr schema.GroupVersionResource, ns string, sink *sink) <-chan struct{} {
	client := s.dyn.Resource(gvr).Namespace(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := client.List(ctx, opts)
			s.noteErr(gvr, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := client.Watch(ctx, opts)
			s.noteErr(gvr, err)
			return w, err
		},
	}
	r := cache.NewReflectorWithOptions(lw, &unstructured.Unstructured{}, sink, cache.ReflectorOptions{Name: "kubestore " + gvr.Resource})
	s.done.Go(func() { r.RunWithContext(ctx) })
	return sink.synced()
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

// Close stops watching.
func (s *Store) Close() error {
	s.cancel()
	s.done.Wait()
	return nil
}

func keyOf(ns, name string) string { return ns + "/" + name }

// decodeInstance loads an Instance object's document. The record's UID
// is the object's: a new one when the object is deleted and created
// again, the same on every replica.
func (s *Store) decodeInstance(u *unstructured.Unstructured) *instance {
	rv, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	in := &instance{rv: rv}
	sp, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec")
	doc, err := v1alpha1.SpecDocumentOf(u.GetName(), u.GetLabels(), sp)
	if err == nil {
		in.base, err = s.ix.Decode(doc, "")
	}
	if in.base != nil {
		in.base.UID = string(u.GetUID())
	}
	in.err = err
	return in
}

// record is what key serves: its document's record, with the addresses of
// the VMIs that name it.
func (s *Store) record(key string, in *instance) *registry.Record {
	extra := s.extra[key]
	if in.base == nil || len(extra) == 0 {
		return in.base
	}
	r := *in.base
	r.Addresses = slices.Clone(r.Addresses)
	h := sha256.New()
	for _, a := range extra {
		if !slices.Contains(r.Addresses, a) {
			r.Addresses = append(r.Addresses, a)
			h.Write(a.AsSlice())
		}
	}
	r.Revision += "-" + hex.EncodeToString(h.Sum(nil))[:8]
	return &r
}

// change is key's Change for the Index.
func (s *Store) change(key string) registry.Change {
	in := s.instances[key]
	if in == nil {
		return registry.Change{Key: key}
	}
	rec, err := s.record(key, in), in.err
	if rec != nil && rec != in.base {
		// The addresses its VMIs add pass the server's policy too.
		if err = s.ix.Admit(rec); err != nil {
			rec = nil
		}
	}
	return registry.Change{Key: key, Record: rec, Err: err, Seq: in.rv,
		Attrs: []any{"resource_version", in.rv}}
}

// apply publishes the changed keys' versions. Called with s.mu held.
func (s *Store) apply(keys []string) {
	cs := make([]registry.Change, 0, len(keys))
	for _, k := range keys {
		cs = append(cs, s.change(k))
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
	// list replaces that namespace's objects only.
	ns   string
	put  func(b batch)
	once sync.Once
	ch   chan struct{}
}

// batch is what changed: objs, deleted (gone), or the complete list of
// the namespaces that covers says (replace).
type batch struct {
	objs          []any
	gone, replace bool
	covers        func(key string) bool
}

func (k *sink) covers(key string) bool { return k.ns == "" || strings.HasPrefix(key, k.ns+"/") }

func (k *sink) synced() <-chan struct{} { return k.init() }

func (k *sink) init() chan struct{} {
	k.once.Do(func() { k.ch = make(chan struct{}) })
	return k.ch
}

func (k *sink) Add(obj any) error    { return k.Update(obj) }
func (k *sink) Update(obj any) error { k.put(batch{objs: []any{obj}, covers: k.covers}); return nil }
func (k *sink) Delete(obj any) error {
	k.put(batch{objs: []any{obj}, gone: true, covers: k.covers})
	return nil
}
func (k *sink) Resync() error { return nil }

func (k *sink) Replace(list []any, _ string) error {
	k.put(batch{objs: list, replace: true, covers: k.covers})
	if ch := k.init(); !isClosed(ch) {
		close(ch)
	}
	return nil
}

func isClosed(ch chan struct{}) bool {
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

// putInstances applies Instance objects, decoding a list on every core.
func (s *Store) putInstances(b batch) {
	objs := make([]*unstructured.Unstructured, 0, len(b.objs))
	for _, o := range b.objs {
		if u, ok := asUnstructured(o); ok {
			objs = append(objs, u)
		}
	}
	// Objects at the resourceVersion already applied (a re-list after a
	// watch expired) need no decoding.
	var todo []int
	if !b.gone {
		s.mu.Lock()
		for i, u := range objs {
			old := s.instances[keyOf(u.GetNamespace(), u.GetName())]
			if rv, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64); old == nil || old.rv != rv {
				todo = append(todo, i)
			}
		}
		s.mu.Unlock()
	}
	decoded := parallel.Map(len(todo), 0, func(i int) *instance { return s.decodeInstance(objs[todo[i]]) })
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	seen := make(map[string]bool, len(objs))
	for _, u := range objs {
		key := keyOf(u.GetNamespace(), u.GetName())
		seen[key] = true
		if b.gone {
			delete(s.instances, key)
			keys = append(keys, key)
		}
	}
	for i, j := range todo {
		key := keyOf(objs[j].GetNamespace(), objs[j].GetName())
		s.instances[key] = decoded[i]
		keys = append(keys, key)
	}
	if b.replace {
		for key := range s.instances {
			if !seen[key] && b.covers(key) {
				delete(s.instances, key)
				keys = append(keys, key)
			}
		}
	}
	s.apply(keys)
}

// vmiOf reads what the store needs of a VMI: the instance it names by
// annotation, and its interfaces' addresses.
func vmiOf(u *unstructured.Unstructured) vmi {
	var out vmi
	if name := u.GetAnnotations()[v1alpha1.AnnotationInstance]; name != "" {
		out.instance = keyOf(u.GetNamespace(), name)
	}
	ifaces, _, _ := unstructured.NestedSlice(u.Object, "status", "interfaces")
	for _, i := range ifaces {
		m, _ := i.(map[string]any)
		var ips []string
		if ip, ok := m["ipAddress"].(string); ok {
			ips = append(ips, ip)
		}
		if l, ok := m["ipAddresses"].([]any); ok {
			for _, ip := range l {
				if s, ok := ip.(string); ok {
					ips = append(ips, s)
				}
			}
		}
		for _, ip := range ips {
			if a, err := netip.ParseAddr(ip); err == nil && a.Zone() == "" {
				out.addrs = append(out.addrs, a.Unmap())
			}
		}
	}
	return out
}

// putVMIs applies VirtualMachineInstances: their addresses, and the
// instance they name.
func (s *Store) putVMIs(b batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	affected := map[string]bool{}
	seen := map[string]bool{}
	for _, o := range b.objs {
		u, ok := asUnstructured(o)
		if !ok {
			continue
		}
		key := keyOf(u.GetNamespace(), u.GetName())
		seen[key] = true
		if old, ok := s.vmis[key]; ok {
			affected[s.effective(key, old)] = true
		}
		if b.gone {
			delete(s.vmis, key)
			continue
		}
		nv := vmiOf(u)
		s.vmis[key] = nv
		affected[s.effective(key, nv)] = true
	}
	if b.replace {
		for key, old := range s.vmis {
			if !seen[key] && b.covers(key) {
				affected[s.effective(key, old)] = true
				delete(s.vmis, key)
			}
		}
	}
	delete(affected, "")
	s.apply(s.recomputeExtra(affected))
}

// effective is the instance a VMI's addresses go to: the one it names,
// else the one its VirtualMachine names.
func (s *Store) effective(vmiKey string, v vmi) string {
	if v.instance != "" {
		return v.instance
	}
	if name := s.vms[vmiKey]; name != "" {
		ns, _, _ := strings.Cut(vmiKey, "/")
		return keyOf(ns, name)
	}
	return ""
}

// recomputeExtra recomputes the VMI addresses of the instances in keys
// and returns those whose addresses changed. Called with s.mu held.
func (s *Store) recomputeExtra(keys map[string]bool) []string {
	if len(keys) == 0 {
		return nil
	}
	next := map[string][]netip.Addr{}
	for vk, v := range s.vmis {
		if e := s.effective(vk, v); keys[e] {
			next[e] = append(next[e], v.addrs...)
		}
	}
	var changed []string
	for k := range keys {
		addrs := next[k]
		slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
		addrs = slices.Compact(addrs)
		if !slices.Equal(addrs, s.extra[k]) {
			if len(addrs) == 0 {
				delete(s.extra, k)
			} else {
				s.extra[k] = addrs
			}
			changed = append(changed, k)
		}
	}
	return changed
}

// putVMs applies VirtualMachines: the instance each names.
func (s *Store) putVMs(b batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	affected := map[string]bool{}
	seen := map[string]bool{}
	note := func(key string) {
		if old, ok := s.vmis[key]; ok {
			affected[s.effective(key, old)] = true
		}
	}
	for _, o := range b.objs {
		u, ok := asUnstructured(o)
		if !ok {
			continue
		}
		key := keyOf(u.GetNamespace(), u.GetName())
		seen[key] = true
		note(key)
		name := u.GetAnnotations()[v1alpha1.AnnotationInstance]
		if b.gone || name == "" {
			delete(s.vms, key)
		} else {
			s.vms[key] = name
		}
		note(key)
	}
	if b.replace {
		for key := range s.vms {
			if !seen[key] && b.covers(key) {
				note(key)
				delete(s.vms, key)
				note(key)
			}
		}
	}
	delete(affected, "")
	s.apply(s.recomputeExtra(affected))
}

// Put validates doc and creates or updates its Instance object in
// Config.Namespace, then waits until the store has applied the write. A
// document refused on load (invalid, or taking another instance's name or
// address) is refused without writing.
func (s *Store) Put(ctx context.Context, doc []byte) (*registry.Record, error) {
	rec, err := s.ix.Decode(doc, "")
	if err != nil {
		return nil, err
	}
	inst, _, err := spec.Decode(doc)
	if err != nil {
		return nil, err
	}
	key := keyOf(s.cfg.Namespace, rec.Name)
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
		cur, err := client.Get(tctx, rec.Name, metav1.GetOptions{})
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

// Delete removes the named instance's object; ErrNotFound when the store
// serves no instance of that name.
func (s *Store) Delete(ctx context.Context, name string) error {
	s.mu.Lock()
	key, ok := s.ix.KeyOf(name)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", registry.ErrNotFound, name)
	}
	ns, _, _ := strings.Cut(key, "/")
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
