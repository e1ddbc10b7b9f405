package ovirt

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode"

	ovirtsdk "github.com/ovirt/go-ovirt"
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// The decoder is written by hand, around go-ovirt's types, because
// go-ovirt's own readers cannot be used for input a user wrote: they skip
// unknown elements silently (a misspelled <host_nme> would be dropped),
// report no line numbers, read only XML (the REST API also speaks JSON),
// and dereference the result of an enum read before checking its error.
// The element names it accepts are go-ovirt's: each element's children are
// the fields of the go-ovirt type it decodes into, named as the REST API
// names them (hostName is host_name), so an element oVirt does not have is
// an error naming its path and line, and one oVirt has but vminit does
// not read (<memory>, <cpu>…) is skipped.

// node is one element (XML) or member (JSON) of a REST representation.
type node struct {
	name     string
	line     int
	text     string
	attrs    map[string]string
	children []*node
}

func (n *node) child(name string) *node {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (n *node) all(name string) []*node {
	var out []*node
	for _, c := range n.children {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

const maxDepth = 64

// parseXML reads an XML document into nodes.
func parseXML(data []byte) (*node, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	// The text of each open element is collected in a buffer and made its
	// node's text when the element ends: comments, processing instructions
	// and CDATA sections split text into any number of tokens, and adding
	// each to a string copied it all again (800 KB took seconds).
	var stack []openElement
	var root *node
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		line, _ := d.InputPos()
		if err != nil {
			return nil, &lineError{line, "not well-formed XML: " + strings.TrimPrefix(err.Error(), fmt.Sprintf("XML syntax error on line %d: ", line)) + "; the engine answers 400 Bad Request"}
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) >= maxDepth {
				return nil, &lineError{line, fmt.Sprintf("nested more than %d elements deep; no oVirt representation nests so deep", maxDepth)}
			}
			n := newNode(t, line)
			if len(stack) == 0 {
				if root != nil {
					return nil, &lineError{line, fmt.Sprintf("a second root element <%s>: not well-formed XML; the engine answers 400 Bad Request", n.name)}
				}
				root = n
			} else {
				p := stack[len(stack)-1].n
				if len(p.children) == spec.MaxListEntries {
					return nil, &lineError{p.line, fmt.Sprintf("<%s> holds more than %d elements; the limit is that of each list of a spec", p.name, spec.MaxListEntries)}
				}
				p.children = append(p.children, n)
			}
			stack = append(stack, openElement{n: n})
		case xml.EndElement:
			top := stack[len(stack)-1]
			top.n.text = string(top.text)
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				top := &stack[len(stack)-1]
				top.text = append(top.text, t...)
			}
		}
	}
	if root == nil {
		return nil, fmt.Errorf("no XML element")
	}
	return root, nil
}

// lineError is a problem at a line of the body (1-based) that keeps it
// from being read at all.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// openElement is an element parseXML has not seen the end of, and the
// text read in it so far.
type openElement struct {
	n    *node
	text []byte
}

// newNode is the node of a start tag.
func newNode(t xml.StartElement, line int) *node {
	n := &node{name: t.Name.Local, line: line}
	for _, a := range t.Attr {
		if n.attrs == nil {
			n.attrs = map[string]string{}
		}
		n.attrs[a.Name.Local] = a.Value
	}
	return n
}

// parseJSON reads oVirt's JSON representation (read with yaml.v3 for the
// lines) into nodes: an object's members are children, a list is repeated
// children of the list's name, scalars are text.
func parseJSON(data []byte) (*node, error) {
	doc, err := yamlbound.Parse(data, yamlbound.Limits{Bytes: platform.MaxDocumentSize})
	if err != nil {
		return nil, fmt.Errorf("%s", yamlbound.Describe(err, "not JSON"))
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a JSON object")
	}
	root := &node{name: "vm", line: doc.Content[0].Line}
	for i := 0; i+1 < len(doc.Content[0].Content); i += 2 {
		if doc.Content[0].Content[i].Value == "vm" {
			root.name = "action" // POST .../vms/ID/start's body
		}
	}
	if err := fromYAML(root, doc.Content[0], 0); err != nil {
		return nil, err
	}
	return root, nil
}

func fromYAML(n *node, y *yaml.Node, depth int) error {
	if depth > maxDepth {
		return &lineError{y.Line, fmt.Sprintf("nested more than %d deep; no oVirt representation nests so deep", maxDepth)}
	}
	switch y.Kind {
	case yaml.ScalarNode:
		n.text = y.Value
	case yaml.MappingNode:
		for i := 0; i+1 < len(y.Content); i += 2 {
			k, v := y.Content[i], y.Content[i+1]
			if v.Kind == yaml.SequenceNode {
				for _, item := range v.Content {
					c := &node{name: k.Value, line: item.Line}
					if err := fromYAML(c, item, depth+1); err != nil {
						return err
					}
					n.children = append(n.children, c)
				}
				continue
			}
			c := &node{name: k.Value, line: k.Line}
			if err := fromYAML(c, v, depth+1); err != nil {
				return err
			}
			n.children = append(n.children, c)
		}
	case yaml.SequenceNode:
		return &lineError{y.Line, "a list where an object or value belongs"}
	}
	return nil
}

// snake is go-ovirt's field name as the REST API spells it.
func snake(s string) string {
	s = strings.TrimSuffix(s, "_") // type_: Go's keyword avoided
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fieldsOf returns the REST names of a go-ovirt type's fields, each with
// the element name of its items for a list (the type's Slice), else "".
func fieldsOf(v any) map[string]string {
	t := reflect.TypeOf(v).Elem()
	out := map[string]string{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			continue
		}
		item := ""
		if ft := f.Type; ft.Kind() == reflect.Pointer && strings.HasSuffix(ft.Elem().Name(), "Slice") {
			item = snake(strings.TrimSuffix(ft.Elem().Name(), "Slice"))
		}
		out[snake(f.Name)] = item
	}
	return out
}

// decoder turns nodes into go-ovirt values, collecting every problem.
type decoder struct {
	doc  *platform.Document
	errs spec.Errors
}

func (d *decoder) errorf(n *node, path, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.line
	}
	e := d.doc.Error(path, fmt.Sprintf(format, args...))
	e.Line = d.doc.Line + line - 1
	d.errs = append(d.errs, e)
}

// check reports the children of n that the go-ovirt type of v does not
// have, and the lists whose items are misnamed.
func (d *decoder) check(n *node, path string, v any) {
	fields := fieldsOf(v)
	d.doc.SetLine(path, n.line)
	for _, c := range n.children {
		if _, dup := d.doc.LineOfKnown(path + "." + c.name); !dup {
			d.doc.SetLine(path+"."+c.name, c.line)
		}
		item, ok := fields[c.name]
		if !ok {
			if c.name == "link" || c.name == "actions" { // REST navigation, not data
				continue
			}
			d.errorf(c, path+"."+c.name, "unknown element: oVirt's %s has no %q", typeName(v), c.name)
			continue
		}
		if item != "" {
			for _, gc := range c.children {
				if gc.name != item {
					d.errorf(gc, path+"."+c.name+"."+gc.name, "unknown element: %s holds <%s> items", c.name, item)
				}
			}
		}
	}
}

func typeName(v any) string { return snake(reflect.TypeOf(v).Elem().Name()) }

func (d *decoder) str(n *node) (string, bool) {
	if n == nil {
		return "", false
	}
	return n.text, true
}

func (d *decoder) boolean(n *node, path string) (bool, bool) {
	if n == nil {
		return false, false
	}
	b, err := strconv.ParseBool(strings.TrimSpace(n.text))
	if err != nil {
		d.errorf(n, path, "%q: want true or false", n.text)
		return false, false
	}
	return b, true
}

func (d *decoder) enum(n *node, path string, allowed ...string) (string, bool) {
	if n == nil {
		return "", false
	}
	v := strings.TrimSpace(n.text)
	for _, a := range allowed {
		if v == a {
			return v, true
		}
	}
	d.errorf(n, path, "%q: want one of %s", v, strings.Join(allowed, ", "))
	return "", false
}

// Body is what a REST body says about a VM's first boot.
type Body struct {
	VM *ovirtsdk.Vm
	// Path is the field path of the element the VM was read from: vm,
	// action.vm, template or vm_pool.vm.
	Path string
	// Sysprep is an action's use_sysprep: the engine writes a Windows
	// answer file, whatever the OS type.
	Sysprep bool
}

// decodeBody decodes a <vm>, an <action> carrying one (a start request
// with use_cloud_init or use_sysprep), a <template> (POST /templates: its
// initialization is what each VM made from it gets) or a <vm_pool> (POST
// /vmpools: its vm's initialization is each pool VM's) into go-ovirt's Vm.
func (d *decoder) decodeBody(root *node) Body {
	switch root.name {
	case "vm":
		return Body{VM: d.decodeVM(root, "vm", &ovirtsdk.Vm{}), Path: "vm"}
	case "template":
		return Body{VM: d.decodeVM(root, "template", &ovirtsdk.Template{}), Path: "template"}
	case "action", "vm_pool":
		var outer any = &ovirtsdk.Action{}
		if root.name == "vm_pool" {
			outer = &ovirtsdk.VmPool{}
		}
		d.check(root, root.name, outer)
		sysprep, _ := d.boolean(root.child("use_sysprep"), root.name+".use_sysprep")
		vm := root.child("vm")
		if vm == nil {
			d.errorf(root, root.name, "<%s> without <vm> carries no initialization", root.name)
			return Body{}
		}
		path := root.name + ".vm"
		return Body{VM: d.decodeVM(vm, path, &ovirtsdk.Vm{}), Path: path, Sysprep: sysprep}
	}
	d.errorf(root, root.name, "the root is <%s>; want <vm> (GET .../vms/ID), <action> (POST .../vms/ID/start), <template> (POST /templates) or <vm_pool> (POST /vmpools)", root.name)
	return Body{}
}

// decodeVM decodes the VM fields vminit reads from root, whose other
// children must be fields of kind (go-ovirt's Vm, or Template, which has
// the same ones).
func (d *decoder) decodeVM(root *node, path string, kind any) *ovirtsdk.Vm {
	d.check(root, path, kind)
	b := ovirtsdk.NewVmBuilder()
	if id, ok := root.attrs["id"]; ok {
		b.Id(id)
	}
	if v, ok := d.str(root.child("id")); ok {
		b.Id(strings.TrimSpace(v))
	}
	if v, ok := d.str(root.child("name")); ok {
		b.Name(strings.TrimSpace(v))
	}
	if os := root.child("os"); os != nil {
		d.check(os, path+".os", &ovirtsdk.OperatingSystem{})
		if t, ok := d.str(os.child("type")); ok {
			b.Os(ovirtsdk.NewOperatingSystemBuilder().Type(strings.TrimSpace(t)).MustBuild())
		}
	}
	if nics := root.child("nics"); nics != nil {
		var list []*ovirtsdk.Nic
		for i, n := range nics.all("nic") {
			p := fmt.Sprintf("%s.nics.nic[%d]", path, i)
			d.check(n, p, &ovirtsdk.Nic{})
			nb := ovirtsdk.NewNicBuilder()
			if v, ok := d.str(n.child("name")); ok {
				nb.Name(strings.TrimSpace(v))
			}
			if mac := n.child("mac"); mac != nil {
				d.check(mac, p+".mac", &ovirtsdk.Mac{})
				if a, ok := d.str(mac.child("address")); ok {
					nb.Mac(ovirtsdk.NewMacBuilder().Address(strings.TrimSpace(a)).MustBuild())
				}
			}
			list = append(list, nb.MustBuild())
		}
		b.NicsOfAny(list...)
	}
	if in := root.child("initialization"); in != nil {
		b.Initialization(d.initialization(in, path+".initialization"))
	}
	vm, err := b.Build()
	if err != nil {
		d.errorf(root, path, "%v", err)
		return nil
	}
	return vm
}

func (d *decoder) initialization(n *node, path string) *ovirtsdk.Initialization {
	d.check(n, path, &ovirtsdk.Initialization{})
	b := ovirtsdk.NewInitializationBuilder()
	strs := []struct {
		name string
		set  func(string) *ovirtsdk.InitializationBuilder
	}{
		{"host_name", b.HostName}, {"user_name", b.UserName}, {"root_password", b.RootPassword},
		{"authorized_ssh_keys", b.AuthorizedSshKeys}, {"timezone", b.Timezone}, {"custom_script", b.CustomScript},
		{"dns_servers", b.DnsServers}, {"dns_search", b.DnsSearch}, {"domain", b.Domain}, {"org_name", b.OrgName},
		{"active_directory_ou", b.ActiveDirectoryOu}, {"input_locale", b.InputLocale}, {"system_locale", b.SystemLocale},
		{"ui_language", b.UiLanguage}, {"user_locale", b.UserLocale}, {"windows_license_key", b.WindowsLicenseKey},
	}
	for _, s := range strs {
		if v, ok := d.str(n.child(s.name)); ok {
			s.set(v)
		}
	}
	if v, ok := d.boolean(n.child("regenerate_ssh_keys"), path+".regenerate_ssh_keys"); ok {
		b.RegenerateSshKeys(v)
	}
	if v, ok := d.boolean(n.child("regenerate_ids"), path+".regenerate_ids"); ok {
		b.RegenerateIds(v)
	}
	if v, ok := d.enum(n.child("cloud_init_network_protocol"), path+".cloud_init_network_protocol",
		string(ovirtsdk.CLOUDINITNETWORKPROTOCOL_OPENSTACK_METADATA), string(ovirtsdk.CLOUDINITNETWORKPROTOCOL_ENI)); ok {
		b.CloudInitNetworkProtocol(ovirtsdk.CloudInitNetworkProtocol(v))
	}
	if ncs := n.child("nic_configurations"); ncs != nil {
		var list []*ovirtsdk.NicConfiguration
		for i, nc := range ncs.all("nic_configuration") {
			list = append(list, d.nicConfiguration(nc, fmt.Sprintf("%s.nic_configurations.nic_configuration[%d]", path, i)))
		}
		b.NicConfigurationsOfAny(list...)
	}
	in, err := b.Build()
	if err != nil {
		d.errorf(n, path, "%v", err)
	}
	return in
}

var bootProtocols = []string{string(ovirtsdk.BOOTPROTOCOL_DHCP), string(ovirtsdk.BOOTPROTOCOL_STATIC), string(ovirtsdk.BOOTPROTOCOL_NONE),
	string(ovirtsdk.BOOTPROTOCOL_AUTOCONF), string(ovirtsdk.BOOTPROTOCOL_POLY_DHCP_AUTOCONF)}

func (d *decoder) nicConfiguration(n *node, path string) *ovirtsdk.NicConfiguration {
	d.check(n, path, &ovirtsdk.NicConfiguration{})
	b := ovirtsdk.NewNicConfigurationBuilder()
	if v, ok := d.str(n.child("name")); ok {
		b.Name(strings.TrimSpace(v))
	}
	if v, ok := d.boolean(n.child("on_boot"), path+".on_boot"); ok {
		b.OnBoot(v)
	}
	if v, ok := d.enum(n.child("boot_protocol"), path+".boot_protocol", bootProtocols...); ok {
		b.BootProtocol(ovirtsdk.BootProtocol(v))
	}
	if v, ok := d.enum(n.child("ipv6_boot_protocol"), path+".ipv6_boot_protocol", bootProtocols...); ok {
		b.Ipv6BootProtocol(ovirtsdk.BootProtocol(v))
	}
	for _, f := range []struct {
		name string
		set  func(*ovirtsdk.Ip) *ovirtsdk.NicConfigurationBuilder
	}{{"ip", b.Ip}, {"ipv6", b.Ipv6}} {
		ipn := n.child(f.name)
		if ipn == nil {
			continue
		}
		p := path + "." + f.name
		d.check(ipn, p, &ovirtsdk.Ip{})
		ib := ovirtsdk.NewIpBuilder()
		if v, ok := d.str(ipn.child("address")); ok {
			ib.Address(strings.TrimSpace(v))
		}
		if v, ok := d.str(ipn.child("netmask")); ok {
			ib.Netmask(strings.TrimSpace(v))
		}
		if v, ok := d.str(ipn.child("gateway")); ok {
			ib.Gateway(strings.TrimSpace(v))
		}
		if v, ok := d.enum(ipn.child("version"), p+".version", string(ovirtsdk.IPVERSION_V4), string(ovirtsdk.IPVERSION_V6)); ok {
			ib.Version(ovirtsdk.IpVersion(v))
		}
		f.set(ib.MustBuild())
	}
	nc, err := b.Build()
	if err != nil {
		d.errorf(n, path, "%v", err)
	}
	return nc
}

// Decode reads a REST representation of a vm (XML or JSON) into
// go-ovirt's Vm, strictly.
func Decode(doc *platform.Document) (*ovirtsdk.Vm, error) {
	b, err := DecodeBody(doc)
	return b.VM, err
}

// DecodeBody reads a REST body (XML or JSON) strictly: what Decode reads,
// with where the VM was found and whether sysprep was asked for.
func DecodeBody(doc *platform.Document) (Body, error) {
	var root *node
	var err error
	if doc.Format == platform.XML {
		root, err = parseXML(doc.Raw)
	} else {
		root, err = parseJSON(doc.Raw)
	}
	if err != nil {
		e := &spec.FieldError{File: doc.File, Line: doc.Line, Message: err.Error(), Object: guessRoot(doc)}
		var le *lineError
		if errors.As(err, &le) {
			e.Line, e.Message = doc.Line+le.line-1, le.msg
		}
		return Body{}, spec.Errors{e}
	}
	doc.SetObject(bodyObject(root))
	d := &decoder{doc: doc}
	body := d.decodeBody(root)
	if len(d.errs) > 0 {
		return Body{}, d.errs
	}
	return body, nil
}

// bodyObject names the object a body represents, for its problems:
// "vm/myvm", "template/NAME", "vm_pool/NAME", or "action" (a start action,
// whose VM is named in its URL, when its vm names none).
func bodyObject(root *node) string {
	named := root
	if root.name == "action" {
		named = root.child("vm")
	}
	if named != nil {
		if n := named.child("name"); n != nil && strings.TrimSpace(n.text) != "" {
			if named != root {
				return root.name + " for vm/" + strings.TrimSpace(n.text)
			}
			return root.name + "/" + strings.TrimSpace(n.text)
		}
	}
	return root.name
}

// xmlRootRE finds the root element of a body that does not parse.
var xmlRootRE = lazyre.New(`<([A-Za-z_][A-Za-z0-9_.-]*)[\s/>]`)

// guessRoot names the object of a body that does not parse by its root
// element (XML), or as the vm or action its JSON would be.
func guessRoot(doc *platform.Document) string {
	if doc.Format == platform.XML {
		if m := xmlRootRE.FindSubmatch(doc.Raw); m != nil {
			return string(m[1])
		}
		return "vm"
	}
	if strings.Contains(string(doc.Raw), `"vm"`) {
		return "action"
	}
	return "vm"
}
