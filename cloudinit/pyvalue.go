package cloudinit

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/spec"
)

// This file turns a parsed YAML document into the shape PyYAML's SafeLoader
// gives cloud-init: aliases expanded, "<<" merge keys flattened, duplicate
// keys collapsed (last value, first position) and every node classified as
// the Python type cloud-init's mergers dispatch on. Scalars keep their
// original text and style, so the document written back reads the same.

// pyKind is the Python type of a loaded YAML value, as far as cloud-init's
// mergers care.
type pyKind int

const (
	pyOther pyKind = iota // int, float, bool, datetime, bytes
	pyNull
	pyStr
	pyList
	pyDict
)

func (k pyKind) String() string {
	return [...]string{"a scalar", "null", "a string", "a list", "a mapping"}[k]
}

// kindOf classifies a normalized node (see normalize).
func kindOf(n *yaml.Node) pyKind {
	switch n.Kind {
	case yaml.MappingNode:
		return pyDict
	case yaml.SequenceNode:
		return pyList
	}
	switch t, _ := yaml11.Tag(n); t {
	case yaml11.Str:
		return pyStr
	case yaml11.Null:
		return pyNull
	}
	return pyOther
}

type normalizer struct {
	active map[*yaml.Node]bool // aliases being expanded, to refuse cycles
}

// LoadCloudConfig reads a #cloud-config document someone wrote as
// cloud-init's util.load_yaml does, into the tree its module keys mean:
// aliases expanded, "<<" merge keys flattened, a repeated key's last value
// kept, each scalar styled so that the tree written back out reads the
// same; its expansion and its nodes bounded (spec.FieldYAML). It returns
// nil for an empty or null document, which cloud-init skips; any other
// document that is not a mapping is an error. Errors carry the document's
// line.
func LoadCloudConfig(data []byte) (*yaml.Node, error) { return load(data, spec.FieldYAML) }

// normalize parses one #cloud-config document the way cloud-init's
// util.load_yaml does. It returns nil for an empty document (no content or
// null), which cloud-init skips as "empty cloud config". The document may
// be vminit's own (a large spec's generated user-data): its expansion is
// bounded, its nodes are left to the spec's list limits.
func normalize(data []byte) (*yaml.Node, error) {
	return load(data, yamlbound.Limits{Bytes: spec.MaxSpecSize})
}

// load is normalize within l.
func load(data []byte, l yamlbound.Limits) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("not valid YAML: %v", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, fmt.Errorf("holds more than one YAML document; cloud-init reads exactly one")
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	// PyYAML shares aliased objects, but a merged document written back
	// out repeats them: the expansion is bounded as a spec's text is.
	if err := yamlbound.Check(&doc, l); err != nil {
		return nil, err
	}
	nz := &normalizer{active: map[*yaml.Node]bool{}}
	root, err := nz.node(doc.Content[0])
	if err != nil {
		return nil, err
	}
	switch kindOf(root) {
	case pyNull:
		return nil, nil
	case pyDict:
		return root, nil
	}
	return nil, fmt.Errorf("must be a mapping of module keys, not %s", kindOf(root))
}

// node returns n as PyYAML's SafeLoader builds it, written back so that
// it means the same: aliases expanded, merge keys flattened, duplicate
// keys resolved as a Python dict does, and scalars styled or tagged so
// that their value survives; a node cloud-init's loader cannot construct
// is an error naming its line.
func (nz *normalizer) node(n *yaml.Node) (*yaml.Node, error) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil, fmt.Errorf("line %d: alias to an unknown anchor", n.Line)
		}
		if nz.active[n.Alias] {
			return nil, fmt.Errorf("line %d: recursive alias", n.Line)
		}
		nz.active[n.Alias] = true
		defer delete(nz.active, n.Alias)
		return nz.node(n.Alias)
	}
	tag, err := yaml11.Tag(n)
	if err != nil {
		return nil, err
	}
	switch tag {
	case yaml11.Binary:
		if !pyBase64(n.Value) {
			return nil, fmt.Errorf("line %d: !!binary value is not valid base64", n.Line)
		}
	case yaml11.Value, yaml11.Indicator, yaml11.MergeKey:
		return nil, fmt.Errorf("line %d: cloud-init's YAML loader cannot construct the plain value %q; quote it", n.Line, n.Value)
	case yaml11.Set, yaml11.Omap, yaml11.Pairs:
		return nil, fmt.Errorf("line %d: tag %s is not supported here", n.Line, tag)
	}
	// Anchors and comments are dropped: the anchors are expanded, and the
	// comments would float to odd places once keys move.
	out := &yaml.Node{Kind: n.Kind, Style: n.Style, Tag: n.Tag, Value: n.Value, Line: n.Line, Column: n.Column}
	switch n.Kind {
	case yaml.ScalarNode:
		scalarStyle(out, n, tag)
		return out, nil
	case yaml.SequenceNode:
		for _, c := range n.Content {
			cn, err := nz.node(c)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, cn)
		}
		return out, nil
	case yaml.MappingNode:
		if err := nz.mapping(out, n); err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// scalarStyle sets the style and tag of out, the copy of scalar n (whose
// resolved tag is tag), that keep its value when written back.
func scalarStyle(out, n *yaml.Node, tag string) {
	if n.Style&yaml.FoldedStyle != 0 {
		// The value is already unfolded; written back as a literal
		// block (or quoted) it needs no folding rules to survive.
		out.Style = out.Style&^yaml.FoldedStyle | yaml.LiteralStyle
	}
	if yaml11.LiteralUnsafe(n.Value) {
		out.Style = out.Style&yaml.TaggedStyle | yaml.DoubleQuotedStyle
		if n.Style&yaml.TaggedStyle == 0 && tag == yaml11.Str {
			out.Tag = yaml11.Str
		}
	}
	if n.Style&yaml.TaggedStyle != 0 || tag == yaml11.Str {
		return
	}
	switch {
	case tag == yaml11.Null && n.Value == "":
		// An empty plain scalar cannot always be written back
		// plain (as a key it becomes ''), so spell the null.
		out.Value = "null"
	case strings.IndexFunc(n.Value, notPlainSafe) >= 0:
		// A plain 1:20 (sexagesimal 80) or a spaced timestamp
		// may not stay plain when written back: yaml.v3's
		// emitter quotes a scalar with ':' inside a flow
		// sequence, which would turn PyYAML's number into a
		// string. An explicit tag keeps the meaning whatever
		// the quoting.
		out.Tag, out.Style = tag, out.Style|yaml.TaggedStyle
	}
}

// mapping fills out with the pairs of mapping n, merge keys flattened and
// a duplicate key's value taking the first key's place, as in a Python
// dict.
func (nz *normalizer) mapping(out, n *yaml.Node) error {
	pairs, err := nz.flatten(n, 0)
	if err != nil {
		return err
	}
	index := map[string]int{}
	for _, p := range pairs {
		if t, _ := yaml11.Tag(p[0]); t == yaml11.Value {
			// SafeConstructor's flatten_mapping makes a plain "="
			// key a string; only as a value is it unconstructible.
			p[0] = &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Tag: yaml11.Str, Value: p[0].Value, Line: p[0].Line, Column: p[0].Column}
		}
		k, err := nz.node(p[0])
		if err != nil {
			return err
		}
		v, err := nz.node(p[1])
		if err != nil {
			return err
		}
		key, err := pyKey(k)
		if err != nil {
			return err
		}
		if i, dup := index[key]; dup {
			out.Content[i+1] = v // a Python dict keeps the first key's position
			continue
		}
		index[key] = len(out.Content)
		out.Content = append(out.Content, k, v)
	}
	return nil
}

// flatten returns a mapping's key/value pairs with "<<" merge keys replaced
// by the pairs they bring in, in the order PyYAML's
// SafeConstructor.flatten_mapping produces: merged pairs first (for a list
// of mappings, the last mapping's first), then the mapping's own pairs.
// Later pairs override earlier ones when the dict is built.
func (nz *normalizer) flatten(n *yaml.Node, depth int) ([][2]*yaml.Node, error) {
	if depth > 100 {
		return nil, fmt.Errorf("line %d: merge keys nest too deeply", n.Line)
	}
	var merged, own [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		for k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if t, _ := yaml11.Tag(k); t != yaml11.MergeKey || k.Kind != yaml.ScalarNode {
			own = append(own, [2]*yaml.Node{n.Content[i], v})
			continue
		}
		for v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		switch v.Kind {
		case yaml.MappingNode:
			sub, err := nz.flatten(v, depth+1)
			if err != nil {
				return nil, err
			}
			merged = append(merged, sub...)
		case yaml.SequenceNode:
			var subs [][][2]*yaml.Node
			for _, m := range v.Content {
				for m.Kind == yaml.AliasNode && m.Alias != nil {
					m = m.Alias
				}
				if m.Kind != yaml.MappingNode {
					return nil, fmt.Errorf("line %d: a merge key (<<) takes a mapping or a list of mappings", m.Line)
				}
				sub, err := nz.flatten(m, depth+1)
				if err != nil {
					return nil, err
				}
				subs = append(subs, sub)
			}
			for i := len(subs) - 1; i >= 0; i-- {
				merged = append(merged, subs[i]...)
			}
		default:
			return nil, fmt.Errorf("line %d: a merge key (<<) takes a mapping or a list of mappings", v.Line)
		}
	}
	return append(merged, own...), nil
}

// pyKey returns a string that is equal for two keys exactly when the Python
// values PyYAML builds from them are equal dict keys (True == 1 == 1.0).
func pyKey(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("line %d: a mapping key must be a scalar (cloud-init's YAML loader refuses unhashable keys)", n.Line)
	}
	t, err := yaml11.Tag(n)
	if err != nil {
		return "", err
	}
	switch t {
	case yaml11.Str:
		return "s" + n.Value, nil
	case yaml11.Null:
		return "n", nil
	case yaml11.Bool:
		if pyBool(n.Value) {
			return "i1", nil
		}
		return "i0", nil
	case yaml11.Int:
		if i, ok := pyInt(n.Value); ok {
			return "i" + i.String(), nil
		}
	case yaml11.Float:
		if f, ok := pyFloat(n.Value); ok {
			if f == math.Trunc(f) && !math.IsInf(f, 0) {
				bf := new(big.Float).SetFloat64(f)
				i, _ := bf.Int(nil)
				return "i" + i.String(), nil
			}
			if math.IsNaN(f) {
				// NaN never equals another NaN: every one is its own key.
				return fmt.Sprintf("nan%p", n), nil
			}
			return "f" + strconv.FormatFloat(f, 'g', -1, 64), nil
		}
	}
	return t + ":" + n.Value, nil
}

func pyBool(s string) bool {
	switch strings.ToLower(s) {
	case "yes", "true", "on":
		return true
	}
	return false
}

// pyInt follows SafeConstructor.construct_yaml_int.
func pyInt(s string) (*big.Int, bool) {
	v := strings.ReplaceAll(s, "_", "")
	sign := 1
	if v != "" && (v[0] == '-' || v[0] == '+') {
		if v[0] == '-' {
			sign = -1
		}
		v = v[1:]
	}
	i := new(big.Int)
	var ok bool
	switch {
	case v == "0":
		ok = true
	case strings.HasPrefix(v, "0b"):
		_, ok = i.SetString(v[2:], 2)
	case strings.HasPrefix(v, "0x"):
		_, ok = i.SetString(v[2:], 16)
	case strings.HasPrefix(v, "0"):
		_, ok = i.SetString(v[1:], 8)
	case strings.Contains(v, ":"):
		ok = true
		for _, part := range strings.Split(v, ":") {
			d, err := strconv.Atoi(part)
			if err != nil {
				return nil, false
			}
			i.Mul(i, big.NewInt(60))
			i.Add(i, big.NewInt(int64(d)))
		}
	default:
		_, ok = i.SetString(v, 10)
	}
	if sign < 0 {
		i.Neg(i)
	}
	return i, ok
}

// pyFloat follows SafeConstructor.construct_yaml_float.
func pyFloat(s string) (float64, bool) {
	v := strings.ToLower(strings.ReplaceAll(s, "_", ""))
	sign := 1.0
	if v != "" && (v[0] == '-' || v[0] == '+') {
		if v[0] == '-' {
			sign = -1
		}
		v = v[1:]
	}
	switch {
	case v == ".inf":
		return sign * math.Inf(1), true
	case v == ".nan":
		return math.NaN(), true
	case strings.Contains(v, ":"):
		f := 0.0
		for _, part := range strings.Split(v, ":") {
			d, err := strconv.ParseFloat(part, 64)
			if err != nil {
				return 0, false
			}
			f = f*60 + d
		}
		return sign * f, true
	}
	f, err := strconv.ParseFloat(v, 64)
	return sign * f, err == nil
}

// notPlainSafe reports characters that may make the emitter quote a
// scalar; non-string scalars made only of the others stay plain.
func notPlainSafe(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._+-~", r))
}

// pyBase64 reports whether PyYAML's construct_yaml_binary accepts s:
// ASCII, decoded by base64.decodebytes, which skips characters outside the
// alphabet but insists on correct padding.
func pyBase64(s string) bool {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= utf8.RuneSelf:
			return false
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '+', r == '/', r == '=':
			b.WriteRune(r)
		}
	}
	_, err := base64.StdEncoding.DecodeString(b.String())
	return err == nil
}
