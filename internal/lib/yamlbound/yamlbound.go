// Package yamlbound bounds what a YAML document expands to through its
// aliases, before anything decodes it.
//
// yaml.v3 (like go-yaml v2, which sigs.k8s.io/yaml uses) limits how many
// aliases a document may use relative to its size, not the bytes they
// stand for: a 100 KB scalar aliased by a list of 100 aliases, itself
// aliased 100 times, is a few hundred kilobytes of text that decodes to a
// gigabyte (a "billion laughs"). A parsed yaml.Node tree shares each
// anchored node rather than copying it, so the tree stays as small as the
// text; the expansion happens in whatever reads the tree next: the
// decoder into Go values, an encoder writing it back, a third-party
// translator handed the same bytes.
//
// Check walks the tree once and adds up the size of the document as it
// would be written with every alias replaced by what it refers to: each
// node counts its value's bytes plus NodeOverhead, and an alias the full
// size of its anchor, memoised, so that counting is linear in the tree.
// It refuses past a caller's limit, naming the path of the node where the
// limit was crossed and the line of that alias. Decoding and writing a
// document that passes take time and memory proportional to the limit.
//
// A document without aliases is never refused for its size: its text is
// already bounded by its reader. A document someone wrote in a field
// (user data, Butane, an annotation) is also bounded in nodes, aliases or
// not (Limits.Nodes, MaxNodes), since vminit reads it several times over.
package yamlbound

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// NodeOverhead is what each node counts besides its value: about what the
// shortest written node takes ("a," in a flow list). It makes a flood of
// aliases to empty nodes count, since each decodes to a value of its own.
const NodeOverhead = 2

// MaxNodes is the bound on the nodes (scalars, keys, lists and mappings,
// aliases counted at the nodes they stand for) of a document someone
// wrote in a field: user data, network config, Butane, an annotation.
// vminit reads such a document several times over (cloud-init's merge,
// its schema, the rendering), at about a kilobyte and 12 µs per node in
// all: 100,000 nodes is about 1 s and 200 MB, where user data of 4 million
// one-letter list entries (8 MB) took 45 s and 4.9 GB. Hand-written
// cloud-configs hold hundreds, or thousands.
const MaxNodes = 100_000

// Error is a document past a limit: its expanded size, or its nodes.
type Error struct {
	Path  string // where the limit was crossed, as a field path ("a.b[2]"); "" for the top
	Line  int    // the line of the node (often an alias) that crossed it
	Limit int    // in bytes, or in nodes when Nodes
	Nodes bool
}

func (e *Error) Error() string {
	at := ""
	if e.Path != "" {
		at = " at " + e.Path
	}
	if e.Nodes {
		return fmt.Sprintf("line %d: the document holds more than %d values (keys, entries, aliases counted as what they stand for)%s; make it smaller", e.Line, e.Limit, at)
	}
	return fmt.Sprintf("line %d: aliases expand the document past %d bytes%s; write it out without anchors and aliases, or make it smaller", e.Line, e.Limit, at)
}

// Limits bound a document.
type Limits struct {
	// Bytes bounds the document's size with every alias expanded. A
	// document without aliases is bounded by its text, by its reader.
	Bytes int
	// Nodes, when not 0, bounds its nodes, aliases or not (MaxNodes for a
	// document someone wrote in a field).
	Nodes int
}

// Check returns an *Error when n is past l (see the package comment),
// and an error for an alias that contains itself.
func Check(n *yaml.Node, l Limits) error {
	if n == nil {
		return nil
	}
	w := walker{Limits: l, costs: map[*yaml.Node]cost{}}
	_, err := w.cost(n)
	return err
}

// Parse parses the first YAML document of data into a node tree and
// Checks it. The tree is a DocumentNode, or a zero Node for an empty
// input, as yaml.Unmarshal into a yaml.Node gives.
func Parse(data []byte, l Limits) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if err := Check(&doc, l); err != nil {
		return nil, err
	}
	return &doc, nil
}

// Unmarshal is yaml.Unmarshal for a document bounded by l: it parses
// once, Checks the tree and decodes it.
func Unmarshal(data []byte, v any, l Limits) error {
	doc, err := Parse(data, l)
	if err != nil || doc.Kind == 0 {
		return err // an empty document leaves v alone, as yaml.Unmarshal does
	}
	return doc.Decode(v)
}

// CheckStream Checks every document of a YAML stream, for decoders that
// take the bytes rather than a tree (sigs.k8s.io/yaml, Butane). A syntax
// error is left to that decoder, which words it in its own terms.
func CheckStream(data []byte, l Limits) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return nil // the end, or a syntax error for the decoder to word
		}
		if err := Check(&doc, l); err != nil {
			return err
		}
	}
}

// Describe words an error of Parse or Unmarshal for a message about the
// field that held the document: an *Error as it is, any other error (a
// syntax error from yaml.v3) after invalid ("not YAML", "is not valid
// YAML or JSON"), without yaml.v3's "yaml: " prefix.
func Describe(err error, invalid string) string {
	var be *Error
	if errors.As(err, &be) {
		return err.Error()
	}
	return invalid + ": " + strings.TrimPrefix(err.Error(), "yaml: ")
}

// cost is what a node stands for once its aliases are expanded.
type cost struct{ bytes, nodes int }

type walker struct {
	Limits
	total   cost // of what was walked so far, expanded
	aliased bool // an alias was seen: only then can total.bytes exceed the text
	// costs holds anchored nodes' expanded costs; nodes -1 while the
	// anchored node is being walked.
	costs map[*yaml.Node]cost
	path  []string // the keys and indexes down to the current node, for the error
}

// cost returns n's expanded cost, adding it to w.total.
func (w *walker) cost(n *yaml.Node) (cost, error) {
	if n.Kind == yaml.AliasNode {
		return w.alias(n)
	}
	if n.Anchor != "" {
		w.costs[n] = cost{nodes: -1}
	}
	c := cost{NodeOverhead + len(n.Value), 1}
	if err := w.add(n, c); err != nil {
		return cost{}, err
	}
	for i, child := range n.Content {
		switch {
		case n.Kind == yaml.MappingNode && i%2 == 1:
			w.path = append(w.path, keyName(n.Content[i-1]))
		case n.Kind == yaml.SequenceNode:
			w.path = append(w.path, "["+strconv.Itoa(i)+"]")
		default:
			w.path = append(w.path, "")
		}
		cc, err := w.cost(child)
		if err != nil {
			return cost{}, err
		}
		w.path = w.path[:len(w.path)-1]
		c.bytes += cc.bytes
		c.nodes += cc.nodes
	}
	if n.Anchor != "" {
		w.costs[n] = c
	}
	return c, nil
}

// alias counts an alias at the cost of its anchor, which YAML defines
// before any alias to it, so it was walked already.
func (w *walker) alias(n *yaml.Node) (cost, error) {
	w.aliased = true
	t := n.Alias
	if t == nil {
		return cost{}, fmt.Errorf("line %d: alias *%s to no anchor", n.Line, n.Value)
	}
	c, ok := w.costs[t]
	if !ok || c.nodes < 0 {
		return cost{}, fmt.Errorf("line %d: alias *%s refers to a node that contains it", n.Line, n.Value)
	}
	if err := w.add(n, c); err != nil {
		return cost{}, err
	}
	return c, nil
}

func (w *walker) add(n *yaml.Node, c cost) error {
	w.total.bytes += c.bytes
	w.total.nodes += c.nodes
	switch {
	case w.aliased && w.total.bytes > w.Bytes:
		return &Error{Path: w.where(), Line: n.Line, Limit: w.Bytes}
	case w.Nodes > 0 && w.total.nodes > w.Nodes:
		return &Error{Path: w.where(), Line: n.Line, Limit: w.Nodes, Nodes: true}
	}
	return nil
}

// where is w.path as a field path: keys joined by dots, indexes in
// brackets.
func (w *walker) where() string {
	var b strings.Builder
	for _, p := range w.path {
		switch {
		case p == "":
		case p[0] == '[':
			b.WriteString(p)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

// maxQuotedKey bounds how much of a key an error quotes.
const maxQuotedKey = 64

// keyName is a mapping key as a path names it: a scalar's value, at most
// maxQuotedKey bytes, control characters escaped ("<key>" for a key that
// is not a scalar).
func keyName(k *yaml.Node) string {
	for k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		return "<key>"
	}
	return QuoteKey(k.Value)
}

// QuoteKey is a key as an error names it: at most 64 bytes, control
// characters escaped. A key may be anything the author wrote, up to
// megabytes, or a line of a file that was never meant to be read.
func QuoteKey(k string) string {
	if len(k) > maxQuotedKey {
		cut := maxQuotedKey
		for cut > 0 && !utf8.RuneStart(k[cut]) {
			cut--
		}
		k = k[:cut] + "…"
	}
	if strings.IndexFunc(k, unicode.IsControl) >= 0 {
		q := strconv.Quote(k)
		k = q[1 : len(q)-1]
	}
	return k
}
