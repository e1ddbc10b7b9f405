package platform

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/vminit/vminit/spec"
)

// Objects is a Resolver over Secrets and ConfigMaps given as documents:
// those beside the VM in a multi-document file, or in --objects files.
type Objects struct {
	secrets    map[[2]string]*corev1.Secret
	configMaps map[[2]string]*corev1.ConfigMap
	// Namespace is that of objects naming none (default DefaultNamespace).
	Namespace string
}

// IsReferenced reports whether doc is a kind Objects holds.
func IsReferenced(doc *Document) bool {
	return doc.APIVersion == "v1" && (doc.Kind == "Secret" || doc.Kind == "ConfigMap")
}

// Add decodes a Secret or ConfigMap document (strictly, naming fields) and
// holds it. A second object of the same kind, namespace and name is an
// error, as kubectl create would make it.
func (o *Objects) Add(doc *Document) error {
	ns := Options{Namespace: o.Namespace}.NamespaceOf(doc.Namespace)
	key := [2]string{ns, doc.Name}
	if doc.Name == "" {
		return spec.Errors{doc.Error("metadata.name", "required")}
	}
	switch doc.Kind {
	case "Secret":
		if es := notBase64(doc, "data", "stringData"); len(es) > 0 {
			return es
		}
		return add(&o.secrets, key, doc, "secret")
	case "ConfigMap":
		if es := notBase64(doc, "binaryData", "data"); len(es) > 0 {
			return es
		}
		return add(&o.configMaps, key, doc, "configmap")
	}
	return spec.Errors{doc.Error("kind", fmt.Sprintf("%q: only Secrets and ConfigMaps can be referred to", doc.Kind))}
}

// notBase64 names each value of doc's field (a Secret's data, a
// ConfigMap's binaryData) that is not base64, which decoding would report
// once, without its key or line. text is the field that takes text.
func notBase64(doc *Document, field, text string) spec.Errors {
	var raw map[string]json.RawMessage
	var values map[string]any
	if json.Unmarshal(doc.JSON, &raw) != nil || json.Unmarshal(raw[field], &values) != nil {
		return nil // not this problem: decoding reports it
	}
	var es spec.Errors
	for _, k := range slices.Sorted(maps.Keys(values)) {
		v, ok := values[k].(string)
		if !ok {
			continue
		}
		if _, err := base64.StdEncoding.DecodeString(v); err != nil {
			es = append(es, doc.Error(fieldPath(field, k), fmt.Sprintf("%s %q: not base64 (%v): kubectl and the API server refuse the %s: %s holds base64; give text under %s",
				doc.Kind, doc.Name, err, doc.Kind, field, text)))
		}
	}
	return es
}

// add decodes doc into a new T held in *m under key, refusing a second.
func add[T any](m *map[[2]string]*T, key [2]string, doc *Document, kind string) error {
	var v T
	if err := doc.Decode(&v); err != nil {
		return err
	}
	if *m == nil {
		*m = map[[2]string]*T{}
	}
	if _, dup := (*m)[key]; dup {
		return spec.Errors{doc.Error("metadata.name", fmt.Sprintf("%s %q in namespace %q is given twice", kind, key[1], key[0]))}
	}
	(*m)[key] = &v
	return nil
}

// Secret implements Resolver.
func (o *Objects) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if s, ok := o.secrets[[2]string{ns, name}]; ok {
		return s, nil
	}
	return nil, ErrNotFound
}

// ConfigMap implements Resolver.
func (o *Objects) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := o.configMaps[[2]string{ns, name}]; ok {
		return cm, nil
	}
	return nil, ErrNotFound
}
