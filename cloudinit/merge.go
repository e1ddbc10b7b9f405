package cloudinit

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/internal/lib/yaml11"
)

// This file reimplements cloud-init's mergers (cloudinit/mergers/m_dict.py,
// m_list.py, m_str.py and the LookupMerger in __init__.py) and the way
// handlers/cloud_config.py picks them for a #cloud-config part, so that a
// user's document merged here means what it would mean as the second part
// of a multipart message. Where cloud-init would raise, and so skip the
// whole part with a warning in its log, this code returns an error instead:
// a silently ignored part is exactly what a user should learn about before
// the VM boots.

// DefaultMergeHow is what cloud-init merges a #cloud-config part with when
// the part names no merge_how, merge_type or Merge-Type header
// (handlers/cloud_config.py DEF_MERGERS): a key given again replaces the
// earlier value entirely, lists included.
const DefaultMergeHow = "dict(replace)+list()+str()"

// MergeCloudConfig merges the #cloud-config document overlay into base with
// cloud-init's merge rules, as if base were the first part of a multipart
// user-data and overlay the second. overlay's merge_how (or merge_type) key
// selects the mergers; without one, DefaultMergeHow applies. Both arguments
// are whole documents (the "#cloud-config" line is a YAML comment); the
// result starts with "#cloud-config".
//
// An overlay that is empty or null leaves base unchanged, as cloud-init
// skips such a part.
func MergeCloudConfig(base, overlay []byte) ([]byte, error) {
	b, err := normalize(base)
	if err != nil {
		return nil, fmt.Errorf("base document %w", err)
	}
	if b == nil {
		b = yaml11.Mapping()
	}
	o, err := normalize(overlay)
	if err != nil {
		return nil, fmt.Errorf("document %w", err)
	}
	merged := b
	if o != nil {
		if merged, err = mergeDocs(b, o); err != nil {
			return nil, err
		}
	}
	return marshalCloudConfig(merged)
}

// mergeDocs merges the normalized overlay mapping into base. overlay loses
// its merge_how/merge_type key, as cloud-init pops it.
func mergeDocs(base, overlay *yaml.Node) (*yaml.Node, error) {
	specs, err := extractMergers(overlay)
	if err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		specs, _ = parseMergeString(DefaultMergeHow)
	}
	root, err := construct(specs)
	if err != nil {
		return nil, err
	}
	merged, err := root.merge(base, overlay)
	if err != nil {
		return nil, err
	}
	// A merge_type left over when merge_how was also given (or a key that
	// came in through recursion) would, in the single merged document,
	// be taken by cloud-init as that document's own merge rule for merging
	// into nothing, and the wrong rule there drops everything. cloud-init
	// gives those keys no other meaning, so they go.
	if i := indexOfKey(merged, "smerge_how"); i >= 0 || indexOfKey(merged, "smerge_type") >= 0 {
		cp := *merged
		cp.Content = slices.Clone(merged.Content)
		popKey(&cp, "merge_how")
		popKey(&cp, "merge_type")
		merged = &cp
	}
	return merged, nil
}

// mergerSpec is one parsed merger: its name and its options.
type mergerSpec struct {
	name string
	opts options
}

// options mirrors the Python object a merger checks with `"x" in opts`: a
// list (membership) or, when a user writes settings as a string, a string
// (substring test).
type options struct {
	list   []string
	substr string
	isStr  bool
}

func (o options) has(s string) bool {
	if o.isStr {
		return strings.Contains(o.substr, s)
	}
	return slices.Contains(o.list, s)
}

// extractMergers pops merge_how, or failing that merge_type, from the
// document and parses it (mergers.dict_extract_mergers).
func extractMergers(doc *yaml.Node) ([]mergerSpec, error) {
	raw := popKey(doc, "merge_how")
	if raw == nil || kindOf(raw) == pyNull {
		raw = popKey(doc, "merge_type")
	}
	if raw == nil || kindOf(raw) == pyNull {
		return nil, nil
	}
	switch kindOf(raw) {
	case pyStr:
		return parseMergeString(raw.Value)
	case pyList:
	default:
		return nil, fmt.Errorf("merge_how must be a string such as %q or a list of mergers", DefaultMergeHow)
	}
	var specs []mergerSpec
	for _, m := range raw.Content {
		var name string
		var opts options
		switch kindOf(m) {
		case pyDict:
			nameNode, settings := lookup(m, "name"), lookup(m, "settings")
			if nameNode == nil || kindOf(nameNode) != pyStr {
				return nil, fmt.Errorf("merge_how entry on line %d: name must be a string (dict, list or str)", m.Line)
			}
			if settings == nil {
				return nil, fmt.Errorf("merge_how entry on line %d: settings is required (cloud-init fails without it)", m.Line)
			}
			name = strings.TrimSpace(strings.ReplaceAll(nameNode.Value, "-", "_"))
			var err error
			if opts, err = optionsOf(settings); err != nil {
				return nil, fmt.Errorf("merge_how entry on line %d: settings %v", m.Line, err)
			}
		case pyList:
			if len(m.Content) == 0 {
				return nil, fmt.Errorf("merge_how entry on line %d is empty", m.Line)
			}
			if first := m.Content[0]; kindOf(first) != pyStr {
				if pyFalsy(first) {
					continue // Python's `if name:` skips the entry
				}
				return nil, fmt.Errorf("merge_how entry on line %d: the merger name must be a string", m.Line)
			}
			name = m.Content[0].Value
			for _, o := range m.Content[1:] {
				if kindOf(o) == pyStr {
					opts.list = append(opts.list, o.Value)
				}
			}
		case pyStr:
			// Python takes m[0] as the name and m[1:] as the options: a
			// string entry is split into its first character and the rest.
			r, size := utf8.DecodeRuneInString(m.Value)
			if size == 0 {
				return nil, fmt.Errorf("merge_how entry on line %d is empty", m.Line)
			}
			name, opts = string(r), options{substr: m.Value[size:], isStr: true}
		default:
			return nil, fmt.Errorf("merge_how entry on line %d: want {name: …, settings: […]} or [name, option…]", m.Line)
		}
		if name != "" {
			specs = append(specs, mergerSpec{name, opts})
		}
	}
	return specs, nil
}

func optionsOf(n *yaml.Node) (options, error) {
	var o options
	switch kindOf(n) {
	case pyStr:
		return options{substr: n.Value, isStr: true}, nil
	case pyList:
		for _, c := range n.Content {
			if kindOf(c) == pyStr {
				o.list = append(o.list, c.Value)
			}
		}
	case pyDict:
		for i := 0; i < len(n.Content); i += 2 {
			if kindOf(n.Content[i]) == pyStr {
				o.list = append(o.list, n.Content[i].Value)
			}
		}
	default:
		return o, fmt.Errorf("must be a list of options such as [append, recurse_dict]")
	}
	return o, nil
}

// parseMergeString parses "dict(replace)+list(append)"
// (mergers.string_extract_mergers).
func parseMergeString(s string) ([]mergerSpec, error) {
	var specs []mergerSpec
	for _, m := range strings.Split(s, "+") {
		m = strings.ReplaceAll(strings.TrimSpace(strings.ToLower(m)), "-", "_")
		if m == "" {
			continue
		}
		g := mergeNameRE.FindStringSubmatch(m)
		if g == nil {
			return nil, fmt.Errorf("merge_how: %q is not in the form name(option,…), e.g. list(append)", m)
		}
		var opts options
		for _, o := range strings.Split(strings.TrimSpace(g[2]), ",") {
			if o = strings.ToLower(strings.TrimSpace(o)); o != "" {
				opts.list = append(opts.list, o)
			}
		}
		specs = append(specs, mergerSpec{g[1], opts})
	}
	return specs, nil
}

// mergeNameRE is mergers.NAME_MTCH.
var mergeNameRE = lazyre.New(`^([a-zA-Z_][A-Za-z0-9_]*)\((.*?)\)$`)

// merger is one of cloud-init's three merger classes.
type merger struct {
	kind string // "dict", "list" or "str"

	method       string // dict: replace|no_replace; list: append|prepend|replace|no_replace
	recurseStr   bool
	recurseArray bool
	recurseDict  bool
	allowDelete  bool
	appendStr    bool
}

// lookupMerger is mergers.LookupMerger: it hands a value to the first
// merger that has a method for the value's type, and keeps the value
// unchanged when none has.
type lookupMerger struct{ mergers []*merger }

func construct(specs []mergerSpec) (*lookupMerger, error) {
	root := &lookupMerger{}
	for _, s := range specs {
		kind := strings.TrimPrefix(s.name, "m_")
		m := &merger{kind: kind}
		switch kind {
		case "dict":
			m.method = firstOf(s.opts, "no_replace", "replace", "no_replace")
			m.recurseStr = s.opts.has("recurse_str")
			m.recurseArray = s.opts.has("recurse_array") || s.opts.has("recurse_list")
			m.allowDelete = s.opts.has("allow_delete")
			m.recurseDict = true // "Backwards compat require this to be on."
		case "list":
			m.method = firstOf(s.opts, "replace", "append", "prepend", "replace", "no_replace")
			m.recurseStr = s.opts.has("recurse_str")
			m.recurseDict = s.opts.has("recurse_dict")
			m.recurseArray = s.opts.has("recurse_array") || s.opts.has("recurse_list")
		case "str":
			m.appendStr = s.opts.has("append")
		default:
			return nil, fmt.Errorf("merge_how: unknown merger %q (cloud-init has dict, list and str)", s.name)
		}
		root.mergers = append(root.mergers, m)
	}
	return root, nil
}

// firstOf returns the first of the methods (in the merger's MERGE_TYPES
// order) that opts contains, or def.
func firstOf(opts options, def string, methods ...string) string {
	for _, m := range methods {
		if opts.has(m) {
			return m
		}
	}
	return def
}

func (r *lookupMerger) find(kind string) *merger {
	for _, m := range r.mergers {
		if m.kind == kind {
			return m
		}
	}
	return nil
}

// merge is LookupMerger.merge: dispatch on the type of the existing value.
func (r *lookupMerger) merge(value, with *yaml.Node) (*yaml.Node, error) {
	var m *merger
	switch kindOf(value) {
	case pyDict:
		m = r.find("dict")
	case pyList:
		m = r.find("list")
	case pyStr:
		m = r.find("str")
	}
	if m == nil {
		return value, nil
	}
	switch m.kind {
	case "dict":
		return m.onDict(r, value, with)
	case "list":
		return m.onList(r, value, with)
	}
	return m.onStr(value, with)
}

func (m *merger) onDict(r *lookupMerger, value, with *yaml.Node) (*yaml.Node, error) {
	if kindOf(with) != pyDict {
		return value, nil
	}
	out := *value
	out.Content = slices.Clone(value.Content)
	for i := 0; i+1 < len(with.Content); i += 2 {
		k, v := with.Content[i], with.Content[i+1]
		key, _ := pyKey(k)
		j := indexOfKey(&out, key)
		if j < 0 {
			out.Content = append(out.Content, k, v)
			continue
		}
		if kindOf(v) == pyNull && m.allowDelete {
			out.Content = slices.Delete(out.Content, j, j+2)
			continue
		}
		nv, err := m.mergeSameKey(r, out.Content[j+1], v)
		if err != nil {
			return nil, err
		}
		out.Content[j+1] = nv
	}
	return &out, nil
}

func (m *merger) mergeSameKey(r *lookupMerger, old, new *yaml.Node) (*yaml.Node, error) {
	if m.method == "replace" {
		return new, nil
	}
	return m.recurseOr(r, old, new, old)
}

// recurseOr merges new into old when the merger's recurse_* setting covers
// new's kind, and otherwise returns keep: m_dict keeps the old value for a
// key, m_list takes the new one for an index.
func (m *merger) recurseOr(r *lookupMerger, old, new, keep *yaml.Node) (*yaml.Node, error) {
	switch kindOf(new) {
	case pyList:
		if m.recurseArray {
			return r.merge(old, new)
		}
	case pyStr:
		if m.recurseStr {
			return r.merge(old, new)
		}
	case pyDict:
		if m.recurseDict {
			return r.merge(old, new)
		}
	}
	return keep, nil
}

func (m *merger) onList(r *lookupMerger, value, with *yaml.Node) (*yaml.Node, error) {
	wk := kindOf(with)
	if m.method == "replace" && wk != pyList {
		return with, nil
	}
	items, err := iterate(with)
	if err != nil {
		return nil, err
	}
	out := *value
	switch m.method {
	case "prepend":
		out.Content = append(slices.Clone(items), value.Content...)
		return &out, nil
	case "append":
		out.Content = append(slices.Clone(value.Content), items...)
		return &out, nil
	}
	out.Content = slices.Clone(value.Content)
	common := min(len(out.Content), len(items))
	if wk == pyDict && common > 0 {
		// Python indexes the dict with 0, 1, … and raises KeyError.
		return nil, fmt.Errorf("line %d: cloud-init cannot merge a mapping into a list with %s", with.Line, m.method)
	}
	for i := range common {
		if m.method == "no_replace" {
			continue
		}
		nv, err := m.recurseOr(r, out.Content[i], items[i], items[i])
		if err != nil {
			return nil, err
		}
		out.Content[i] = nv
	}
	return &out, nil
}

// iterate is Python's iteration of a value being merged into a list: a
// list's items, a string's characters, a dict's keys; anything else raises.
func iterate(n *yaml.Node) ([]*yaml.Node, error) {
	switch kindOf(n) {
	case pyList:
		return n.Content, nil
	case pyStr:
		var chars []*yaml.Node
		for _, r := range n.Value {
			chars = append(chars, yaml11.String(string(r)))
		}
		return chars, nil
	case pyDict:
		var keys []*yaml.Node
		for i := 0; i < len(n.Content); i += 2 {
			keys = append(keys, n.Content[i])
		}
		return keys, nil
	}
	return nil, fmt.Errorf("line %d: cloud-init cannot merge %s into a list (it raises TypeError and skips the whole part)", n.Line, kindOf(n))
}

func (m *merger) onStr(value, with *yaml.Node) (*yaml.Node, error) {
	if !m.appendStr {
		return with, nil
	}
	if kindOf(with) != pyStr {
		return nil, fmt.Errorf("line %d: cloud-init cannot append %s to a string", with.Line, kindOf(with))
	}
	return yaml11.String(value.Value + with.Value), nil
}

func indexOfKey(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k, _ := pyKey(m.Content[i]); k == key {
			return i
		}
	}
	return -1
}

// lookup returns the value of the string key in mapping m, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if i := indexOfKey(m, "s"+key); i >= 0 {
		return m.Content[i+1]
	}
	return nil
}

// popKey removes the string key from mapping m and returns its value, or
// nil when absent.
func popKey(m *yaml.Node, key string) *yaml.Node {
	i := indexOfKey(m, "s"+key)
	if i < 0 {
		return nil
	}
	v := m.Content[i+1]
	m.Content = slices.Delete(m.Content, i, i+2)
	return v
}

// marshalCloudConfig writes a mapping as a #cloud-config document.
func marshalCloudConfig(doc *yaml.Node) ([]byte, error) {
	if len(doc.Content) == 0 {
		// yaml.v3 writes an empty block mapping as "{}"; that is valid,
		// but an empty document reads better.
		return []byte("#cloud-config\n{}\n"), nil
	}
	body, err := yaml11.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("#cloud-config\n"), body...), nil
}

// pyFalsy reports whether the Python value of n is false in a boolean
// context: None, False, 0, 0.0, "" or an empty collection.
func pyFalsy(n *yaml.Node) bool {
	switch kindOf(n) {
	case pyNull:
		return true
	case pyStr:
		return n.Value == ""
	case pyList, pyDict:
		return len(n.Content) == 0
	}
	k, _ := pyKey(n)
	return k == "i0" || k == "f0" || k == "f-0"
}
