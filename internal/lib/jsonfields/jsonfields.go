// Package jsonfields lists the JSON members of Go struct types as
// encoding/json (and the Kubernetes decoders built on it) see them: by
// json tag, with embedded and ",inline" structs flattened. It serves the
// code that walks a platform's API types by reflection: finding the
// fields a lenient decoder would drop, and deriving a CRD's schema.
package jsonfields

import (
	"reflect"
	"strings"
)

// Of maps the JSON member names of struct type t to their Go types. tagged
// is false when no field has a json tag: a type that encodes itself (a
// time, a quantity), whose Go fields say nothing of its JSON.
func Of(t reflect.Type) (fields map[string]reflect.Type, tagged bool) {
	fields = map[string]reflect.Type{}
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
				inner, _ := Of(ft)
				for k, v := range inner {
					fields[k] = v
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
		fields[name] = f.Type
	}
	return fields, tagged
}
