// Package yaml11 writes YAML that cloud-init reads back exactly as meant.
//
// cloud-init parses user-data, meta-data and network-config with PyYAML's
// SafeLoader, which implements YAML 1.1: an unquoted yes, on or off is a
// boolean, 0644 is the octal number 420, 52:54:00:12:34:56 (a MAC address)
// is a sexagesimal integer and 2024-01-02 is a date. gopkg.in/yaml.v3 follows
// YAML 1.2 and leaves some of those strings unquoted, so a generator that
// uses it naively can change a string into a number on the guest. This
// package resolves plain scalars with PyYAML's rules (Resolve), builds
// yaml.v3 nodes that quote exactly the strings that need it (String) and
// encodes them in cloud-init's usual layout (Marshal).
package yaml11

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Tags of the values PyYAML's SafeLoader constructs, in yaml.v3's short form.
const (
	Str       = "!!str"
	Int       = "!!int"
	Float     = "!!float"
	Bool      = "!!bool"
	Null      = "!!null"
	Timestamp = "!!timestamp"
	Binary    = "!!binary"
	Map       = "!!map"
	Seq       = "!!seq"
	Set       = "!!set"
	Omap      = "!!omap"
	Pairs     = "!!pairs"
	// MergeKey is the tag of a plain "<<" mapping key.
	MergeKey = "!!merge"
	// Value is the tag of a plain "=", which SafeLoader cannot construct.
	Value = "!!value"
	// Indicator is the tag PyYAML gives a plain "!", "&" or "*"; SafeLoader
	// cannot construct it either.
	Indicator = "!!yaml"
)

// The implicit resolvers of PyYAML 6 (yaml/resolver.py), in the order
// PyYAML tries them. Python's "$" also matches before a final newline, but a
// plain scalar never ends in one, so "\z" is equivalent here. They are
// compiled on first use, not at init: every vminit run links this
// package, few resolve a scalar (docs/benchmarks.md, "Whole process").
var resolvers = sync.OnceValue(func() []resolver {
	return []resolver{
		{Bool, "yYnNtTfFoO", regexp.MustCompile(`^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)\z`)},
		{Float, "-+0123456789.", regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\z`)},
		{Int, "-+0123456789", regexp.MustCompile(`^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)\z`)},
		{MergeKey, "<", regexp.MustCompile(`^(?:<<)\z`)},
		{Null, "~nN", regexp.MustCompile(`^(?:~|null|Null|NULL|)\z`)},
		{Timestamp, "0123456789", regexp.MustCompile(`^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)\z`)},
		{Value, "=", regexp.MustCompile(`^(?:=)\z`)},
		{Indicator, "!&*", regexp.MustCompile(`^(?:!|&|\*)\z`)},
	}
})

type resolver struct {
	tag   string
	first string // the first characters PyYAML consults the pattern for
	re    *regexp.Regexp
}

// Resolve returns the tag PyYAML's SafeLoader gives the plain (unquoted)
// scalar s: Str, Int, Float, Bool, Null, Timestamp, MergeKey, Value or
// Indicator.
func Resolve(s string) string {
	if s == "" {
		return Null
	}
	for _, r := range resolvers() {
		if strings.IndexByte(r.first, s[0]) >= 0 && r.re.MatchString(s) {
			return r.tag
		}
	}
	return Str
}

// Tag returns the tag of the value PyYAML constructs from n, taking its
// style and any explicit tag into account, or an error for a tag
// SafeLoader cannot construct (such as !!python/object). Aliases are
// resolved to their target.
func Tag(n *yaml.Node) (string, error) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	explicit := n.Style&yaml.TaggedStyle != 0
	switch n.Kind {
	case yaml.MappingNode:
		if explicit {
			switch short(n.Tag) {
			case Map, Set, Omap, Pairs:
				return short(n.Tag), nil
			}
			return "", fmt.Errorf("line %d: tag %s is not supported by cloud-init's YAML loader", n.Line, n.Tag)
		}
		return Map, nil
	case yaml.SequenceNode:
		if explicit {
			switch short(n.Tag) {
			case Seq, Omap, Pairs:
				return short(n.Tag), nil
			}
			return "", fmt.Errorf("line %d: tag %s is not supported by cloud-init's YAML loader", n.Line, n.Tag)
		}
		return Seq, nil
	case yaml.ScalarNode:
		if explicit {
			switch t := short(n.Tag); t {
			case Str, Int, Float, Bool, Null, Timestamp, Binary:
				return t, nil
			case "!!python/unicode": // cloud-init's loader adds this one
				return Str, nil
			}
			return "", fmt.Errorf("line %d: tag %s is not supported by cloud-init's YAML loader", n.Line, n.Tag)
		}
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
			return Str, nil
		}
		return Resolve(n.Value), nil
	}
	return "", fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

func short(tag string) string {
	if t, ok := strings.CutPrefix(tag, "tag:yaml.org,2002:"); ok {
		return "!!" + t
	}
	return tag
}

// String returns a scalar node that PyYAML reads back as the string s:
// plain when that is unambiguous, double-quoted otherwise. The encoder
// switches multi-line strings to a literal block on its own.
func String(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: Str, Value: s}
	if !plainSafe(s) || LiteralUnsafe(s) {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// LiteralUnsafe reports whether s must be double-quoted rather than left to
// the encoder, which would write it plain or as a literal block, wrongly,
// because of yaml.v3 (v3.0.1) bugs: its emitter drops a leading line break
// ("\nx" comes back as "x") and writes the YAML 1.1 line breaks NEL, LS and
// PS raw, where parsers then fold them; its parser refuses a literal block
// whose first line starts with a tab (PyYAML reads it). Carriage returns
// are quoted too, since a block scalar cannot hold one.
func LiteralUnsafe(s string) bool {
	if strings.ContainsAny(s, "\r\u0085\u2028\u2029") {
		return true
	}
	return strings.Contains(s, "\n") && (s[0] == '\n' || s[0] == '\t')
}

// plainSafe reports whether s may be left to the encoder's choice of
// style. PyYAML must resolve it to a string; the rest (YAML 1.2 look-alikes,
// indicators, line breaks) the yaml.v3 encoder already quotes for a node
// tagged !!str.
func plainSafe(s string) bool {
	return strings.ContainsAny(s, "\n\r") || Resolve(s) == Str
}

// IntNode returns a plain integer scalar.
func IntNode(i int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: Int, Value: strconv.FormatInt(i, 10)}
}

// BoolNode returns a plain boolean scalar (true or false).
func BoolNode(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: Bool, Value: strconv.FormatBool(b)}
}

// NullNode returns a null scalar.
func NullNode() *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: Null, Value: "null"}
}

// Mapping builds a block mapping from alternating keys and values. Keys are
// strings; values are nodes.
func Mapping(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: Map}
	for i := 0; i+1 < len(kv); i += 2 {
		AddPair(m, kv[i].(string), kv[i+1].(*yaml.Node))
	}
	return m
}

// AddPair appends key: value to the mapping m.
func AddPair(m *yaml.Node, key string, value *yaml.Node) {
	m.Content = append(m.Content, String(key), value)
}

// Sequence builds a block sequence of nodes.
func Sequence(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: Seq, Content: items}
}

// Strings builds a sequence of string scalars.
func Strings(items []string) *yaml.Node {
	s := Sequence()
	for _, it := range items {
		s.Content = append(s.Content, String(it))
	}
	return s
}

// Flow returns n marked for flow style ([a, b] or {k: v}), which reads
// better for short lists of words.
func Flow(n *yaml.Node) *yaml.Node {
	n.Style |= yaml.FlowStyle
	return n
}

// Marshal encodes n as a block-style YAML document with two-space
// indentation, no document markers and unlimited line width (so long
// strings are never folded).
func Marshal(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Encodes returns the error Marshal(n) would return, without encoding n
// when n is in the subset Marshal never fails on (encodable): a check
// that only needs the verdict ("does this render?") skips the encoding,
// most of a rendering's time and nearly all its garbage. Outside the
// subset it runs Marshal.
func Encodes(n *yaml.Node) error {
	if encodable(n) {
		return nil
	}
	_, err := Marshal(n)
	return err
}

// encodable reports whether n is a tree of block or flow mappings,
// sequences and scalars, with scalar keys, the tags this package gives
// (or none), valid UTF-8, and no anchors, aliases or comments. On such a
// tree yaml.v3's (v3.0.1) encoder has no failing path: its errors are
// invalid UTF-8 under a tag, an unknown node kind, and the emitter's
// problems with anchors, tags and out-of-order events (a document node
// inside a tree, an alias), none of which such a tree can produce; its
// writer is a bytes.Buffer. FuzzEncodes holds it to Marshal.
func encodable(n *yaml.Node) bool {
	if n == nil || n.Anchor != "" || n.HeadComment != "" || n.LineComment != "" || n.FootComment != "" || n.Alias != nil {
		return false
	}
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.Tag {
		case "", Str, Int, Float, Bool, Null, Timestamp:
		default:
			return false
		}
		return len(n.Content) == 0 && utf8.ValidString(n.Value)
	case yaml.MappingNode:
		if n.Tag != "" && n.Tag != Map || len(n.Content)%2 != 0 {
			return false
		}
		for i, c := range n.Content {
			if i%2 == 0 && (c == nil || c.Kind != yaml.ScalarNode) || !encodable(c) {
				return false
			}
		}
		return true
	case yaml.SequenceNode:
		if n.Tag != "" && n.Tag != Seq {
			return false
		}
		for _, c := range n.Content {
			if !encodable(c) {
				return false
			}
		}
		return true
	}
	return false
}
