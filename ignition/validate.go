package ignition

import (
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/coreos/ignition/v2/config/validate"
	"github.com/coreos/vcontext/path"
	"github.com/coreos/vcontext/report"
	vvalidate "github.com/coreos/vcontext/validate"
)

// validateStruct gives the report of Ignition's
// validate.ValidateWithContext(cfg, nil), entry for entry and in the same
// order as vcontext's walk gives them: every rule is Ignition's (each
// type's own Validate method and Ignition's duplicate check), called on
// the same values with the same paths. Only the walk that finds those
// values is ours: vcontext's walk works out each struct's fields, their
// JSON names and their paths again at every node, which is most of a
// render's time and allocations, where this one learns them once per
// type, skips what holds nothing to validate, and runs both validators in
// one pass. TestValidateStructIsIgnitions holds it to Ignition's report.
func validateStruct(cfg any) report.Report {
	v := reflect.ValueOf(cfg)
	w := walkerOf(v.Type())
	if !w.exact {
		return vcontextValidate(cfg)
	}
	var wk walk
	wk.path = make([]any, 0, 16)
	wk.node(w, v)
	return wk.r
}

// vcontextValidate is the same report through vcontext's own walk, for
// types the cached walk does not know (Ignition's config types hold only
// structs, pointers, slices and primitives).
func vcontextValidate(cfg any) report.Report {
	return vvalidate.ValidateCustom(cfg, "json", func(v reflect.Value, c path.ContextPath) report.Report {
		r := vvalidate.DefaultValidator(v, c)
		r.Merge(validate.ValidateDups(v, c))
		return r
	})
}

// walker is what the walk needs to know about a type.
type walker struct {
	kind reflect.Kind
	// validates: the type has a Validate method on values, which
	// vcontext's DefaultValidator calls.
	validates bool
	// lists are the index paths of a struct's list fields, embedded
	// structs' included: Ignition's duplicate check looks at them, and can
	// find something only where they hold two entries or more between
	// them.
	lists [][]int
	// fields are a struct's fields as vcontext's GetFields flattens them,
	// with the path element FieldName gives each, leaving out those
	// whose type holds nothing to validate.
	fields []walkField
	// elem is a pointer's or a slice's element.
	elem *walker
	// busy is true when something at or below the type validates.
	busy bool
	// exact is false when the type holds kinds the walk leaves to
	// vcontext (interfaces, maps, embedded pointers).
	exact bool
}

type walkField struct {
	index []int
	name  any // a string, boxed once
	w     *walker
}

var walkers sync.Map // reflect.Type -> *walker

func walkerOf(t reflect.Type) *walker {
	if w, ok := walkers.Load(t); ok {
		return w.(*walker)
	}
	w := buildWalker(t, map[reflect.Type]*walker{})
	walkers.Store(t, w)
	return w
}

var validatorType = reflect.TypeFor[interface {
	Validate(path.ContextPath) report.Report
}]()

// buildWalker describes t; seen breaks cycles (a recursive type is taken
// as busy).
func buildWalker(t reflect.Type, seen map[reflect.Type]*walker) *walker {
	if w, ok := seen[t]; ok {
		return w
	}
	w := &walker{kind: t.Kind(), exact: true, busy: true}
	seen[t] = w
	w.validates = t.Kind() != reflect.Pointer && t.Implements(validatorType)
	switch t.Kind() {
	case reflect.Struct:
		w.lists = listFields(t, nil, w)
		w.fields = structFields(t, nil, seen, w)
	case reflect.Pointer, reflect.Slice:
		w.elem = buildWalker(t.Elem(), seen)
		w.exact = w.exact && w.elem.exact
	case reflect.Interface, reflect.Map, reflect.Array, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		w.exact = false
	}
	w.busy = w.validates || len(w.lists) > 0 || len(w.fields) > 0 || w.elem != nil && w.elem.busy || !w.exact
	return w
}

func listFields(t reflect.Type, prefix []int, w *walker) (lists [][]int) {
	for i := range t.NumField() {
		f := t.Field(i)
		idx := append(slices.Clone(prefix), i)
		switch {
		case f.Type.Kind() == reflect.Slice:
			lists = append(lists, idx)
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			lists = append(lists, listFields(f.Type, idx, w)...)
		case f.Anonymous:
			w.exact = false
		}
	}
	return lists
}

func structFields(t reflect.Type, prefix []int, seen map[reflect.Type]*walker, w *walker) (fields []walkField) {
	for i := range t.NumField() {
		f := t.Field(i)
		idx := append(slices.Clone(prefix), i)
		if f.Anonymous {
			if f.Type.Kind() == reflect.Struct {
				fields = append(fields, structFields(f.Type, idx, seen, w)...)
			}
			continue // anything else is not exact (listFields)
		}
		fw := buildWalker(f.Type, seen)
		w.exact = w.exact && fw.exact
		if fw.busy {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields = append(fields, walkField{index: idx, name: name, w: fw})
		}
	}
	return fields
}

type walk struct {
	path []any
	r    report.Report
}

func (wk *walk) ctx() path.ContextPath {
	return path.ContextPath{Path: wk.path, Tag: "json"}
}

// node is vcontext's validate: the validators on v, then its fields,
// elements or pointee.
func (wk *walk) node(w *walker, v reflect.Value) {
	if w.validates {
		wk.r.Merge(v.Interface().(interface {
			Validate(path.ContextPath) report.Report
		}).Validate(wk.ctx()))
	}
	switch w.kind {
	case reflect.Struct:
		n := 0
		for _, idx := range w.lists {
			n += v.FieldByIndex(idx).Len()
		}
		if n >= 2 {
			wk.r.Merge(validate.ValidateDups(v, wk.ctx()))
		}
		for _, f := range w.fields {
			wk.path = append(wk.path, f.name)
			wk.node(f.w, v.FieldByIndex(f.index))
			wk.path = wk.path[:len(wk.path)-1]
		}
	case reflect.Slice:
		if !w.elem.busy {
			return
		}
		for i := range v.Len() {
			wk.path = append(wk.path, i)
			wk.node(w.elem, v.Index(i))
			wk.path = wk.path[:len(wk.path)-1]
		}
	case reflect.Pointer:
		if !v.IsNil() && w.elem.busy {
			wk.node(w.elem, v.Elem())
		}
	}
}
