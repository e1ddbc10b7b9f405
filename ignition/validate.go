package ignition

import (
	"reflect"
	"strings"
	"sync"

	"github.com/coreos/ignition/v2/config/validate"
	"github.com/coreos/vcontext/path"
	"github.com/coreos/vcontext/report"
	vvalidate "github.com/coreos/vcontext/validate"
)

// validateStruct gives the entries of Ignition's
// validate.ValidateWithContext(cfg, nil), in the order of one vcontext
// walk that runs both of its validators at each node: every rule is
// Ignition's (each type's own Validate method and Ignition's duplicate
// check), called on the same values with the same paths. Only the walk
// that finds those values is ours: vcontext's works out each struct's
// fields, their JSON names and their paths again at every node (some 40 %
// of a typical render's time, and most of its allocations), where this
// one learns them once per type and skips what holds nothing to validate.
// TestValidateStructIsIgnitions and FuzzValidateStruct hold it to
// vcontext's walk and to Ignition's report.
func validateStruct(cfg any) report.Report {
	v := reflect.ValueOf(cfg)
	w := walkerOf(v.Type())
	if !w.exact {
		return vcontextValidate(cfg)
	}
	// An addressable copy, so that the validators are reached through
	// pointers instead of a boxed copy of each value.
	root := reflect.New(v.Type()).Elem()
	root.Set(v)
	var wk walk
	wk.path = make([]any, 0, 16)
	wk.node(w, root)
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
	// quiet, when set, tells from a value that its Validate would report
	// nothing, without running it (see quietIf).
	quiet func(v reflect.Value) bool
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
	w.quiet = quietIf[t]
	switch t.Kind() {
	case reflect.Struct:
		fs := flatten(t)
		w.exact = !fs.dynamic
		for _, f := range fs.fields {
			if f.typ.Kind() == reflect.Slice {
				w.lists = append(w.lists, f.index)
			}
			fw := buildWalker(f.typ, seen)
			w.exact = w.exact && fw.exact
			if fw.busy {
				w.fields = append(w.fields, walkField{index: f.index, name: f.name, w: fw})
			}
		}
	case reflect.Pointer, reflect.Slice:
		w.elem = buildWalker(t.Elem(), seen)
		w.exact = w.exact && w.elem.exact
	case reflect.Interface, reflect.Map, reflect.Array, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		w.exact = false
	}
	w.busy = w.validates || len(w.lists) > 0 || len(w.fields) > 0 || w.elem != nil && w.elem.busy || !w.exact
	return w
}

// flatField is a struct field as vcontext's GetFields sees it, the fields
// of embedded structs in their place, with the name FieldName gives it
// (its JSON tag up to the comma).
type flatField struct {
	index []int
	name  string
	typ   reflect.Type
}

// flatStruct is a struct type's fields; dynamic is true when it embeds
// something other than a struct, whose fields GetFields finds only in a
// value.
type flatStruct struct {
	fields  []flatField
	dynamic bool
}

var flatStructs sync.Map // reflect.Type -> flatStruct

func flatten(t reflect.Type) flatStruct {
	if fs, ok := flatStructs.Load(t); ok {
		return fs.(flatStruct)
	}
	var fs flatStruct
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			inner := flatten(f.Type)
			for _, g := range inner.fields {
				g.index = append([]int{i}, g.index...)
				fs.fields = append(fs.fields, g)
			}
			fs.dynamic = fs.dynamic || inner.dynamic
		case f.Anonymous:
			fs.dynamic = true
		default:
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fs.fields = append(fs.fields, flatField{index: []int{i}, name: name, typ: f.Type})
		}
	}
	flatStructs.Store(t, fs)
	return fs
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
	if w.validates && (w.quiet == nil || !w.quiet(v)) {
		// Validate has a value receiver (DefaultValidator calls only
		// those): called through the pointer, it gets a copy of *v.
		wk.r.Merge(v.Addr().Interface().(interface {
			Validate(path.ContextPath) report.Report
		}).Validate(wk.ctx()))
	}
	switch w.kind {
	case reflect.Struct:
		n := 0
		for _, idx := range w.lists {
			n += v.FieldByIndex(idx).Len()
		}
		if n >= 2 && !distinctKeys(w, v, n) {
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
