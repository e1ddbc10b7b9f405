package spec

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/internal/lib/yamlbound"
)

// MaxSpecSize bounds a spec document. Seeds carry kilobytes; a larger input
// is a mistake (or an attack on the YAML parser).
const MaxSpecSize = 16 << 20

// FieldYAML bounds a YAML document someone wrote in a field of a spec or
// of a platform object (user data, vendor data, network config, Butane,
// an annotation): its expansion through aliases, like a spec's, and its
// nodes, which vminit reads several times over (see yamlbound.MaxNodes).
var FieldYAML = yamlbound.Limits{Bytes: MaxSpecSize, Nodes: yamlbound.MaxNodes}

// MaxListEntries bounds each list of a spec (files, users, units,
// commands…), so that rendering one spec, which every output does in
// memory (and yaml.v3's emitter holds each event of a document until its
// end), stays within tens of megabytes and a second (docs/design.md,
// "Loading many specs").
const MaxListEntries = 10000

// MaxSourceFileSize bounds one files[].source.file.
const MaxSourceFileSize = 64 << 20

// Decode parses a spec document (YAML or JSON) strictly: an unknown or
// misspelled field is an error naming the field and its line, and every
// problem is reported, not only the first. It does not read source files or
// validate values; Load does all three.
//
// When the document parses but has bad fields, Decode returns the Errors
// together with the instance decoded as far as possible, so that callers
// can go on to report validation problems in the same pass.
func Decode(data []byte) (*Instance, *Positions, error) {
	return decode(data, true)
}

// decode is Decode, with the fast path optional so that tests can compare
// the two: the fast path decodes the plain documents it knows exactly, and
// hands any other to yaml.v3 (parseCareful) and the checks of decodeTree.
func decode(data []byte, fast bool) (*Instance, *Positions, error) {
	if len(data) > MaxSpecSize {
		return nil, nil, Errors{{Message: fmt.Sprintf("document is %d bytes; the limit is %d", len(data), MaxSpecSize)}}
	}
	var root *yaml.Node
	if fast {
		inst, tree, err := decodeFast(data)
		if err != nil {
			return nil, nil, err
		}
		if inst != nil {
			return inst, &Positions{src: data}, nil
		}
		root = tree
	}
	if root == nil {
		var err error
		if root, err = parseCareful(data); err != nil {
			return nil, nil, err
		}
	}
	return decodeTree(root)
}

// decodeFast decodes data with the fast parser. It returns the instance
// when the document is in the plain subset the parser knows exactly and
// decodes without surprise; otherwise the tree it parsed (nil if none) for
// the careful path to go on with, or the error of a document too large.
func decodeFast(data []byte) (*Instance, *yaml.Node, error) {
	p := parsers.Get().(*fastParser)
	root, tooLarge := p.parse(data) // nil unless the document is in the plain subset it knows exactly
	if tooLarge != nil {
		p.release()
		return nil, nil, Errors{tooLarge}
	}
	if root == nil {
		p.release()
		return nil, nil, nil
	}
	var inst Instance
	if fastDecode(root.Content[0], reflect.ValueOf(&inst).Elem()) {
		p.release()
		return &inst, nil, nil
	}
	// The careful path goes on with the tree: p stays out of the pool.
	return nil, root, nil
}

// parseCareful parses data with yaml.v3, bounded, and refuses a stream of
// more than one document.
func parseCareful(data []byte) (*yaml.Node, error) {
	// yaml.v3 builds the whole tree before anything can count it.
	if err := nodeBound(data); err != nil {
		return nil, Errors{err}
	}
	root := new(yaml.Node)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(root); err != nil && err != io.EOF {
		fe := syntaxError(err)
		fe.Line = breakingLine(data, fe)
		return nil, Errors{fe}
	}
	// yaml.v3 reads the first document of a stream and would drop
	// the others without a word; a spec file holds one Instance.
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if err == io.EOF {
			return root, nil
		}
		if err != nil {
			return nil, Errors{syntaxError(err)}
		}
		if len(next.Content) == 0 || next.Content[0].Tag == "!!null" {
			continue // an empty document, as a trailing "---" makes
		}
		return nil, Errors{{Line: next.Content[0].Line, Message: "a second YAML document: a spec holds one Instance; put each in a file of its own"}}
	}
}

// decodeTree checks a parsed document (a spec, bounded, no unknown
// fields) and decodes it, every problem located by its line.
func decodeTree(root *yaml.Node) (*Instance, *Positions, error) {
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, nil, Errors{{Message: "document is empty; want an Instance (apiVersion: " + APIVersion + ")"}}
	}
	doc := root.Content[0]
	if !looksLikeSpec(doc) {
		return nil, nil, Errors{{Line: doc.Line, Message: notASpec}}
	}
	// Aliases may expand a document far past its text (the fast path
	// takes none); the decoder below and every renderer would pay for it.
	if err := yamlbound.Check(doc, yamlbound.Limits{Bytes: MaxSpecSize}); err != nil {
		return nil, nil, Errors{boundError(err)}
	}
	if es := LongCollections(doc); len(es) > 0 {
		return nil, nil, es[:1] // as the fast path refuses it
	}
	pos := &Positions{doc: doc}
	var c ErrorList
	walkKnown(doc, instanceType, "", nil, &c)

	var inst Instance
	// Decode the tree already parsed: parsing twice was most of the cost
	// of loading a large directory of specs. walkKnown has reported the
	// unknown fields, so the decoder's own KnownFields is not needed.
	if err := doc.Decode(&inst); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, nil, Errors{syntaxError(err)}
		}
		for _, msg := range te.Errors {
			c.list = append(c.list, typeError(msg, pos))
		}
	}
	sortByLine(c.list)
	return &inst, pos, c.Err()
}

var instanceType = reflect.TypeFor[Instance]()

const notASpec = "not a vminit spec: want a mapping with apiVersion: " + APIVersion + ", kind: Instance, metadata and spec (nothing of this document is quoted: it may not be meant to be read)"

// looksLikeSpec reports whether a document is a mapping with at least one
// of the Instance's top-level keys. Anything else is refused whole,
// without a word of its content: a file that is no spec at all (a link to
// /etc/shadow or to a token, dropped in a spec directory) must not have
// its lines quoted back in "unknown field" errors and logs.
func looksLikeSpec(doc *yaml.Node) bool {
	if doc.Kind == yaml.AliasNode {
		doc = doc.Alias
	}
	if doc == nil || doc.Kind != yaml.MappingNode {
		return false
	}
	fields := yamlFields(instanceType)
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if _, ok := fields[doc.Content[i].Value]; ok {
			return true
		}
	}
	return false
}

// Loader reads specs, and the files they take content from. Its zero value
// is what Load and Parse use.
type Loader struct {
	// SourceRoot is the directory files[].source.file may read from, once
	// every symbolic link is followed. Empty means the spec's own
	// directory (Parse's dir): a spec from someone else must not make its
	// reader put /etc/shadow or ../admin-token on a seed. Files of /proc,
	// /sys, FIFOs and devices are refused whatever the root.
	SourceRoot string
	// Refs reads the Secrets and ConfigMaps the spec refers to
	// (secretKeyRef, configMapKeyRef), in the Instance's namespace; nil
	// makes each such reference a problem saying what to pass.
	Refs Refs
	// IdentifiedByPlatform says the reader identifies an instance without
	// its spec.metadataServer.addresses (a cluster: by the addresses of
	// the VirtualMachineInstances naming it, kuberules.Claims), so that a
	// metadataServer block may leave them out to set its options alone
	// (imdsv2, tokenHopLimit, …). Elsewhere they are required.
	IdentifiedByPlatform bool
}

// Load reads a spec file and parses it as Parse does, with
// files[].source.file relative to the spec's directory and confined to it.
// On failure it returns Errors carrying the file name and line of each
// problem.
func Load(path string) (*Instance, error) { return Loader{}.Load(path) }

// Load is the package's Load with l's source root.
func (l Loader) Load(path string) (*Instance, error) {
	_, inst, err := l.LoadData(path)
	return inst, err
}

// LoadData is Load that also returns the document read, so that problems
// found later (by a renderer) can be given their line (Decode's
// Positions).
func (l Loader) LoadData(path string) ([]byte, *Instance, error) {
	data, err := inputfile.Read(path, MaxSpecSize)
	if err != nil {
		return nil, nil, err
	}
	inst, err := l.Parse(data, filepath.Dir(path))
	for _, e := range AsErrors(err) {
		e.File = path
	}
	return data, inst, err
}

// Parse decodes a spec document strictly, resolves files[].source.file
// (relative to dir) and contentBase64, fills in defaults and validates the
// result, reporting every problem of every stage together, each with its
// line.
//
// Source files are read only from inside dir (see Loader.SourceRoot). An
// empty dir refuses files[].source.file: a document that arrives over an
// API must not make its receiver read its own files (a document naming
// /etc/shadow would otherwise hand it out).
func Parse(data []byte, dir string) (*Instance, error) { return Loader{}.Parse(data, dir) }

// Parse is the package's Parse with l's source root.
func (l Loader) Parse(data []byte, dir string) (*Instance, error) {
	inst, pos, err := Decode(data)
	if inst == nil {
		return nil, err
	}
	all := AsErrors(err)
	if dir == "" {
		for i, f := range inst.Spec.Files {
			if f.Source != nil && f.Source.File != "" {
				all = append(all, &FieldError{Field: fmt.Sprintf("spec.files[%d].source.file", i),
					Message: "not allowed in a document sent over an API (the admin API, etcd): inline the content with content or contentBase64 (`vminit instances put` does this for local files)"})
				inst.Spec.Files[i].Source = nil
			}
		}
	}
	root := l.SourceRoot
	if root == "" {
		root = dir
	}
	all = append(all, AsErrors(inst.resolveWith(dir, root, l.Refs))...)
	inst.Default()
	all = append(all, dropShadowed(AsErrors(inst.validate(l.IdentifiedByPlatform)), all)...)
	if len(all) == 0 {
		return inst, nil
	}
	for _, e := range all {
		if e.Line == 0 {
			e.Line = pos.Line(e.Field)
		}
	}
	sortByLine(all)
	return nil, all
}

// dropShadowed removes validation errors about fields that already failed
// to decode: a mistyped field decodes as its zero value, and "required" on
// top of "want a number" would only be noise.
func dropShadowed(verrs, decoded Errors) Errors {
	var out Errors
	for _, v := range verrs {
		shadowed := false
		for _, d := range decoded {
			if d.Field != "" && (v.Field == d.Field || strings.HasPrefix(v.Field, d.Field+".") || strings.HasPrefix(v.Field, d.Field+"[")) {
				shadowed = true
				break
			}
		}
		if !shadowed {
			out = append(out, v)
		}
	}
	return out
}

// Resolve reads each files[].source.file and each reference's file
// (relative to dir, and only from inside it) and decodes each
// contentBase64, so that File.Data is the content to write. References to
// Secrets and ConfigMaps are left as they are, for the cluster that
// receives the spec to resolve (v1alpha1.FromSpec keeps them).
func (in *Instance) Resolve(dir string) error { return in.resolveWith(dir, dir, keepRefs{}) }

// resolveWith is resolve with the Secrets and ConfigMaps of refs (nil:
// none, and a reference to one is a problem saying what to pass).
func (in *Instance) resolveWith(dir, root string, refs Refs) error {
	var c ErrorList
	readFile := func(c *ErrorList, field, name string) ([]byte, bool) {
		return readSourceFile(c, dir, root, field, name)
	}
	for i := range in.Spec.Files {
		f := &in.Spec.Files[i]
		field := fmt.Sprintf("spec.files[%d]", i)
		switch {
		case f.Content != nil:
			f.data = []byte(*f.Content)
		case f.ContentBase64 != "":
			b, err := base64.StdEncoding.DecodeString(f.ContentBase64)
			if err != nil {
				c.Add(field+".contentBase64", "not valid base64: %v", err)
				continue
			}
			f.data = b
		}
	}
	// Sources, as every other reference.
	in.resolveRefs(&c, refs, readFile)
	return c.Err()
}

// readSourceFile reads a file a spec names (files[].source.file, a
// reference's file), relative to dir and only from inside root, or adds
// why it cannot to c under field. An empty dir refuses it: the document
// came over an API.
func readSourceFile(c *ErrorList, dir, root, field, name string) ([]byte, bool) {
	if dir == "" {
		c.Add(field, "not allowed in a document sent over an API (the admin API, etcd, Kubernetes): the server never reads its own files; inline the value, or refer to a Secret")
		return nil, false
	}
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	b, err := inputfile.ReadIn(root, p, MaxSourceFileSize)
	switch {
	case errors.Is(err, inputfile.ErrOutside):
		c.Add(field, "%s is outside %s, the directory source files are read from; move the file there, or name a wider source root (vminit: --source-root DIR)", name, root)
		return nil, false
	case err != nil:
		c.Add(field, "%v", unwrapPathError(err))
		return nil, false
	}
	return b, true
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot read %s: %v", pe.Path, pe.Err)
	}
	return err
}

// Positions maps field paths to the lines they were written on.
type Positions struct {
	doc *yaml.Node
	src []byte // parsed again for doc if needed: the fast path lends its tree out only for the decode
	// lines is filled from doc when first asked for: most documents are
	// valid, and never need a line.
	once  sync.Once
	lines map[string]int
}

func (p *Positions) all() map[string]int {
	p.once.Do(func() {
		p.lines = map[string]int{}
		if p.doc == nil && p.src != nil {
			if root := fastParse(p.src); root != nil {
				p.doc = root.Content[0]
			}
		}
		if p.doc != nil {
			walkKnown(p.doc, instanceType, "", p, &ErrorList{})
		}
	})
	return p.lines
}

// Line returns the line of field, or of its nearest ancestor that has one.
func (p *Positions) Line(field string) int {
	if p == nil {
		return 0
	}
	lines := p.all()
	for field != "" {
		if l, ok := lines[field]; ok {
			return l
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			break
		}
		field = field[:i]
	}
	return 0
}

// walkKnown reports keys that the Go type t does not have and, when pos is
// not nil, records the line of every field. yaml.v3's own KnownFields stops
// at type level and reports no path; walking the node tree names the exact
// field.
func walkKnown(n *yaml.Node, t reflect.Type, path string, pos *Positions, c *ErrorList) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if pos != nil && path != "" {
		if _, seen := pos.lines[path]; !seen {
			pos.lines[path] = n.Line
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the type mismatch
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			child := join(path, k.Value)
			f, ok := fields[k.Value]
			if !ok {
				msg := "unknown field"
				if s := suggest(k.Value, fields); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				c.list = append(c.list, &FieldError{Field: join(path, yamlbound.QuoteKey(k.Value)), Line: k.Line, Message: msg})
				continue
			}
			if givenBefore(n, i) {
				c.list = append(c.list, &FieldError{Field: child, Line: k.Line, Message: "field given twice"})
			}
			if pos != nil {
				pos.lines[child] = k.Line
			}
			walkKnown(v, f.typ, child, pos, c)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode || t.Elem().Kind() == reflect.Interface {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			child := join(path, n.Content[i].Value)
			if pos != nil {
				pos.lines[child] = n.Content[i].Line
			}
			walkKnown(n.Content[i+1], t.Elem(), child, pos, c)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, e := range n.Content {
			walkKnown(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", pos, c)
		}
	}
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// givenBefore reports whether the key at n.Content[i] is an earlier key's
// repeat. Mappings in a spec have a handful of keys: a scan beats a map.
func givenBefore(n *yaml.Node, i int) bool {
	for j := 0; j < i; j += 2 {
		if n.Content[j].Value == n.Content[i].Value {
			return true
		}
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlField is a struct field as YAML names it.
type yamlField struct {
	typ   reflect.Type
	index []int // for reflect.Value.FieldByIndex: inline fields are nested
}

// yamlFields maps a struct's YAML keys to their fields, flattening inline
// embedded structs.
func yamlFields(t reflect.Type) map[string]yamlField {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]yamlField)
	}
	m := structFields(t)
	fieldCache.Store(t, m)
	return m
}

var fieldCache sync.Map // reflect.Type → map[string]yamlField

func structFields(t reflect.Type) map[string]yamlField {
	m := map[string]yamlField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				m[k] = yamlField{v.typ, append([]int{i}, v.index...)}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = yamlField{f.Type, []int{i}}
	}
	return m
}

// suggest returns the known key closest to k, if it is close enough to be a
// likely typo (case differences, a few edits).
func suggest(k string, fields map[string]yamlField) string {
	best, bestD := "", 4
	for name := range fields {
		if strings.EqualFold(name, k) {
			return name
		}
		if d := editDistance(strings.ToLower(k), strings.ToLower(name)); d < bestD || d == bestD && name < best {
			best, bestD = name, d
		}
	}
	if bestD <= len(k)/2 {
		return best
	}
	// sshKeys for sshAuthorizedKeys: a known name sharing the typed one's
	// beginning and end.
	lk := strings.ToLower(k)
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		ln := strings.ToLower(name)
		if len(lk) >= 3 && strings.HasPrefix(ln, lk[:3]) && strings.HasSuffix(ln, lk[len(lk)-3:]) {
			return name
		}
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// boundError is yamlbound.Check's refusal as a FieldError on the field
// where the expansion crossed the limit.
func boundError(err error) *FieldError {
	var be *yamlbound.Error
	if errors.As(err, &be) {
		return &FieldError{Field: be.Path, Line: be.Line, Message: fmt.Sprintf("aliases expand the document past %d bytes, the limit of a spec; write it out without anchors and aliases, or make it smaller", be.Limit)}
	}
	return syntaxError(err)
}

var lineRE = lazyre.New(`^(?:yaml: )?line (\d+): (.*)$`)

func syntaxError(err error) *FieldError {
	msg := err.Error()
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		l, _ := strconv.Atoi(m[1])
		return &FieldError{Line: l, Message: "YAML syntax: " + m[2]}
	}
	return &FieldError{Message: strings.TrimPrefix(msg, "yaml: ")}
}

// breakingLine is the line that breaks a document yaml.v3 refused with fe.
// yaml.v3 names the line where the enclosing block starts ("did not find
// expected key" on a mapping's first line), not the line that broke it,
// often an indentation several lines down. The shortest prefix of the
// document, in whole lines, that fails with the same message ends with
// that line. The search is bounded (lines and bytes parsed): past the
// bound, yaml.v3's line stays.
func breakingLine(data []byte, fe *FieldError) int {
	const maxLines, maxBytes = 200, 8 << 20
	if fe.Line < 1 {
		return fe.Line
	}
	// end[n] is the length of the document's first n lines.
	end := []int{0}
	for i, c := range data {
		if c == '\n' {
			end = append(end, i+1)
		}
	}
	end = append(end, len(data))
	parsed := 0
	for n := fe.Line; n < len(end) && n < fe.Line+maxLines && parsed < maxBytes; n++ {
		var node yaml.Node
		err := yaml.Unmarshal(data[:end[n]], &node)
		parsed += end[n]
		if err != nil && syntaxError(err).Message == fe.Message {
			return n
		}
	}
	return fe.Line
}

// typeError turns one of yaml.v3's "line N: cannot unmarshal …" messages
// into a FieldError naming the field on that line.
func typeError(msg string, pos *Positions) *FieldError {
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return &FieldError{Message: msg}
	}
	l, _ := strconv.Atoi(m[1])
	text := m[2]
	if t := unmarshalRE.FindStringSubmatch(text); t != nil {
		text = fmt.Sprintf("want %s, got %s %s", goTypeName(t[3]), yamlKindName(t[1]), t[2])
	}
	// The field on that line: the deepest path recorded there.
	field := ""
	for p, pl := range pos.all() {
		if pl == l && (len(p) > len(field) || len(p) == len(field) && p < field) {
			field = p
		}
	}
	return &FieldError{Line: l, Field: field, Message: text}
}

var unmarshalRE = lazyre.New("^cannot unmarshal !!(\\w+) (?:`(.*)` )?into (.+)$")

func yamlKindName(tag string) string {
	switch tag {
	case "str":
		return "the string"
	case "int", "float":
		return "the number"
	case "bool":
		return "the boolean"
	case "map":
		return "a mapping"
	case "seq":
		return "a list"
	}
	return tag
}

func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "spec."):
		return "a mapping"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"), strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	}
	return t
}

func sortByLine(es Errors) {
	key := func(e *FieldError) int {
		if e.Line == 0 {
			return math.MaxInt // problems without a line go last, in their order
		}
		return e.Line
	}
	sort.SliceStable(es, func(i, j int) bool { return key(es[i]) < key(es[j]) })
}
