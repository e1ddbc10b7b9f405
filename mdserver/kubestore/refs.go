package kubestore

import (
	"context"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/vminit/vminit/mdserver/kuberules"
	"github.com/vminit/vminit/mdserver/registry"
)

// watchRefs follows the metadata of kind's objects in ns (their values
// are read only when an Instance asks, through Refs), and decodes again
// the Instances that refer to one that changes; name, when set, is the
// one object followed (node mode, node.go).
func (s *Store) watchRefs(ctx context.Context, kind, ns, name string) <-chan struct{} {
	gvr := corev1.SchemeGroupVersion.WithResource(kuberules.RefResources[kind])
	client := s.meta.Resource(gvr).Namespace(ns)
	sink := &refSink{s: s, kind: kind}
	sel := func(*metav1.ListOptions) {}
	if name != "" {
		sink.only = kuberules.RefKey(kind, ns, name)
		sel = byName(name)
	}
	s.reflect(ctx, gvr, &metav1.PartialObjectMetadata{}, sink,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			sel(&opts)
			return client.List(ctx, opts)
		},
		func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			sel(&opts)
			return client.Watch(ctx, opts)
		})
	return sink.synced()
}

// refSink hands a Reflector's Secrets or ConfigMaps to the Store: each
// event, and each list, decodes again the Instances referring to them.
type refSink struct {
	s    *Store
	kind string
	// only, when set, is the one object (kuberules.RefKey) the Reflector lists.
	only string
	once sync.Once
	ch   chan struct{}
}

func (k *refSink) synced() <-chan struct{} {
	k.once.Do(func() { k.ch = make(chan struct{}) })
	return k.ch
}

func (k *refSink) Add(obj any) error    { k.s.refsChanged(k.keys([]any{obj})); return nil }
func (k *refSink) Update(obj any) error { return k.Add(obj) }
func (k *refSink) Delete(obj any) error { return k.Add(obj) }
func (k *refSink) Resync() error        { return nil }

// Replace is a list: anything may have changed while no watch ran, so
// every Instance with references of this kind is decoded again.
func (k *refSink) Replace(_ []any, _ string) error {
	all := []string{k.only}
	if k.only == "" {
		k.s.mu.Lock()
		all = k.s.refDeps.Objects()
		k.s.mu.Unlock()
	}
	k.s.refsChanged(all)
	if k.synced(); !isClosed(k.ch) {
		close(k.ch)
	}
	return nil
}

func (k *refSink) keys(objs []any) []string {
	var out []string
	for _, o := range objs {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if m, ok := o.(metav1.Object); ok {
			out = append(out, kuberules.RefKey(k.kind, m.GetNamespace(), m.GetName()))
		}
	}
	return out
}

// refsChanged decodes again the Instances that refer to any of refs
// (kuberules.RefKeys), and applies them as one change.
func (s *Store) refsChanged(refs []string) {
	s.mu.Lock()
	keys := map[string]bool{}
	for _, ref := range refs {
		for _, k := range s.refDeps.Dependents(ref) {
			keys[k] = true
		}
	}
	todo := map[string]*instance{}
	for k := range keys {
		if in := s.instances[k]; in != nil && in.src != nil {
			todo[k] = in
		}
	}
	s.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	decoded := map[string]*instance{}
	for k, in := range todo {
		decoded[k] = s.decodeSource(in.src, in)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var failed []registry.Change
	affected := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(decoded)) {
		in := decoded[k]
		cur := s.instances[k]
		if cur == nil || cur.rv != in.rv && (cur.sum != in.sum || in.src == nil) {
			continue // deleted or changed meanwhile: its own event decoded it
		}
		if cur.rv != in.rv {
			// A status write meanwhile (the controller's, for this very
			// change): the same document, which its event did not decode
			// again; this decode, with the changed reference, is its.
			src := *in.src
			src.rv = cur.rv
			in.rv, in.src, in.seen, in.secrets = cur.rv, &src, cur.seen, cur.secrets
		}
		if in.err != nil {
			failed = append(failed, registry.Change{Key: k, Err: in.err, Seq: in.rv, Attrs: []any{"resource_version", in.rv}})
		}
		s.setRefDeps(k, in)
		s.instances[k] = in
		affected[k] = true
		for _, a := range s.claims.SetSpec(k, in.addresses()) {
			affected[a] = true
		}
	}
	s.apply(failed, append(slices.Collect(maps.Keys(affected)), s.follow()...))
}

// setRefDeps records the objects key's version in refers to (nil in:
// none any more). Called with s.mu held.
func (s *Store) setRefDeps(key string, in *instance) {
	var refs []string
	if in != nil {
		refs = slices.Collect(maps.Keys(in.refs))
	}
	s.refDeps.Set(key, refs...)
}
