package spec

import (
	"reflect"

	"gopkg.in/yaml.v3"
)

// fastDecode decodes a node tree into v (addressable) the way walkKnown and
// yaml.v3's Node.Decode together would, for documents that have no problem
// to report. It returns false as soon as anything would need a message (an
// unknown or repeated key, a type mismatch, a value yaml.v3 would silently
// drop) or is unusual (tags, anchors), and the caller then takes the
// careful path, which reports it. The caller must decode into a zero v.
//
// It exists for the same reason as fastParse: yaml.v3's reflection decoder
// and the position bookkeeping were a third of a spec's load time.
// Strings, structs, pointers, slices, string-keyed maps and argv Commands
// are decoded here; other leaves (bools, numbers, Mode, shell Commands,
// metaData's free-form values) are handed to yaml.v3 itself, one node at a
// time, so their rules stay yaml.v3's. FuzzFastDecode compares the two
// paths on every input.
func fastDecode(n *yaml.Node, v reflect.Value) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" || n.Style&yaml.TaggedStyle != 0 {
		return false
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return true // yaml.v3 leaves (or sets) the zero value
	}
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		v.Set(reflect.New(t.Elem()))
		return fastDecode(n, v.Elem())
	}
	if t == commandType && n.Kind == yaml.SequenceNode {
		// Command.UnmarshalYAML hands an argv to yaml.v3's reflection,
		// which was a quarter of this function's time.
		return fastDecode(n, reflect.ValueOf(&v.Addr().Interface().(*Command).Argv).Elem())
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n) == nil
	}
	switch t.Kind() {
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!binary" {
			return false
		}
		v.SetString(n.Value)
		return true
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return false
		}
		fields := yamlFields(t)
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag != "!!str" || givenBefore(n, i) {
				return false
			}
			f, ok := fields[k.Value]
			if !ok || !fastDecode(n.Content[i+1], v.FieldByIndex(f.index)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return false
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, e := range n.Content {
			// yaml.v3 drops a null element without a word: let it.
			if e.Kind == yaml.ScalarNode && e.Tag == "!!null" || !fastDecode(e, s.Index(i)) {
				return false
			}
		}
		v.Set(s)
		return true
	case reflect.Map:
		if n.Kind != yaml.MappingNode || t.Key().Kind() != reflect.String || t.Elem().Kind() == reflect.Interface {
			break
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag != "!!str" || givenBefore(n, i) {
				return false
			}
			e := reflect.New(t.Elem()).Elem()
			if !fastDecode(n.Content[i+1], e) {
				return false
			}
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), e)
		}
		v.Set(m)
		return true
	}
	// Bools, numbers and free-form values: yaml.v3's own rules.
	return n.Decode(v.Addr().Interface()) == nil
}

var commandType = reflect.TypeFor[Command]()
