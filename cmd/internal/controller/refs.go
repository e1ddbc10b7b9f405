package controller

import (
	"errors"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/vminit/vminit/mdserver/kuberules"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// missingRef reports whether a problem is a Secret or ConfigMap (or a key
// of one) that does not exist: the Valid condition's reason says so.
func missingRef(es spec.Errors) bool {
	for _, e := range es {
		if errors.Is(e.Cause, platform.ErrNotFound) || errors.Is(e.Cause, platform.ErrMissingKey) {
			return true
		}
	}
	return false
}

// refInformer watches the metadata of kind's objects (spec.RefSecret or
// spec.RefConfigMap) in ns, reloading the Instances that refer to one that
// changes; onChange, if not nil, is called too.
func (t *term) refInformer(ns, kind string, onChange func(obj any)) cache.SharedIndexInformer {
	gvr := corev1.SchemeGroupVersion.WithResource(kuberules.RefResources[kind])
	inf := metadatainformer.NewFilteredMetadataInformer(t.c.meta, gvr, ns, t.c.cfg.Resync, cache.Indexers{}, nil).Informer()
	inf.SetTransform(dropManagedFields)
	changed := func(obj any) {
		if onChange != nil {
			onChange(obj)
		}
		if m, ok := metaOf(obj); ok {
			t.referenceChanged(kuberules.RefKey(kind, m.GetNamespace(), m.GetName()))
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	})
	return inf
}

// referenceChanged loads again (and so renders again) every Instance that
// refers to the object ref, though its document is unchanged.
func (t *term) referenceChanged(ref string) {
	t.mu.Lock()
	keys := t.refDeps.Dependents(ref)
	for _, k := range keys {
		if l := t.loaded[k]; l != nil {
			stale := *l
			stale.doc = nil // load compares documents: this one must not match
			t.loaded[k] = &stale
		}
	}
	t.mu.Unlock()
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		if obj, ok := get(t.instances, ns, name); ok {
			t.instanceChanged(obj) // the Instance, and the VMs rendered from it
		}
	}
}

// setRefDeps records the objects Instance k's version l refers to (nil
// l: none any more). Called with t.mu held.
func (t *term) setRefDeps(k string, l *loaded) {
	var refs []string
	if l != nil {
		refs = slices.Collect(maps.Keys(l.refs))
	}
	t.refDeps.Set(k, refs...)
}
