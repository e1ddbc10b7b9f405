package platform

import (
	"context"

	"github.com/vminit/vminit/spec"
)

// SpecRefs is r confined to namespace, as the spec.Refs through which a
// vminit spec's secretKeyRef and configMapKeyRef are read: a reference
// names no namespace, so the one given here (an Instance's own, or the
// one a command was given) is the only one ever read. The errors are
// Fetch's, matching ErrNotFound and ErrMissingKey.
func SpecRefs(ctx context.Context, r Resolver, namespace string) spec.Refs {
	return specRefs{ctx: ctx, r: r, namespace: namespace}
}

type specRefs struct {
	ctx       context.Context
	r         Resolver
	namespace string
}

func (s specRefs) Key(kind, name, key string) ([]byte, error) {
	k := KindSecret
	if kind == spec.RefConfigMap {
		k = KindConfigMap
	}
	return FetchKey(s.ctx, s.r, k, s.namespace, name, key)
}
