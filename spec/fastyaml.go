package spec

import (
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yamlbound"
)

// This file is a fast front end for the YAML that spec files are actually
// written in. It exists for a metadata server loading 100,000 spec files,
// where yaml.v3's scanner and parser (a port of libyaml's event machine)
// were most of the cost of a cold load (docs/design.md, "Loading many
// specs").
//
// fastParse builds the same yaml.Node tree that yaml.Unmarshal would, for
// the plain subset of YAML that hand-written and generated specs use: block
// mappings and sequences indented with spaces, single-line plain and quoted
// scalars, literal block scalars (|, |-, |+), one-line flow collections of
// scalars, and comments. On anything else (anchors, tags, folded or
// multi-line scalars, document markers, tabs in indentation, non-ASCII
// bytes, JSON spread over lines, and every syntax error) it returns nil and
// the caller uses yaml.v3, so errors and rare constructs keep yaml.v3's
// exact behaviour. It also counts as it builds, and stops with an error
// at the first collection or node past a spec's bounds (bound.go), so
// that a document of millions of entries costs no more than the bound. The tree is all the rest of Decode sees: walkKnown and
// yaml.v3's own Node.Decode run on it unchanged.
//
// FuzzFastYAML holds it to that: whenever fastParse returns a tree,
// yaml.Unmarshal must accept the same bytes and build an identical tree
// (kinds, tags, styles, values, lines and columns; comments aside, which
// the decoder ignores).

// notFast is the panic value that abandons the fast path. Every rule below
// bails rather than guessing, so the scanners stay short: a panic unwinds
// the recursive descent in one step, and fastParse turns it into nil.
type notFast struct{}

// fastLine is one line of the document, without its '\n'.
type fastLine struct {
	start, end int
	indent     int  // leading spaces
	kind       byte // lineSkip, lineContent or lineBad
}

const (
	lineSkip = iota // blank, or only a comment
	lineContent
	lineBad // a tab in the indentation or a document marker: outside block scalars, not for the fast path
)

// fastParser's buffers are reused across documents (see parsers): a
// spec's tree is short-lived, and allocating its nodes one by one was most
// of the garbage of a directory load.
type fastParser struct {
	src   []byte
	lines []fastLine
	next  int // the first line not yet consumed

	nodes    []yaml.Node      // nodes are carved from here
	made     int              // nodes carved for this document, held to MaxSpecNodes
	open     []openCollection // the collections being parsed, outermost first
	children []*yaml.Node     // the children of the collections being parsed, as a stack
	contents []*yaml.Node     // finished collections' Content slices are carved from here
	scratch  []byte           // for scalars that are not a slice of the source
	entries  []entry          // Identify's mapping entries (identify.go)
}

// openCollection is a collection being parsed: its node, and where its
// children start on the children stack. The stack of them names the path
// of a collection refused for its size.
type openCollection struct {
	node *yaml.Node
	mark int
}

// parsers holds fastParsers whose trees are no longer referenced.
var parsers = sync.Pool{New: func() any { return new(fastParser) }}

// fastParse returns the document node yaml.Unmarshal would build from src,
// or nil if src is outside the subset this parser knows exactly or past
// the bounds of a spec.
func fastParse(src []byte) *yaml.Node {
	doc, _ := new(fastParser).parse(src)
	return doc
}

// release makes p's buffers available for the next document: nothing may
// use the tree it returned afterwards.
func (p *fastParser) release() {
	clear(p.nodes) // the nodes and Content slices point at the old strings and nodes
	clear(p.contents)
	clear(p.entries)                    // their keys are slices of the old document
	clear(p.children[:cap(p.children)]) // a bail leaves children on the stack
	clear(p.open[:cap(p.open)])
	*p = fastParser{lines: p.lines[:0], nodes: p.nodes[:0], open: p.open[:0], children: p.children[:0], contents: p.contents[:0], scratch: p.scratch[:0], entries: p.entries[:0]}
	parsers.Put(p)
}

// parse returns the document's tree, or nil if the document is not for
// the fast path, or an error for a collection or a document past the
// bounds of a spec (see bound.go): it stops there, whatever follows.
func (p *fastParser) parse(src []byte) (doc *yaml.Node, err *FieldError) {
	p.src = src
	if !p.split() {
		return nil, nil
	}
	defer func() {
		if r := recover(); r != nil {
			switch r := r.(type) {
			case notFast:
				doc = nil
			case *FieldError:
				doc, err = nil, r
			default:
				panic(r)
			}
		}
	}()
	li := p.peek()
	if li < 0 || p.isDash(li, p.lines[li].indent) {
		return nil, nil // empty, or a top-level sequence: the careful path words the error
	}
	root := p.mapping(li, p.lines[li].indent)
	if p.peek() >= 0 {
		bail() // content after the root mapping, at a lower indentation
	}
	d := p.node()
	p.children = append(p.children, root)
	*d = yaml.Node{Kind: yaml.DocumentNode, Line: root.Line, Column: root.Column, Content: p.content(0)}
	return d, nil
}

func bail() { panic(notFast{}) }

// begin pushes collection n, whose children start at the top of the
// children stack.
func (p *fastParser) begin(n *yaml.Node) {
	p.open = append(p.open, openCollection{n, len(p.children)})
}

// end pops the innermost collection and returns its children.
func (p *fastParser) end() []*yaml.Node {
	c := p.content(p.open[len(p.open)-1].mark)
	p.open = p.open[:len(p.open)-1]
	return c
}

// checkEntries refuses the innermost collection once it holds more than
// MaxListEntries entries (a mapping's entry is a key and its value).
func (p *fastParser) checkEntries() {
	c := p.open[len(p.open)-1]
	n := len(p.children) - c.mark
	if c.node.Kind == yaml.MappingNode {
		n /= 2
	}
	if n > MaxListEntries {
		panic(tooManyEntries(p.where()))
	}
}

// where returns the path of the innermost open collection, and the line
// of its key (its own line in a list).
func (p *fastParser) where() (string, int) {
	path, line := "", 0
	for i, c := range p.open {
		line = c.node.Line
		if i == 0 {
			continue
		}
		// c's place in its parent: the parent's children so far end
		// where c's begin.
		parent := p.open[i-1]
		if parent.node.Kind == yaml.MappingNode {
			k := p.children[c.mark-1]
			path, line = join(path, yamlbound.QuoteKey(k.Value)), k.Line
		} else {
			path += "[" + strconv.Itoa(c.mark-parent.mark) + "]"
		}
	}
	return path, line
}

// split cuts src into lines. It refuses what yaml.v3 rejects or reads as
// a line break: control characters, invalid UTF-8, characters libyaml does
// not count as printable, the byte-order mark, and the Unicode line breaks
// (NEL, LS, PS). Carriage returns are left to yaml.v3 too.
func (p *fastParser) split() bool {
	n := 1
	for i := 0; i < len(p.src); i++ {
		c := p.src[i]
		switch {
		case c == '\n':
			n++
		case c < ' ' && c != '\t' || c == 0x7f:
			return false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(p.src[i:])
			if size == 1 || // invalid UTF-8
				!(r >= 0xa0 && r <= 0xd7ff || r >= 0xe000 && r <= 0xfffd || r >= 0x10000) ||
				r == 0x2028 || r == 0x2029 || r == 0xfeff {
				return false
			}
			i += size - 1
		}
	}
	if cap(p.lines) < n {
		p.lines = make([]fastLine, 0, n)
	}
	start := 0
	for start <= len(p.src) {
		end := start
		for end < len(p.src) && p.src[end] != '\n' {
			end++
		}
		l := fastLine{start: start, end: end}
		for l.start+l.indent < end && p.src[l.start+l.indent] == ' ' {
			l.indent++
		}
		switch rest := p.src[l.start+l.indent : end]; {
		case len(rest) == 0 || rest[0] == '#':
			l.kind = lineSkip
		case rest[0] == '\t':
			l.kind = lineBad
		case l.indent == 0 && len(rest) >= 3 && (string(rest[:3]) == "---" || string(rest[:3]) == "...") &&
			(len(rest) == 3 || rest[3] == ' ' || rest[3] == '\t'):
			l.kind = lineBad
		default:
			l.kind = lineContent
		}
		p.lines = append(p.lines, l)
		start = end + 1
	}
	// About three nodes a line, but no more than a slab's worth up front:
	// a document of millions of lines may be refused after a few.
	if want := min(3*n, maxSlab); cap(p.nodes) < want {
		p.nodes = make([]yaml.Node, 0, want)
	}
	return true
}

// maxSlab bounds the nodes allocated at once (about 10 MB of them).
const maxSlab = 1 << 16

// node returns a new node from the slab. A full slab is replaced, not
// grown: the nodes already handed out must not move.
func (p *fastParser) node() *yaml.Node {
	if p.made++; p.made > MaxSpecNodes {
		panic(tooManyNodes(p.where()))
	}
	if len(p.nodes) == cap(p.nodes) {
		p.nodes = make([]yaml.Node, 0, min(max(2*cap(p.nodes), 64), maxSlab))
	}
	p.nodes = p.nodes[:len(p.nodes)+1]
	return &p.nodes[len(p.nodes)-1]
}

// content returns the children pushed since mark as a Content slice, and
// pops them.
func (p *fastParser) content(mark int) []*yaml.Node {
	kids := p.children[mark:]
	if len(kids) == 0 {
		return nil
	}
	if cap(p.contents)-len(p.contents) < len(kids) {
		p.contents = make([]*yaml.Node, 0, max(2*cap(p.contents), len(kids), 64))
	}
	c := append(p.contents[len(p.contents):len(p.contents):len(p.contents)+len(kids)], kids...)
	p.contents = p.contents[:len(p.contents)+len(kids)]
	p.children = p.children[:mark]
	return c
}

func (p *fastParser) text(li int) []byte {
	return p.src[p.lines[li].start:p.lines[li].end]
}

// peek skips blank and comment lines and returns the next content line, or
// -1 at the end of the document.
func (p *fastParser) peek() int {
	for ; p.next < len(p.lines); p.next++ {
		switch p.lines[p.next].kind {
		case lineContent:
			return p.next
		case lineBad:
			bail()
		}
	}
	return -1
}

// isDash reports whether line li has a block sequence entry ("- " or a
// lone "-") at column col.
func (p *fastParser) isDash(li, col int) bool {
	t := p.text(li)
	return col < len(t) && t[col] == '-' && (col+1 == len(t) || t[col+1] == ' ')
}

// mapping parses a block mapping whose first key is at line li, column
// col; its other keys are the lines indented exactly col.
func (p *fastParser) mapping(li, col int) *yaml.Node {
	m := p.node()
	*m = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: li + 1, Column: col + 1}
	p.begin(m)
	for {
		k, after := p.key(li, col)
		p.children = append(p.children, k)
		p.children = append(p.children, p.value(li, after, col, false))
		p.checkEntries()
		li = p.peek()
		if li < 0 || p.lines[li].indent < col {
			m.Content = p.end()
			return m
		}
		if p.lines[li].indent > col {
			bail()
		}
	}
}

// sequence parses a block sequence whose first "-" is at line li, column
// col. An indentless sequence (one at its parent key's own indentation)
// ends at the first line there that is not an entry; any other sequence
// must not have such a line.
func (p *fastParser) sequence(li, col int, indentless bool) *yaml.Node {
	s := p.node()
	*s = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: li + 1, Column: col + 1}
	p.begin(s)
	for {
		p.children = append(p.children, p.value(li, col+1, col, true))
		p.checkEntries()
		li = p.peek()
		if li < 0 || p.lines[li].indent < col {
			s.Content = p.end()
			return s
		}
		if p.lines[li].indent > col {
			bail()
		}
		if !p.isDash(li, col) {
			if indentless {
				s.Content = p.end()
				return s
			}
			bail()
		}
	}
}

// key parses a simple mapping key at line li, column col, and returns it
// with the index just past its ':'.
func (p *fastParser) key(li, col int) (*yaml.Node, int) {
	t := p.text(li)
	end := keyEnd(t, col)
	if end < 0 {
		bail()
	}
	k, ok := specKeys()[string(t[col:end])] // a field name: no new string
	if !ok {
		k = string(t[col:end])
	}
	return p.plain(li, col, k), end + 1
}

// specKeys holds the YAML names of the spec's fields, so that keys, which
// are nearly always one of them, share one string each.
var specKeys = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for name, f := range yamlFields(t) {
			m[name] = name
			walk(f.typ)
		}
	}
	walk(instanceType)
	return m
})

// keyEnd returns the index of the ':' that ends a simple key starting at
// t[i] ("name: ..." or "name:" at the end of the line), or -1. Keys are
// identifiers, paths and label names: letters, digits and _ . - /.
func keyEnd(t []byte, i int) int {
	if i >= len(t) || !(isAlnum(t[i]) || t[i] == '_') {
		return -1
	}
	j := i + 1
	for j < len(t) && (isAlnum(t[j]) || t[j] == '_' || t[j] == '.' || t[j] == '-' || t[j] == '/') {
		j++
	}
	if j-i > 256 || j == len(t) || t[j] != ':' || (j+1 < len(t) && t[j+1] != ' ') {
		return -1
	}
	return j
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// plain makes a plain scalar node; its tag is what yaml.v3's resolver
// makes of the text (!!str, !!int, !!bool, !!null...).
func (p *fastParser) plain(li, col int, v string) *yaml.Node {
	if v == "<<" {
		bail() // a merge key, tagged !!merge by the parser itself
	}
	n := p.node()
	*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Line: li + 1, Column: col + 1}
	if v == "" || mayResolve[v[0]] {
		n.Tag = ""
		n.Tag = n.ShortTag()
	}
	return n
}

// value parses what follows a mapping key's ':' or a sequence entry's '-'
// (t[c:] of line li). indent is the column of the collection the value
// belongs to.
func (p *fastParser) value(li, c, indent int, entry bool) *yaml.Node {
	t := p.text(li)
	p.next = li + 1
	j := skipSpaces(t, c)
	if j == len(t) || t[j] == '#' && j > c {
		return p.nested(li, c, indent, entry)
	}
	var n *yaml.Node
	var end int
	switch t[j] {
	case '"', '\'':
		n, end = p.quoted(li, j)
	case '|':
		return p.literal(li, j, indent)
	case '[', '{':
		n, end = p.flow(li, j)
	default:
		if entry && keyEnd(t, j) >= 0 {
			return p.mapping(li, j) // "- name: value": a mapping inside the entry
		}
		if !plainStart(t, j) {
			bail()
		}
		end = j
		for end < len(t) && t[end] != '\t' && !(t[end] == ':' && (end+1 == len(t) || t[end+1] == ' ')) &&
			!(t[end] == '#' && t[end-1] == ' ') {
			end++
		}
		if end < len(t) && t[end] != '#' {
			bail() // a tab, or "key: a: b"
		}
		for t[end-1] == ' ' {
			end--
		}
		n = p.plain(li, j, string(t[j:end]))
		// A more indented next line would continue the scalar (folded
		// into it with a space): not for the fast path.
		if next := p.peek(); next >= 0 && p.lines[next].indent > indent {
			bail()
		}
	}
	p.endOfLine(t, end)
	return n
}

// mayResolve marks the first bytes with which yaml.v3's resolver may find
// a plain scalar to be something other than a string (its resolveTable):
// signs, digits, '.', and the initials of true, false, null, yes, no, on,
// off and ~. Any other plain scalar is a !!str without asking it.
var mayResolve = func() (t [256]bool) {
	for _, c := range "+-0123456789.yYnNtTfFoO~" {
		t[c] = true
	}
	return t
}()

// plainStart reports whether t[j] may begin a plain scalar: not an
// indicator, except '-' followed by a non-blank ("--now").
func plainStart(t []byte, j int) bool {
	switch t[j] {
	case '-':
		return j+1 < len(t) && t[j+1] != ' ' && t[j+1] != '\t'
	case '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '\t':
		return false
	}
	return true
}

// endOfLine accepts only blanks and a comment after a value that ends at
// t[i].
func (p *fastParser) endOfLine(t []byte, i int) {
	j := skipSpaces(t, i)
	if j < len(t) && !(t[j] == '#' && j > i) {
		bail()
	}
}

// nested is the value of a key or entry with nothing after its indicator
// on its line: a block collection on the next lines, or null.
func (p *fastParser) nested(li, c, indent int, entry bool) *yaml.Node {
	if next := p.peek(); next >= 0 {
		at := p.lines[next].indent
		dash := p.isDash(next, at)
		switch {
		case at > indent && dash:
			return p.sequence(next, at, false)
		case at > indent:
			return p.mapping(next, at)
		case at == indent && dash && !entry:
			return p.sequence(next, at, true) // "key:\n- a": the sequence may sit at the key's indentation
		}
	}
	n := p.node()
	// libyaml places an empty value just after its indicator.
	*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: li + 1, Column: c + 1}
	return n
}

// quoted parses a single-line quoted scalar starting at t[j] and returns
// it with the index after its closing quote. Double quotes take the
// escapes \\ \" \n \t; any other escape is for yaml.v3.
func (p *fastParser) quoted(li, j int) (*yaml.Node, int) {
	t := p.text(li)
	q := t[j]
	buf := p.scratch[:0]
	plain := true // no escape so far: the value is t[j+1:i]
	i := j + 1
	for ; ; i++ {
		if i == len(t) {
			bail() // continues on the next line
		}
		c := t[i]
		if c == q {
			if q == '\'' && i+1 < len(t) && t[i+1] == '\'' {
				if plain {
					buf, plain = append(buf, t[j+1:i]...), false
				}
				buf = append(buf, '\'')
				i++
				continue
			}
			break
		}
		if c == '\\' && q == '"' {
			if plain {
				buf, plain = append(buf, t[j+1:i]...), false
			}
			if i+1 == len(t) {
				bail()
			}
			i++
			switch t[i] {
			case '\\', '"':
				c = t[i]
			case 'n':
				c = '\n'
			case 't':
				c = '\t'
			default:
				bail()
			}
		}
		if !plain {
			buf = append(buf, c)
		}
	}
	p.scratch = buf
	v := string(buf)
	if plain {
		v = string(t[j+1 : i])
	}
	n := p.node()
	style := yaml.DoubleQuotedStyle
	if q == '\'' {
		style = yaml.SingleQuotedStyle
	}
	*n = yaml.Node{Kind: yaml.ScalarNode, Style: style, Tag: "!!str", Value: v, Line: li + 1, Column: j + 1}
	return n, i + 1
}

// flow parses a one-line flow sequence ("[a, 'b']") or flow mapping
// ("{k: v}") of scalars starting at t[j], and returns it with the index
// after its closing bracket.
func (p *fastParser) flow(li, j int) (*yaml.Node, int) {
	t := p.text(li)
	n := p.node()
	*n = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle, Line: li + 1, Column: j + 1}
	closer := byte(']')
	if t[j] == '{' {
		n.Kind, n.Tag, closer = yaml.MappingNode, "!!map", '}'
	}
	for _, c := range t[j:] {
		if c >= utf8.RuneSelf {
			bail() // libyaml counts columns in characters: the items' columns would differ
		}
	}
	i := skipSpaces(t, j+1)
	if i < len(t) && t[i] == closer {
		return n, i + 1
	}
	p.begin(n)
	for {
		if n.Kind == yaml.MappingNode {
			end := keyEnd(t, i)
			if end < 0 || end+1 == len(t) {
				bail()
			}
			p.children = append(p.children, p.plain(li, i, string(t[i:end])))
			i = skipSpaces(t, end+1)
		}
		var item *yaml.Node
		item, i = p.flowScalar(li, i)
		p.children = append(p.children, item)
		p.checkEntries()
		i = skipSpaces(t, i)
		if i == len(t) {
			bail() // continues on the next line
		}
		switch t[i] {
		case closer:
			n.Content = p.end()
			return n, i + 1
		case ',':
			i = skipSpaces(t, i+1)
			if i == len(t) || t[i] == closer {
				bail()
			}
		default:
			bail()
		}
	}
}

// flowScalar parses a quoted or plain scalar inside a flow collection.
// Plain ones stop at the flow indicators; ':', '#' and '?' inside them
// have rules of their own and are left to yaml.v3.
func (p *fastParser) flowScalar(li, i int) (*yaml.Node, int) {
	t := p.text(li)
	if i == len(t) {
		bail()
	}
	if t[i] == '"' || t[i] == '\'' {
		return p.quoted(li, i)
	}
	if !plainStart(t, i) || t[i] == '-' && isFlowIndicator(t[i+1]) {
		bail()
	}
	end := i
	for end < len(t) && !isFlowIndicator(t[end]) {
		switch t[end] {
		case ':', '#', '?', '\t':
			bail()
		}
		end++
	}
	v := end
	for t[v-1] == ' ' {
		v--
	}
	return p.plain(li, i, string(t[i:v])), end
}

func isFlowIndicator(c byte) bool {
	return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'
}

func skipSpaces(t []byte, i int) int {
	for i < len(t) && t[i] == ' ' {
		i++
	}
	return i
}

// literal parses a literal block scalar whose '|' is at column j of line li,
// by libyaml's rules: the content's indentation is that of its first
// non-empty line (at least one more than the parent collection's), and
// the chomping indicator decides the final line breaks.
func (p *fastParser) literal(li, j, parent int) *yaml.Node {
	chomp := p.literalHeader(li, j)
	k, breaks, indent := p.literalIndent(li, parent)

	buf := p.scratch[:0]
	lineBreak := false // the last content line ended with '\n'
	for k < len(p.lines) {
		l, raw := p.lines[k], p.text(k)
		if l.indent < indent {
			if l.indent < len(raw) && raw[l.indent] == '\t' {
				bail() // a tab in the indentation
			}
			if l.indent < len(raw) || k == len(p.lines)-1 {
				break // a less indented line, or the end: the scalar is over
			}
			breaks++ // an empty line
			k++
			continue
		}
		if l.indent == indent && len(raw) == indent {
			if k == len(p.lines)-1 {
				break
			}
			breaks++ // an empty line
			k++
			continue
		}
		if lineBreak {
			buf = append(buf, '\n')
		}
		for ; breaks > 0; breaks-- {
			buf = append(buf, '\n')
		}
		buf = append(buf, raw[indent:]...)
		lineBreak = k < len(p.lines)-1
		k++
	}
	switch chomp {
	case 0:
		if lineBreak {
			buf = append(buf, '\n')
		}
	case '+':
		if lineBreak {
			buf = append(buf, '\n')
		}
		for ; breaks > 0; breaks-- {
			buf = append(buf, '\n')
		}
	}
	p.next = k
	p.scratch = buf
	n := p.node()
	*n = yaml.Node{Kind: yaml.ScalarNode, Style: yaml.LiteralStyle, Tag: "!!str", Value: string(buf), Line: li + 1, Column: j + 1}
	return n
}

// literalHeader reads the header of the literal block scalar whose '|' is
// at column j of line li, and returns its chomping indicator ('-', '+' or
// 0). An indentation indicator is yaml.v3's.
func (p *fastParser) literalHeader(li, j int) (chomp byte) {
	t := p.text(li)
	i := j + 1
	if i < len(t) && (t[i] == '-' || t[i] == '+') {
		chomp = t[i]
		i++
	}
	if i < len(t) && t[i] != ' ' {
		bail() // an indentation indicator, or text: for yaml.v3
	}
	p.endOfLine(t, i)
	if li+1 == len(p.lines) {
		bail()
	}
	return chomp
}

// literalIndent skips the empty lines that lead the content of the literal
// block scalar on line li, and returns the first line after them, how
// many there were, and the content's indentation.
func (p *fastParser) literalIndent(li, parent int) (k, breaks, indent int) {
	maxIndent := 0
	for k = li + 1; k < len(p.lines); k++ {
		l := p.lines[k]
		maxIndent = max(maxIndent, l.indent)
		if l.start+l.indent < l.end && p.src[l.start+l.indent] == '\t' {
			bail() // a tab where libyaml looks for the indentation
		}
		if l.start+l.indent < l.end || k == len(p.lines)-1 {
			break // a non-empty line, or the end of the document
		}
		breaks++
	}
	return k, breaks, max(maxIndent, parent+1, 1)
}
