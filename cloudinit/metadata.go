package cloudinit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/spec"
)

// hostname is the name the datasources report: the FQDN when the spec has
// one (cloud-init splits it into host and domain), else the host name.
func hostname(s *spec.Spec) string {
	if s.FQDN != "" {
		return s.FQDN
	}
	return s.Hostname
}

// MetaData renders NoCloud's meta-data file (YAML): instance-id,
// local-hostname, public-keys (spec.sshAuthorizedKeys, which cloud-init
// gives the image's default user), then spec.cloudInit.metaData's keys in
// sorted order.
func MetaData(inst *spec.Instance) ([]byte, error) {
	doc, err := metaData(inst)
	if err != nil {
		return nil, err
	}
	return yaml11.Marshal(doc)
}

// MetaDataError returns the error MetaData would return, without
// encoding the YAML where that cannot fail (yaml11.Encodes).
func MetaDataError(inst *spec.Instance) error {
	doc, err := metaData(inst)
	if err != nil {
		return err
	}
	return yaml11.Encodes(doc)
}

func metaData(inst *spec.Instance) (*yaml.Node, error) {
	s := &inst.Spec
	doc := yaml11.Mapping(
		"instance-id", yaml11.String(s.InstanceID),
		"local-hostname", yaml11.String(hostname(s)),
	)
	if len(s.SSHAuthorizedKeys) > 0 {
		yaml11.AddPair(doc, "public-keys", yaml11.Strings(trimKeys(s.SSHAuthorizedKeys)))
	}
	extra, err := normalizeMetaData(s.CloudInit.MetaData)
	if err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if k == "instance-id" || k == "local-hostname" || k == "public-keys" {
			return nil, spec.Errors{{Field: "spec.cloudInit.metaData." + k, Message: "generated from the spec; set it there instead"}}
		}
		yaml11.AddPair(doc, k, jsonToNode(extra[k]))
	}
	return doc, nil
}

// configDriveKeys are the meta_data.json keys generated from the spec, with
// the spec field to set instead.
var configDriveKeys = map[string]string{
	"uuid":         "spec.instanceID",
	"hostname":     "spec.hostname or spec.fqdn",
	"name":         "metadata.name",
	"public_keys":  "spec.sshAuthorizedKeys",
	"launch_index": "",
}

// ConfigDriveMetaData renders ConfigDrive's openstack/latest/meta_data.json:
// uuid (cloud-init's instance-id; a drive without it is "BrokenMetadata"),
// name, hostname, launch_index and public_keys. public_keys is a mapping of
// key names to keys, as OpenStack writes it; cloud-init also reads a list,
// but other readers of the format (cloudbase-init) expect the mapping.
// spec.cloudInit.metaData's keys follow in sorted order.
func ConfigDriveMetaData(inst *spec.Instance) ([]byte, error) {
	s := &inst.Spec
	extra, err := normalizeMetaData(s.CloudInit.MetaData)
	if err != nil {
		return nil, err
	}
	var errs spec.ErrorList
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if instead, ok := configDriveKeys[k]; ok {
			if instead == "" {
				errs.Add("spec.cloudInit.metaData."+k, "generated for ConfigDrive and cannot be overridden")
			} else {
				errs.Add("spec.cloudInit.metaData."+k, "generated for ConfigDrive from %s; set that instead", instead)
			}
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	var o jsonObject
	o.add("uuid", s.InstanceID)
	o.add("name", inst.Metadata.Name)
	o.add("hostname", hostname(s))
	o.add("launch_index", 0)
	var keys jsonObject
	for i, k := range trimKeys(s.SSHAuthorizedKeys) {
		keys.add(strconv.Itoa(i), k)
	}
	o.addRaw("public_keys", keys.bytes(0))
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		o.add(k, extra[k])
	}
	return append(o.bytes(0), '\n'), nil
}

// ConfigDriveVendorData renders openstack/latest/vendor_data.json, or nil
// when the spec has no vendor data. cloud-init reads the file as JSON and,
// for an object, takes its "cloud-init" member as the vendor data
// (sources.convert_vendordata), which is how OpenStack's static vendor data
// is shaped.
func ConfigDriveVendorData(inst *spec.Instance) ([]byte, error) {
	vd := inst.Spec.CloudInit.VendorData
	if vd == "" {
		return nil, nil
	}
	var o jsonObject
	o.add("cloud-init", vd)
	return append(o.bytes(0), '\n'), nil
}

// VendorData returns NoCloud's vendor-data: spec.cloudInit.vendorData
// unchanged, or nil when there is none.
func VendorData(inst *spec.Instance) []byte {
	if inst.Spec.CloudInit.VendorData == "" {
		return nil
	}
	return []byte(inst.Spec.CloudInit.VendorData)
}

func trimKeys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = strings.TrimSpace(k)
	}
	return out
}

// normalizeMetaData turns spec.cloudInit.metaData into plain JSON values
// (maps with string keys, slices, strings, json.Numbers, booleans, nil), so
// that the YAML and the JSON renderings carry the same data and neither
// depends on Go's map order.
func normalizeMetaData(md map[string]any) (map[string]any, error) {
	if len(md) == 0 {
		return nil, nil
	}
	out := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		field := "spec.cloudInit.metaData." + k
		v, err := stringKeys(md[k])
		if err != nil {
			return nil, spec.Errors{{Field: field, Message: err.Error()}}
		}
		data, err := json.Marshal(v)
		if err != nil {
			return nil, spec.Errors{{Field: field, Message: fmt.Sprintf("cannot be written as JSON: %v", err)}}
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var nv any
		if err := dec.Decode(&nv); err != nil {
			return nil, spec.Errors{{Field: field, Message: err.Error()}}
		}
		out[k] = nv
	}
	return out, nil
}

// stringKeys converts the map[any]any that YAML decoding produces for
// mappings with non-string keys into map[string]any, and timestamps into
// RFC 3339 strings, recursively.
func stringKeys(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			c, err := stringKeys(x)
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			c, err := stringKeys(x)
			if err != nil {
				return nil, err
			}
			ks := fmt.Sprint(k)
			if _, dup := m[ks]; dup {
				return nil, fmt.Errorf("keys collide when written as strings: %q", ks)
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			c, err := stringKeys(x)
			if err != nil {
				return nil, err
			}
			s[i] = c
		}
		return s, nil
	case time.Time:
		return t.Format(time.RFC3339Nano), nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Float64 || rv.Kind() == reflect.Float32 {
		if f := rv.Float(); f != f || f > 1e308 || f < -1e308 {
			return nil, fmt.Errorf("%v cannot be written as JSON", f)
		}
	}
	return v, nil
}

// jsonToNode renders a normalized JSON value as YAML that PyYAML reads
// back as the same value.
func jsonToNode(v any) *yaml.Node {
	switch t := v.(type) {
	case nil:
		return yaml11.NullNode()
	case bool:
		return yaml11.BoolNode(t)
	case string:
		return yaml11.String(t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return yaml11.IntNode(i)
		}
		// PyYAML's float needs a dot and a signed exponent; Go's 'f'
		// format has no exponent.
		f, _ := t.Float64()
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: yaml11.Float, Value: s}
	case []any:
		seq := yaml11.Sequence()
		for _, x := range t {
			seq.Content = append(seq.Content, jsonToNode(x))
		}
		return seq
	case map[string]any:
		m := yaml11.Mapping()
		for _, k := range slices.Sorted(maps.Keys(t)) {
			yaml11.AddPair(m, k, jsonToNode(t[k]))
		}
		return m
	}
	return yaml11.String(fmt.Sprint(v))
}

// jsonObject writes a JSON object with keys in insertion order (Go maps
// would sort them, and the generated keys read better first), indented by
// two spaces and without HTML escaping.
type jsonObject struct {
	keys []string
	vals [][]byte
}

func (o *jsonObject) add(k string, v any) { o.addRaw(k, marshalJSON(v)) }

// marshalJSON is json.Marshal without HTML escaping (\u003c for <), which
// only hurts readability here. The values are normalized JSON, so it
// cannot fail.
func marshalJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

func (o *jsonObject) addRaw(k string, v []byte) {
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

// bytes writes the object, indented as if nested depth levels deep.
func (o *jsonObject) bytes(depth int) []byte {
	if len(o.keys) == 0 {
		return []byte("{}")
	}
	ind := strings.Repeat("  ", depth)
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range o.keys {
		kb := marshalJSON(k)
		var v bytes.Buffer
		if err := json.Indent(&v, o.vals[i], ind+"  ", "  "); err != nil {
			v.Write(o.vals[i])
		}
		fmt.Fprintf(&b, "%s  %s: %s", ind, kb, v.Bytes())
		if i < len(o.keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(ind + "}")
	return b.Bytes()
}
