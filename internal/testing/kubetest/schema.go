package kubetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/vminit/vminit/internal/lib/jsonfields"
)

// CRD returns the manifest of a namespaced CustomResourceDefinition for
// the Go type of a custom resource (a struct with TypeMeta, ObjectMeta and
// spec, maybe status), served and stored at version, for CreateCRDs. Its
// openAPIV3Schema is a structural schema derived from the type's json
// fields, as the platforms' generators (openapi-gen for KubeVirt,
// controller-gen for Cluster API) derive theirs, without their
// descriptions and value constraints: so the API server prunes, accepts
// and refuses fields as the platform's own CRD does. As in those CRDs, an
// ObjectMeta below the root (a template's metadata) keeps unknown fields
// (x-kubernetes-preserve-unknown-fields), and quantities are int-or-string.
func CRD(group, version, kind, plural string, obj any) []byte {
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	props := map[string]any{
		"apiVersion": map[string]any{"type": "string"},
		"kind":       map[string]any{"type": "string"},
		"metadata":   map[string]any{"type": "object"},
	}
	for name, ft := range fields(t) {
		if name == "spec" || name == "status" {
			props[name] = schemaOf(ft, map[reflect.Type]bool{})
		}
	}
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"kind": kind, "plural": plural, "singular": strings.ToLower(kind), "listKind": kind + "List"},
			"versions": []any{map[string]any{
				"name": version, "served": true, "storage": true,
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": props}},
				"subresources": map[string]any{"status": map[string]any{}},
			}},
		},
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		panic(fmt.Sprintf("kubetest: CRD for %s: %v", kind, err))
	}
	return out
}

var (
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
	preserved      = map[reflect.Type]bool{
		reflect.TypeFor[runtime.RawExtension](): true,
		reflect.TypeFor[json.RawMessage]():      true,
	}
	intOrString = map[reflect.Type]bool{reflect.TypeFor[resource.Quantity](): true, reflect.TypeFor[intstr.IntOrString](): true}
	stringTypes = map[reflect.Type]string{
		reflect.TypeFor[metav1.Time]():      "date-time",
		reflect.TypeFor[metav1.MicroTime](): "date-time",
		reflect.TypeFor[metav1.Duration]():  "",
	}
)

// schemaOf is the structural schema of values of type t. seen holds the
// types being walked: a recursive type keeps unknown fields where it
// recurs, as structural schemas cannot recurse.
func schemaOf(t reflect.Type, seen map[reflect.Type]bool) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	keep := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	switch {
	case t == objectMetaType || preserved[t]:
		return keep
	case intOrString[t]:
		return map[string]any{"x-kubernetes-int-or-string": true}
	}
	if format, ok := stringTypes[t]; ok {
		s := map[string]any{"type": "string"}
		if format != "" {
			s["format"] = format
		}
		return s
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), seen)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), seen)}
	case reflect.Struct:
		if seen[t] {
			return keep
		}
		seen[t] = true
		defer delete(seen, t)
		props := map[string]any{}
		for name, ft := range fields(t) {
			props[name] = schemaOf(ft, seen)
		}
		return map[string]any{"type": "object", "properties": props}
	}
	// Interfaces and anything else: whatever the value is.
	return map[string]any{"x-kubernetes-preserve-unknown-fields": true}
}

func fields(t reflect.Type) map[string]reflect.Type {
	f, _ := jsonfields.Of(t)
	return f
}
