package capi

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	butane "github.com/coreos/butane/config"
	butanecommon "github.com/coreos/butane/config/common"
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/spec"
)

// A Container Linux Config (CLC), what CABPK's
// ignition.containerLinuxConfig.additionalConfig holds, is read by Flatcar's
// config transpiler into Ignition 2.3. vminit translates it, key by key,
// into its successor, Butane's flatcar variant (Ignition 3), where the two
// differ: contents.remote becomes contents.source with its compression and
// verification, filesystem: root (the only filesystem files can name
// without a CLC filesystem path) is dropped, files keep Ignition 2's
// overwrite default (true) and append, storage.filesystems lose their
// mount: level, partition sizes become MiB, ignition.config.append becomes
// merge, networkd units become files in /etc/systemd/network (where
// Ignition 2 writes them), systemd's enable becomes enabled and a user's
// create is flattened.
//
// What the transpiler would use and vminit cannot translate is an error
// naming the key and its line: the guest would not get what CABPK gives
// it. A key the transpiler does not know is a warning, as it is in CABPK
// (an error with strict: true, as CABPK refuses it then).

// clcRule says what one CLC key becomes.
type clcRule struct {
	to   string                                         // the Butane key; "" for the same
	sub  map[string]clcRule                             // the value is a mapping of these keys
	list bool                                           // the value is a list (of sub mappings, when sub is set)
	fn   func(*clcConv, string, *yaml.Node, *yaml.Node) // converts the value into the output mapping
	// refuse says why vminit cannot translate the key: what CABPK does
	// with it.
	refuse string
}

var (
	clcKeep     = clcRule{}
	clcOwner    = clcRule{sub: map[string]clcRule{"id": clcKeep, "name": clcKeep}}
	clcHash     = clcRule{fn: (*clcConv).hash}
	clcVerified = map[string]clcRule{"source": clcKeep, "verification": {sub: map[string]clcRule{"hash": clcHash}}}
	clcRootFS   = clcRule{fn: (*clcConv).rootFilesystem}
)

var clcSchema = map[string]clcRule{
	"version": {fn: (*clcConv).version},
	"ignition": {sub: map[string]clcRule{
		"config": {sub: map[string]clcRule{
			"append":  {to: "merge", list: true, sub: clcVerified},
			"replace": {sub: clcVerified},
		}},
		"timeouts": {sub: map[string]clcRule{"http_response_headers": clcKeep, "http_total": clcKeep}},
		"security": {sub: map[string]clcRule{"tls": {sub: map[string]clcRule{
			"certificate_authorities": {list: true, sub: clcVerified},
		}}}},
	}},
	"storage": {sub: map[string]clcRule{
		"disks": {list: true, sub: map[string]clcRule{
			"device": clcKeep, "wipe_table": clcKeep,
			"partitions": {list: true, sub: map[string]clcRule{
				"label": clcKeep, "number": clcKeep, "guid": clcKeep, "type_guid": clcKeep,
				"size": {fn: (*clcConv).mib}, "start": {fn: (*clcConv).mib},
			}},
		}},
		"raid": {list: true, sub: map[string]clcRule{"name": clcKeep, "level": clcKeep, "devices": {list: true}, "spares": clcKeep, "options": {list: true}}},
		"filesystems": {list: true, sub: map[string]clcRule{
			"name":  {fn: func(*clcConv, string, *yaml.Node, *yaml.Node) {}}, // only files' filesystem names it
			"mount": {fn: (*clcConv).mount},
			"path":  {refuse: "a file system Ignition mounts at a path for the files that name it; Butane writes every file to the root file system: give the files their full path"},
		}},
		"files": {list: true, fn: (*clcConv).file},
		"directories": {list: true, sub: map[string]clcRule{
			"filesystem": clcRootFS, "path": clcKeep, "user": clcOwner, "group": clcOwner, "mode": clcKeep, "overwrite": clcKeep,
		}},
		"links": {list: true, sub: map[string]clcRule{
			"filesystem": clcRootFS, "path": clcKeep, "user": clcOwner, "group": clcOwner, "hard": clcKeep, "target": clcKeep, "overwrite": clcKeep,
		}},
	}},
	"systemd": {sub: map[string]clcRule{"units": {list: true, sub: map[string]clcRule{
		"name": clcKeep, "enable": {fn: (*clcConv).enable}, "enabled": clcKeep, "mask": clcKeep, "contents": clcKeep,
		"dropins": {list: true, sub: map[string]clcRule{"name": clcKeep, "contents": clcKeep}},
	}}}},
	"networkd": {fn: (*clcConv).networkd},
	"passwd": {sub: map[string]clcRule{
		"users":  {list: true, sub: clcUser},
		"groups": {list: true, sub: map[string]clcRule{"name": clcKeep, "gid": clcKeep, "password_hash": clcKeep, "system": clcKeep}},
	}},
	"etcd":      {refuse: "CABPK's transpiler writes it as etcd-member.service's drop-in; write that drop-in under systemd.units"},
	"flannel":   {refuse: "CABPK's transpiler writes it as flanneld.service's drop-in; write that drop-in under systemd.units"},
	"docker":    {refuse: "CABPK's transpiler writes it as docker.service's drop-in; write that drop-in under systemd.units"},
	"update":    {refuse: "CABPK's transpiler writes it as /etc/flatcar/update.conf; write that file under storage.files"},
	"locksmith": {refuse: "CABPK's transpiler writes it as /etc/flatcar/update.conf; write that file under storage.files"},
}

var clcUserFields = map[string]clcRule{
	"uid": clcKeep, "gecos": clcKeep, "home_dir": clcKeep, "no_create_home": clcKeep, "primary_group": clcKeep,
	"groups": {list: true}, "no_user_group": clcKeep, "system": clcKeep, "no_log_init": clcKeep, "shell": clcKeep,
}

var clcUser = func() map[string]clcRule {
	m := map[string]clcRule{"name": clcKeep, "password_hash": clcKeep, "ssh_authorized_keys": {list: true}, "create": {fn: (*clcConv).create}}
	for k, v := range clcUserFields {
		m[k] = v
	}
	return m
}()

var clcFile = map[string]clcRule{
	"filesystem": clcRootFS, "path": clcKeep, "user": clcOwner, "group": clcOwner, "mode": clcKeep, "overwrite": clcKeep,
	"append": {fn: func(*clcConv, string, *yaml.Node, *yaml.Node) {}}, // file moves the contents under it
	"contents": {sub: map[string]clcRule{
		"inline": clcKeep,
		"remote": {fn: (*clcConv).remote},
		"local":  {refuse: "CABPK's transpiler has no files directory and refuses it: give the contents inline or remote"},
	}},
}

// clcConv translates one CLC document, recording problems at their line
// of the text (1-based, within additionalConfig).
type clcConv struct {
	strict       bool
	errorf       func(line, col int, format string, args ...any)
	warnf        func(line, col int, format string, args ...any)
	networkFiles []*yaml.Node // files /etc/systemd/network/* to add to storage.files
}

// butane translates root, a CLC document's mapping, into a Butane flatcar
// document's mapping (without variant and version).
func (x *clcConv) butane(root *yaml.Node) *yaml.Node {
	out := x.mapping("", root, clcSchema)
	if len(x.networkFiles) > 0 {
		storage := child(out, "storage")
		if storage == nil {
			storage = &yaml.Node{Kind: yaml.MappingNode}
			out.Content = append(out.Content, str("storage"), storage)
		}
		files := child(storage, "files")
		if files == nil {
			files = &yaml.Node{Kind: yaml.SequenceNode}
			storage.Content = append(storage.Content, str("files"), files)
		}
		files.Content = append(files.Content, x.networkFiles...)
	}
	return out
}

// mapping translates in, a mapping at CLC path p, by its rules.
func (x *clcConv) mapping(p string, in *yaml.Node, rules map[string]clcRule) *yaml.Node {
	in = deref(in)
	out := &yaml.Node{Kind: yaml.MappingNode}
	if in.Kind != yaml.MappingNode {
		if in.Tag != "!!null" {
			x.errorf(in.Line, in.Column, "%s: want a mapping", cmp.Or(p, "the document"))
		}
		return out
	}
	for i := 0; i+1 < len(in.Content); i += 2 {
		k, v := in.Content[i], in.Content[i+1]
		kp := join(p, k.Value)
		r, ok := rules[k.Value]
		switch {
		case !ok && x.strict:
			x.errorf(k.Line, k.Column, "%s: not a Container Linux Config key, which CABPK refuses with strict: true", kp)
		case !ok:
			x.warnf(k.Line, k.Column, "%s: not a Container Linux Config key: ignored, as CABPK's transpiler ignores it", kp)
		case r.refuse != "":
			x.errorf(k.Line, k.Column, "%s: %s", kp, r.refuse)
		case r.fn != nil && !r.list:
			r.fn(x, kp, v, out)
		default:
			out.Content = append(out.Content, str(cmp.Or(r.to, k.Value)), x.value(kp, v, r))
		}
	}
	return out
}

// value translates v, the value of a key with rule r.
func (x *clcConv) value(p string, v *yaml.Node, r clcRule) *yaml.Node {
	v = deref(v)
	switch {
	case r.list && v.Kind == yaml.SequenceNode && (r.sub != nil || r.fn != nil):
		out := &yaml.Node{Kind: yaml.SequenceNode}
		for i, e := range v.Content {
			ep := fmt.Sprintf("%s[%d]", p, i)
			if r.fn != nil {
				r.fn(x, ep, e, out)
				continue
			}
			out.Content = append(out.Content, x.mapping(ep, e, r.sub))
		}
		return out
	case r.list && v.Kind != yaml.SequenceNode && v.Tag != "!!null":
		x.errorf(v.Line, v.Column, "%s: want a list", p)
	case r.sub != nil:
		return x.mapping(p, v, r.sub)
	}
	return v
}

// file translates storage.files[] entry f, appending it to out.
func (x *clcConv) file(p string, f *yaml.Node, out *yaml.Node) {
	m := x.mapping(p, f, clcFile)
	contents := child(m, "contents")
	if a := child(f, "append"); a != nil {
		var on bool
		if err := a.Decode(&on); err != nil {
			x.errorf(a.Line, a.Column, "%s.append: want true or false", p)
		}
		if on {
			// Ignition 2 appends the contents; Ignition 3 takes a list.
			removeKey(m, "contents")
			if contents == nil {
				contents = &yaml.Node{Kind: yaml.MappingNode}
			}
			m.Content = append(m.Content, str("append"), &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{contents}})
			contents = nil
		}
	}
	if contents != nil && child(m, "overwrite") == nil && (child(contents, "source") != nil || child(contents, "inline") != nil) {
		// Ignition 2 replaces a file that is there; Ignition 3 only
		// when told.
		m.Content = append(m.Content, str("overwrite"), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	}
	out.Content = append(out.Content, m)
}

// remote is contents.remote: Butane's source, compression and
// verification.
func (x *clcConv) remote(p string, v *yaml.Node, out *yaml.Node) {
	r := x.mapping(p, v, map[string]clcRule{"url": {to: "source"}, "compression": clcKeep,
		"verification": {sub: map[string]clcRule{"hash": clcHash}}})
	if child(r, "source") == nil {
		x.errorf(v.Line, v.Column, "%s.url: required: without it CABPK's transpiler writes the file empty", p)
	}
	out.Content = append(out.Content, r.Content...)
}

// hash is verification.hash {function, sum}: Butane's "function-sum".
func (x *clcConv) hash(p string, v *yaml.Node, out *yaml.Node) {
	var h struct{ Function, Sum string }
	if err := v.Decode(&h); err != nil || h.Function == "" || h.Sum == "" {
		x.errorf(v.Line, v.Column, "%s: want function and sum", p)
		return
	}
	out.Content = append(out.Content, str("hash"), str(h.Function+"-"+h.Sum))
}

// rootFilesystem accepts filesystem: root, where Butane writes every file.
func (x *clcConv) rootFilesystem(p string, v *yaml.Node, _ *yaml.Node) {
	if v.Value != "root" {
		x.errorf(v.Line, v.Column, "%s: %q: a file system CABPK's transpiler mounts by its storage.filesystems path; Butane writes to the root file system: give the full path", p, v.Value)
	}
}

// mount is a storage.filesystems entry's mount: its keys one level up,
// create's force and options as wipe_filesystem and options.
func (x *clcConv) mount(p string, v *yaml.Node, out *yaml.Node) {
	m := x.mapping(p, v, map[string]clcRule{"device": clcKeep, "format": clcKeep, "wipe_filesystem": clcKeep,
		"label": clcKeep, "uuid": clcKeep, "options": {list: true},
		"create": {sub: map[string]clcRule{"force": {to: "wipe_filesystem"}, "options": {list: true}}}})
	if c := child(m, "create"); c != nil {
		removeKey(m, "create")
		for i := 0; i+1 < len(c.Content); i += 2 {
			if child(m, c.Content[i].Value) == nil {
				m.Content = append(m.Content, c.Content[i], c.Content[i+1])
			}
		}
	}
	out.Content = append(out.Content, m.Content...)
}

// create is a user's deprecated create: its fields, those of the user.
func (x *clcConv) create(p string, v *yaml.Node, out *yaml.Node) {
	m := x.mapping(p, v, clcUserFields)
	out.Content = append(out.Content, m.Content...)
}

// version is the transpiler's version, which must be 0 (its only one).
func (x *clcConv) version(p string, v *yaml.Node, _ *yaml.Node) {
	if v.Value != "0" {
		x.errorf(v.Line, v.Column, "%s: %q: CABPK's transpiler refuses a version other than 0 (for Butane, write variant: flatcar and its version)", p, v.Value)
	}
}

// enable is systemd's deprecated enable: enabled.
func (x *clcConv) enable(_ string, v *yaml.Node, out *yaml.Node) {
	out.Content = append(out.Content, str("enabled"), v)
}

var sizeUnits = lazyre.New(`^([0-9]+)\s*([KMGTPE]?)(i?B?)$`)

// mib is a partition size or start in bytes with a binary unit ("1GiB"),
// as the transpiler reads them, in MiB.
func (x *clcConv) mib(p string, v *yaml.Node, out *yaml.Node) {
	var n int64 = -1
	if m := sizeUnits.FindStringSubmatch(v.Value); m != nil {
		shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40, "P": 50, "E": 60}[m[2]]
		if b, err := strconv.ParseInt(m[1], 10, 64); err == nil && b<<shift>>shift == b && (b<<shift)%(1<<20) == 0 {
			n = b << shift >> 20
		}
	}
	if n < 0 {
		x.errorf(v.Line, v.Column, "%s: %q: want a size in whole MiB, such as 512MiB or 2GiB", p, v.Value)
		return
	}
	key := p[strings.LastIndexByte(p, '.')+1:] + "_mib"
	out.Content = append(out.Content, str(key), &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(n, 10)})
}

// networkd is networkd.units: files in /etc/systemd/network, where
// Ignition 2 writes them.
func (x *clcConv) networkd(p string, v *yaml.Node, _ *yaml.Node) {
	units := x.mapping(p, v, map[string]clcRule{"units": {list: true, sub: map[string]clcRule{"name": clcKeep, "contents": clcKeep}}})
	list := child(units, "units")
	if list == nil {
		return
	}
	for _, u := range list.Content {
		name, contents := child(u, "name"), child(u, "contents")
		if name == nil || contents == nil {
			x.errorf(u.Line, u.Column, "%s.units: a unit wants name and contents", p)
			continue
		}
		x.networkFiles = append(x.networkFiles, &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			str("path"), str("/etc/systemd/network/" + name.Value),
			str("mode"), {Kind: yaml.ScalarNode, Tag: "!!int", Value: "420"},
			str("overwrite"), {Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"},
			str("contents"), {Kind: yaml.MappingNode, Content: []*yaml.Node{str("inline"), contents}},
		}})
	}
}

// deref is n, or what the alias n names (yamlbound bounded the
// expansion).
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func join(p, k string) string {
	if p == "" {
		return k
	}
	return p + "." + k
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// child is the value of mapping m's key k, or nil.
func child(m *yaml.Node, k string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == k {
			return m.Content[i+1]
		}
	}
	return nil
}

func removeKey(m *yaml.Node, k string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == k {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// additionalConfig reads ignition.containerLinuxConfig.additionalConfig:
// a Butane document (it has a variant) as given, or a Container Linux
// Config translated into Butane's flatcar variant.
func (c *conv) additionalConfig() {
	cl := c.cs.Ignition.ContainerLinuxConfig
	if strings.TrimSpace(cl.AdditionalConfig) == "" {
		return
	}
	p := c.path + ".ignition.containerLinuxConfig.additionalConfig"
	doc, err := yamlbound.Parse([]byte(cl.AdditionalConfig), spec.FieldYAML)
	if err != nil {
		c.b.Errorf(p, "%s", yamlbound.Describe(err, "not YAML"))
		return
	}
	strict := cl.Strict != nil && *cl.Strict
	if strict {
		c.b.Warnf(p, "strict: build with --strict to make Butane's warnings errors, as CAPI does")
	}
	if len(doc.Content) == 0 || child(deref(doc.Content[0]), "variant") != nil {
		c.unusedButaneKeys(p, cl.AdditionalConfig)
		c.b.Instance.Spec.Ignition.Butane = strings.TrimSpace(cl.AdditionalConfig)
		c.b.From("spec.ignition.butane", p)
		return
	}
	x := clcConv{strict: strict,
		errorf: func(line, col int, format string, args ...any) { c.b.TextErrorf(p, line, col, format, args...) },
		warnf:  func(line, col int, format string, args ...any) { c.b.TextWarnf(p, line, col, format, args...) },
	}
	out := x.butane(doc.Content[0])
	if c.b.HasErrors() {
		return
	}
	var text strings.Builder
	text.WriteString("variant: flatcar\nversion: 1.0.0\n")
	enc := yaml.NewEncoder(&text)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		c.b.Errorf(p, "%v", err)
		return
	}
	c.b.Instance.Spec.Ignition.Butane = text.String()
	c.b.From("spec.ignition.butane", p)
}

// unusedButaneKeys reports the keys of the Butane document text that
// Butane ignores: the guest would not get what they say. (Its other
// problems are the rendering's to report.)
func (c *conv) unusedButaneKeys(p, text string) {
	_, rpt, _ := butane.TranslateBytes([]byte(text), butanecommon.TranslateBytesOptions{Raw: true})
	for _, e := range rpt.Entries {
		if !strings.HasPrefix(e.Message, "unused key") {
			continue
		}
		line, col := int64(0), int64(0)
		if e.Marker.StartP != nil {
			line, col = e.Marker.StartP.Line, e.Marker.StartP.Column
		}
		var key string
		for _, seg := range e.Context.Path {
			if i, ok := seg.(int); ok {
				key += fmt.Sprintf("[%d]", i)
			} else {
				key = join(key, fmt.Sprint(seg))
			}
		}
		c.b.TextErrorf(p, int(line), int(col), "%s: a key Butane does not use: the guest would not get what it says (CABPK reads no Butane; its Container Linux Config transpiler ignores keys it does not know)", key)
	}
}
