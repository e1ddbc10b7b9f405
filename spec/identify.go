package spec

import (
	"bytes"

	"gopkg.in/yaml.v3"
)

// Identity is what a metadata server indexes an instance by before it has
// decoded the rest: metadata.name and spec.metadataServer.addresses, as
// written (Parse checks them; Identify does not).
type Identity struct {
	Name      string
	Addresses []string
}

// Identify reads a spec document's Identity without decoding, resolving
// or validating the rest, for a server that loads many documents and
// decodes each one only when it is first needed (mdserver/registry). It
// reports false when it cannot be sure that Parse would read the same
// name and addresses, and the caller parses: a document Identify reads
// may still be invalid, only Parse says so.
//
// It reads lines, not a tree: the mappings on the way (the document,
// metadata, spec, spec.metadataServer) must be block mappings of simple
// keys, each key once, and the name and addresses single-line scalars
// that YAML reads as strings. Every other line is only checked not to
// open what it does not close (a quote or a flow collection running on
// to the next lines, whose text could look like a key), and the lines of
// literal and folded block scalars are skipped. It declines what the fast
// parser declines at the level of lines (fastyaml.go: tabs in the
// indentation, document markers, control characters, invalid UTF-8),
// and anchors, aliases, tags and merge keys on the way.
// TestIdentifyAgreesWithParse and FuzzIdentify hold it to Parse.
func Identify(data []byte) (Identity, bool) {
	if len(data) > MaxSpecSize {
		return Identity{}, false
	}
	p := parsers.Get().(*fastParser)
	defer p.release()
	p.src = data
	if !p.split() || !p.linesClosed() {
		return Identity{}, false
	}
	ls := lineScan{p: p, buf: &p.entries}
	top, ok := ls.mapping(0, len(p.lines), 0)
	if !ok {
		return Identity{}, false
	}
	var id Identity
	meta, ok := ls.block(top, "metadata")
	if !ok || meta.from < 0 {
		return Identity{}, false
	}
	name, ok := ls.scalarOf(meta, "name")
	if !ok {
		return Identity{}, false
	}
	id.Name = string(name)
	sp, ok := ls.block(top, "spec")
	if !ok {
		return Identity{}, false
	}
	ms, ok := ls.block(sp, "metadataServer")
	if !ok {
		return Identity{}, false
	}
	if id.Addresses, ok = ls.list(ms, "addresses"); !ok {
		return Identity{}, false
	}
	return id, true
}

// lineScan reads the lines a fastParser split. The mappings' entries are
// carved from buf (the parser's, reused), one mapping after the other.
type lineScan struct {
	p   *fastParser
	buf *[]entry
}

// entry is a key of a block mapping: the line it is on, the column of its
// value (after the ':'), and the lines of its nested block, [from, to).
type entry struct {
	key          []byte
	line, valCol int
	from, to     int
}

// span is a block mapping: its entries, and the column of its keys; from
// is -1 for a null or absent one.
type span struct {
	entries []entry
	from    int
}

// mapping reads the block mapping on lines [from, to) whose keys are at
// column col (the first content line's indentation when col < 0): every
// content line there is a simple key or, after a key with nothing after
// its ':', an indentless sequence's "- " entry; deeper lines belong to
// the key above them.
func (ls lineScan) mapping(from, to, col int) (span, bool) {
	p := ls.p
	s := span{from: -1}
	buf, mark := *ls.buf, len(*ls.buf)
	defer func() { *ls.buf = buf }()
	for li := from; li < to; li++ {
		l := p.lines[li]
		switch {
		case l.kind == lineBad:
			return s, false
		case l.kind == lineSkip:
			continue
		case col < 0:
			col = l.indent
		}
		switch {
		case l.indent > col || l.indent == col && p.isDash(li, col) && len(buf) > mark:
			if len(buf) == mark {
				return s, false
			}
			buf[len(buf)-1].to = li + 1
			continue
		case l.indent < col:
			return s, false
		}
		t := p.text(li)
		end := keyEnd(t, col)
		if end < 0 {
			return s, false // a quoted, complex or merge key, or no key
		}
		s.from = col
		buf = append(buf, entry{key: t[col:end], line: li, valCol: end + 1, from: li + 1, to: li + 1})
	}
	s.entries = buf[mark:len(buf):len(buf)]
	return s, true
}

// find returns the entry of key in s, false when it is there twice.
func (s span) find(key string) (entry, bool, bool) {
	var found entry
	n := 0
	for _, e := range s.entries {
		if string(e.key) == key {
			found = e
			n++
		}
	}
	return found, n == 1, n <= 1
}

// value returns what follows e's ':' on its line, without a comment or
// the blanks around it.
func (ls lineScan) value(e entry) []byte {
	t := ls.p.text(e.line)
	v := t[skipSpaces(t, e.valCol):]
	if i := commentStart(v); i >= 0 {
		v = v[:i]
	}
	return bytes.TrimRight(v, " ")
}

// block returns the block mapping under key in s: absent, null (nothing
// after the ':' and no nested lines) or a block mapping; anything else is
// false.
func (ls lineScan) block(s span, key string) (span, bool) {
	e, present, once := s.find(key)
	if !once {
		return span{}, false
	}
	if !present {
		return span{from: -1}, true
	}
	if v := ls.value(e); len(v) > 0 && string(v) != "~" && string(v) != "null" {
		return span{}, false
	}
	// The nested lines are deeper than the key: an indentless sequence
	// there is not a mapping.
	return ls.mapping(e.from, e.to, -1)
}

// scalarOf returns the single-line string scalar of key in s.
func (ls lineScan) scalarOf(s span, key string) ([]byte, bool) {
	e, present, once := s.find(key)
	if !present || !once || ls.hasContent(e.from, e.to) {
		return nil, false
	}
	return stringScalar(ls.value(e), false)
}

// list returns the sequence of string scalars of key in s: absent or
// null (nil), a one-line flow sequence or a block sequence of one-line
// entries.
func (ls lineScan) list(s span, key string) ([]string, bool) {
	e, present, once := s.find(key)
	if !once {
		return nil, false
	}
	if !present {
		return nil, true
	}
	v := ls.value(e)
	switch {
	case len(v) > 0 && v[0] == '[':
		if ls.hasContent(e.from, e.to) || v[len(v)-1] != ']' {
			return nil, false
		}
		return flowItems(v[1 : len(v)-1])
	case len(v) > 0 && string(v) != "~" && string(v) != "null":
		return nil, false
	}
	return ls.blockItems(e)
}

// blockItems reads the "- item" lines under e, all at one column.
func (ls lineScan) blockItems(e entry) ([]string, bool) {
	p := ls.p
	var out []string
	col := -1
	for li := e.from; li < e.to; li++ {
		l := p.lines[li]
		if l.kind != lineContent {
			continue
		}
		if col < 0 {
			col = l.indent
		}
		if l.indent != col || !p.isDash(li, col) {
			return nil, false
		}
		t := p.text(li)
		v := t[skipSpaces(t, col+1):]
		if i := commentStart(v); i >= 0 {
			v = v[:i]
		}
		item, ok := stringScalar(bytes.TrimRight(v, " "), false)
		if !ok {
			return nil, false
		}
		out = append(out, string(item))
	}
	return out, true
}

// flowItems splits the inside of a one-line flow sequence of scalars.
func flowItems(v []byte) ([]string, bool) {
	if len(bytes.TrimSpace(v)) == 0 {
		return []string{}, true
	}
	out := make([]string, 0, bytes.Count(v, []byte(","))+1)
	for len(v) > 0 || len(out) < cap(out) {
		raw, rest, _ := bytes.Cut(v, []byte(","))
		item, ok := stringScalar(bytes.Trim(raw, " "), true)
		if !ok {
			return nil, false
		}
		out, v = append(out, string(item)), rest
	}
	return out, true
}

// hasContent reports whether lines [from, to) hold anything but blanks
// and comments.
func (ls lineScan) hasContent(from, to int) bool {
	for li := from; li < to; li++ {
		if ls.p.lines[li].kind != lineSkip {
			return true
		}
	}
	return false
}

// stringScalar returns the text of a scalar YAML reads as a string: a
// plain one (in a flow collection: without flow indicators, ':' or '#')
// that the resolver leaves a !!str, or a quoted one without escapes other
// than a doubled single quote. Anything else is false.
func stringScalar(v []byte, inFlow bool) ([]byte, bool) {
	if len(v) == 0 {
		return nil, false
	}
	switch v[0] {
	case '"', '\'':
		if len(v) < 2 || v[len(v)-1] != v[0] || bytes.ContainsAny(v[1:len(v)-1], "\"'\\") {
			return nil, false // an escape, a doubled quote, or text after the closing one
		}
		return v[1 : len(v)-1], true
	}
	if !plainStart(v, 0) || bytes.Contains(v, []byte(": ")) || v[len(v)-1] == ':' || bytes.IndexByte(v, '\t') >= 0 {
		return nil, false
	}
	if inFlow && bytes.ContainsAny(v, ",[]{}:#?") {
		return nil, false
	}
	if mayResolve[v[0]] && !dottedDigits(v) {
		n := yaml.Node{Kind: yaml.ScalarNode, Value: string(v)}
		if n.ShortTag() != "!!str" {
			return nil, false
		}
	}
	return v, true
}

// dottedDigits reports whether v is digits with two dots or more (an IPv4
// address): neither a number nor a date to YAML's resolver, so a string,
// found without the resolver's failed conversions.
func dottedDigits(v []byte) bool {
	dots := 0
	for _, c := range v {
		switch {
		case c == '.':
			dots++
		case c < '0' || c > '9':
			return false
		}
	}
	return dots >= 2
}

// commentStart returns where a comment starts in the value v, or -1.
func commentStart(v []byte) int {
	c, _ := scanLine(v, 0)
	return c
}

// scanLine follows t from column from as YAML's scanner would at the
// level of characters: quotes and flow collections open where a value
// may start (the line's start, after an indicator and a blank, or inside
// a flow collection after '[', '{' or ','), and '#' after a blank, outside
// quotes, starts a comment. It returns where the comment starts (-1 if
// none) and whether the line ends with a quote or a flow collection
// still open.
func scanLine(t []byte, from int) (comment int, open bool) {
	depth, quote := 0, byte(0)
	prev := byte(':') // the last byte before i that is not a blank, as if a key came first
	for i := from; i < len(t); i++ {
		c := t[i]
		if quote != 0 {
			switch {
			case c == '\\' && quote == '"':
				i++
			case c == quote:
				quote = 0
				prev = c
			}
			continue
		}
		atValue := false
		switch prev {
		case ':', '-', '?', '[', '{', ',':
			atValue = true
		}
		blankBefore := i == from || t[i-1] == ' '
		switch {
		case c == '#' && blankBefore:
			return i, quote != 0 || depth != 0
		case (c == '"' || c == '\'') && atValue && (blankBefore || depth > 0):
			quote = c
		case (c == '[' || c == '{') && (depth > 0 || atValue && blankBefore):
			depth++
		case (c == ']' || c == '}') && depth > 0:
			depth--
		}
		if c != ' ' {
			prev = c
		}
	}
	return -1, quote != 0 || depth != 0
}

// linesClosed reports whether no line outside block scalars leaves a
// quote or a flow collection open for the next lines, where its text
// could read as keys. A document it refuses is only parsed, not
// identified.
func (p *fastParser) linesClosed() bool {
	parent, content := -1, -1 // while in a block scalar: the column it belongs to, and its content's
	for li := range p.lines {
		l := p.lines[li]
		if l.kind == lineBad {
			return false
		}
		if l.kind != lineContent {
			continue
		}
		if parent >= 0 && l.indent > parent {
			if content < 0 {
				content = l.indent
			}
			if l.indent < content {
				return false // less indented than the scalar's first line, more than its key
			}
			continue
		}
		parent, content = -1, -1
		t := p.text(li)
		if _, open := scanLine(t, l.indent); open {
			return false
		}
		parent = blockHeader(t, l.indent)
	}
	return true
}

// blockHeader returns the column of the key or entry whose value on line t
// is a block scalar ('|' or '>' and its indicators), whose content is on
// the next, deeper lines; -1 if the value is anything else.
func blockHeader(t []byte, col int) int {
	owner := col
	i := col
	for i < len(t) && t[i] == '-' && (i+1 == len(t) || t[i+1] == ' ') {
		owner = i
		i = skipSpaces(t, i+1)
	}
	if end := keyEnd(t, i); end >= 0 {
		owner = i
		i = skipSpaces(t, end+1)
	}
	if i == len(t) || t[i] != '|' && t[i] != '>' {
		return -1
	}
	return owner
}
