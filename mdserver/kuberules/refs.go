package kuberules

import (
	"context"
	"strings"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// Refs reads an Instance's Secret and ConfigMap references in the
// Instance's own namespace (platform.SpecRefs: a reference names none, so
// no other namespace is ever read), and notes each object it asked for,
// found or not (RefKey), so that a store or the controller loads the
// Instance again when one of them is created, changed or deleted.
type Refs struct {
	spec.Refs
	namespace string
	deps      map[string]bool
}

// NewRefs returns the Refs of an Instance of namespace, reading through
// r (a cluster's platform/cluster.Resolver).
func NewRefs(ctx context.Context, r platform.Resolver, namespace string) *Refs {
	return &Refs{Refs: platform.SpecRefs(ctx, r, namespace), namespace: namespace, deps: map[string]bool{}}
}

// Key implements spec.Refs.
func (r *Refs) Key(kind, name, key string) ([]byte, error) {
	r.deps[RefKey(kind, r.namespace, name)] = true
	return r.Refs.Key(kind, name, key)
}

// Deps are the objects asked for, by RefKey.
func (r *Refs) Deps() map[string]bool { return r.deps }

// RefKey names a referenced object: KIND/NAMESPACE/NAME (spec.RefSecret
// or spec.RefConfigMap).
func RefKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// RefResources are the resources of the kinds a spec refers to.
var RefResources = map[string]string{spec.RefSecret: "secrets", spec.RefConfigMap: "configmaps"}

// ParseRefKey reads a RefKey back: ok is false for a key RefKey did not
// make.
func ParseRefKey(key string) (kind, ns, name string, ok bool) {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}
