package spec

import (
	"fmt"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yamlbound"
)

// A spec's parse is bounded by its collections as well as by its size:
// 16 MiB of "-\n" is 8 million list entries, and a parsed node costs
// hundreds of bytes (4 million entries took 1.5 GB before the list limit
// refused them). Every list and mapping of a spec holds at most
// MaxListEntries entries, and the document at most MaxSpecNodes nodes.
// The fast parser counts as it builds and stops at the first collection
// or node past them. yaml.v3, which builds its whole tree before anyone
// can look at it, only gets documents whose separators bound their nodes
// within MaxSpecNodes (nodeBound); its tree is then checked for long
// collections (LongCollections).

// MaxSpecNodes bounds the nodes (scalars, keys, lists, mappings) of a spec
// document. 10,000 files of a path, a mode and a content are 90,000; a
// million parsed nodes cost about 300 MB on either parser.
const MaxSpecNodes = 1_000_000

// listAdvice is what to do with a list past MaxListEntries.
const listAdvice = "first-boot data is read and applied in one go: ship bulk content as an archive that a command unpacks"

// tooManyEntries is the error for a collection past MaxListEntries, at
// field (its path) on line (its key's).
func tooManyEntries(field string, line int) *FieldError {
	return &FieldError{Field: field, Line: line,
		Message: fmt.Sprintf("more than %d entries, the limit of each list or mapping of a spec or platform object (%s)", MaxListEntries, listAdvice)}
}

// tooManyNodes is the error for a document past MaxSpecNodes, crossed at
// field on line.
func tooManyNodes(field string, line int) *FieldError {
	return &FieldError{Field: field, Line: line,
		Message: fmt.Sprintf("the document holds more than %d values (keys, entries, scalars) by this line, the limit of a spec; make it smaller", MaxSpecNodes)}
}

// nodeBound refuses a document from which yaml.v3 might build more than
// MaxSpecNodes nodes, before it builds any. Every node but a document's
// own and its root follows a separator: a flow indicator ('[', '{', ','),
// a block indicator ('-', '?', ':') or a line break, and one separator
// brings at most two nodes ("? k" is a key and its empty value, "[k: v]" a
// mapping, a key and a value for two). So 2 + 2×(separator bytes) bounds
// the nodes of any document, with no need to tell quotes, comments or
// block scalars from structure, which only a full parser can. A spec the
// fast parser declines (anchors, tags, folded scalars, JSON over lines)
// with more than half a million such bytes is refused: the fast parser,
// which counts exactly, takes hand-written and generated specs of any
// size up to MaxSpecSize.
func nodeBound(data []byte) *FieldError {
	if line := boundPassed(data, MaxSpecNodes); line > 0 {
		return &FieldError{Line: line, Message: fmt.Sprintf("by this line the document may hold more than %d values, the limit of a spec, as counted before parsing: 2 for each of , [ { - ? : and line break; make it smaller, or write it in plain block style (no anchors, tags, folded scalars or flow collections over several lines), which is counted exactly", MaxSpecNodes)}
	}
	return nil
}

// boundPassed returns the line on which 2 + 2×(separator bytes) passes
// limit, or 0 if it does not.
func boundPassed(data []byte, limit int) int {
	bound, line := 2, 1 // the document node and its root
	if bound > limit {
		return line
	}
	for _, c := range data {
		switch c {
		case '\n':
			line++
		case '[', '{', ',', '-', '?', ':':
		default:
			continue
		}
		if bound += 2; bound > limit {
			return line
		}
	}
	return 0
}

// LongCollections returns an error for each list or mapping under n
// past MaxListEntries entries, naming it by its path and its key's line,
// in the order the fast parser meets them: a collection is checked after
// each of its entries, once the entry (and whatever it holds) is complete,
// so the first error is the one both of a spec's parsers stop at. A
// collection past the limit is not looked into further. Aliases are not
// followed: yamlbound.Check bounds them. The platform readers hold their
// objects to the same rule.
func LongCollections(n *yaml.Node) Errors {
	var es Errors
	longCollections(n, "", n.Line, &es)
	return es
}

func longCollections(n *yaml.Node, path string, line int, es *Errors) {
	for i, c := range n.Content {
		entries := 0
		switch n.Kind {
		case yaml.DocumentNode:
			longCollections(c, path, c.Line, es)
		case yaml.SequenceNode:
			longCollections(c, path+"["+strconv.Itoa(i)+"]", c.Line, es)
			entries = i + 1
		case yaml.MappingNode:
			if i%2 == 1 {
				k := n.Content[i-1]
				longCollections(c, join(path, yamlbound.QuoteKey(k.Value)), k.Line, es)
				entries = (i + 1) / 2
			}
		}
		if entries > MaxListEntries {
			*es = append(*es, tooManyEntries(path, line))
			return
		}
	}
}
