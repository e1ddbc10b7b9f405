// Package refs holds the Secrets and ConfigMaps that platform objects
// refer to when they are given as documents (beside the VM in a
// multi-document file, or in --objects files), and turns Kubernetes'
// Secret and ConfigMap types into the data a platform.Resolver returns.
//
// It is apart from package platform so that the platform core, and the
// readers of platforms that refer to no Secret (oVirt), do not link
// Kubernetes' core API types; platform/cluster reads the same objects from
// a live cluster.
package refs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// Objects is a platform.Resolver over Secrets and ConfigMaps given as
// documents: those beside the VM in a multi-document file, or in
// --objects files.
type Objects struct {
	secrets    map[[2]string]*corev1.Secret
	configMaps map[[2]string]*corev1.ConfigMap
	// Namespace is that of objects naming none (default
	// platform.DefaultNamespace).
	Namespace string
}

// Add decodes a Secret or ConfigMap document (strictly, naming fields) and
// holds it. A second object of the same kind, namespace and name is an
// error, as kubectl create would make it.
func (o *Objects) Add(doc *platform.Document) error {
	ns := platform.Options{Namespace: o.Namespace}.NamespaceOf(doc.Namespace)
	key := [2]string{ns, doc.Name}
	if doc.Name == "" {
		return spec.Errors{doc.Error("metadata.name", "required")}
	}
	switch doc.Kind {
	case "Secret":
		if es := notBase64(doc, "data", "stringData"); len(es) > 0 {
			return es
		}
		return add(&o.secrets, key, doc, platform.KindSecret)
	case "ConfigMap":
		if es := notBase64(doc, "binaryData", "data"); len(es) > 0 {
			return es
		}
		return add(&o.configMaps, key, doc, platform.KindConfigMap)
	}
	return spec.Errors{doc.Error("kind", fmt.Sprintf("%q: only Secrets and ConfigMaps can be referred to", doc.Kind))}
}

// notBase64 names each value of doc's field (a Secret's data, a
// ConfigMap's binaryData) that is not base64, which decoding would report
// once, without its key or line. text is the field that takes text.
func notBase64(doc *platform.Document, field, text string) spec.Errors {
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
			es = append(es, doc.Error(platform.FieldPath(field, k), fmt.Sprintf("%s %q: not base64 (%v): kubectl and the API server refuse the %s: %s holds base64; give text under %s",
				doc.Kind, doc.Name, err, doc.Kind, field, text)))
		}
	}
	return es
}

// add decodes doc into a new T held in *m under key, refusing a second.
func add[T any](m *map[[2]string]*T, key [2]string, doc *platform.Document, kind string) error {
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

// Data implements platform.Resolver.
func (o *Objects) Data(_ context.Context, kind, ns, name string) (map[string][]byte, error) {
	key := [2]string{ns, name}
	switch kind {
	case platform.KindSecret:
		if s, ok := o.secrets[key]; ok {
			return SecretData(s), nil
		}
	case platform.KindConfigMap:
		if cm, ok := o.configMaps[key]; ok {
			return ConfigMapData(cm), nil
		}
	}
	return nil, platform.ErrNotFound
}

// SecretData is a Secret's entries as the API server merges them:
// stringData over data.
func SecretData(s *corev1.Secret) map[string][]byte { return merged(s.Data, s.StringData) }

// ConfigMapData is a ConfigMap's entries: data (text) over binaryData.
func ConfigMapData(cm *corev1.ConfigMap) map[string][]byte {
	return merged(cm.BinaryData, cm.Data)
}

// merged is a copy of bin with text's entries added (replacing bin's).
func merged(bin map[string][]byte, text map[string]string) map[string][]byte {
	out := maps.Clone(bin)
	if out == nil {
		out = map[string][]byte{}
	}
	for k, v := range text {
		out[k] = []byte(v)
	}
	return out
}
