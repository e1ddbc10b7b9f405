package platform

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/vminit/vminit/internal/lib/jsonfields"
)

// unknownFields finds the members of a JSON document that the Go type t
// has no field for, walking the type by its json tags. Strict decoding
// alone misses them below a type whose UnmarshalJSON decodes leniently
// with encoding/json (kubevirt.io/api's VirtualMachineInstanceSpec does),
// where a misspelled or miscased field would vanish.
func unknownFields(doc []byte, t reflect.Type) []string {
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return nil
	}
	var out []string
	walkFields(v, t, "", &out, 0)
	return out
}

func walkFields(v any, t reflect.Type, path string, out *[]string, depth int) {
	if depth > 100 {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Map:
			for k, x := range val {
				walkFields(x, t.Elem(), fmt.Sprintf("%s[%q]", path, k), out, depth+1)
			}
		case reflect.Struct:
			fields, tagged := jsonfields.Of(t)
			if !tagged {
				return // a type with its own encoding
			}
			for k, x := range val {
				ft, ok := fields[k]
				if !ok {
					*out = append(*out, join(path, k))
					continue
				}
				walkFields(x, ft, join(path, k), out, depth+1)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, x := range val {
				walkFields(x, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out, depth+1)
			}
		}
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
