package ignition

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	cleanjson "github.com/clarketm/json"
	"github.com/coreos/go-semver/semver"
)

// decode reads JSON keeping numbers exact (a uid or a size must not pass
// through a float64).
func decode(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// encode writes v as compact JSON, keys sorted (encoding/json sorts map
// keys), without escaping <, > and & that unit files and scripts are full
// of.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// marshalClean writes an Ignition config the way Butane does: fields in
// the order of Ignition's schema, and unset optional fields (empty
// structs such as "verification":{}, empty lists, nil pointers) left out,
// where encoding/json would write them. Ignition reads an absent field and
// an empty one alike, so this changes nothing but the noise, and the same
// config always gives the same bytes. <, > and &, which unit files and
// scripts are full of, are not escaped.
func marshalClean(v any) ([]byte, error) {
	var b bytes.Buffer
	e := cleanjson.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// canonical drops what encoding/json writes for Ignition's unset optional
// fields (null, "verification":{}, "user":{}, empty lists) and sorts keys:
// the form in which configs are compared and merged configs restamped.
func canonical(raw []byte) ([]byte, error) {
	_, out, err := canonicalTree(raw)
	return out, err
}

// canonicalTree is canonical, with the decoded tree it encodes.
func canonicalTree(raw []byte) (any, []byte, error) {
	v, err := decode(raw)
	if err != nil {
		return nil, nil, err
	}
	v, _ = prune(v)
	out, err := encode(v)
	return v, out, err
}

func prune(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if pe, keep := prune(e); keep {
				t[k] = pe
			} else {
				delete(t, k)
			}
		}
		return t, len(t) > 0
	case []any:
		out := t[:0]
		for _, e := range t {
			if pe, keep := prune(e); keep {
				out = append(out, pe)
			}
		}
		return out, len(out) > 0
	case nil:
		return nil, false
	}
	return v, true
}

// restamp returns a canonical config with its ignition.version set to v.
func restamp(raw []byte, v semver.Version) ([]byte, error) {
	d, err := decode(raw)
	if err != nil {
		return nil, err
	}
	m, ok := d.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	ig, _ := m["ignition"].(map[string]any)
	if ig == nil {
		ig = map[string]any{}
		m["ignition"] = ig
	}
	ig["version"] = v.String()
	return encode(m)
}

// diff compares two JSON documents and returns the path of the first
// difference, in Ignition's $.a.0.b form.
func diff(a, b []byte) (string, bool) {
	x, err1 := decode(a)
	y, err2 := decode(b)
	if err1 != nil || err2 != nil {
		return "$", false
	}
	return diffValue("$", x, y)
}

func diffValue(p string, x, y any) (string, bool) {
	switch xt := x.(type) {
	case map[string]any:
		yt, ok := y.(map[string]any)
		if !ok {
			return p, false
		}
		keys := slices.Sorted(maps.Keys(xt))
		for k := range yt {
			if _, in := xt[k]; !in {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			if q, same := diffValue(p+"."+k, xt[k], yt[k]); !same {
				return q, false
			}
		}
		return "", true
	case []any:
		yt, ok := y.([]any)
		if !ok {
			return p, false
		}
		for i := range max(len(xt), len(yt)) {
			if i >= len(xt) || i >= len(yt) {
				return fmt.Sprintf("%s.%d", p, i), false
			}
			if q, same := diffValue(fmt.Sprintf("%s.%d", p, i), xt[i], yt[i]); !same {
				return q, false
			}
		}
		return "", true
	}
	if x != y {
		return p, false
	}
	return "", true
}
