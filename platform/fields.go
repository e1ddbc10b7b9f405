package platform

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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
			fields := jsonFields(t)
			if fields == nil {
				return // no json-tagged fields: a type with its own encoding
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

// jsonFields maps a struct's JSON member names (inlined structs
// flattened) to their types; nil when none has a json tag.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	tagged := false
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if tag != "" {
			tagged = true
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if (f.Anonymous && name == "") || strings.Contains(opts, "inline") {
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				tagged = true
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	if !tagged {
		return nil
	}
	return out
}
