package platform

import (
	"bytes"
	"encoding/json"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/spec"
)

// Part returns the object at path within d (an item of a v1 List, the pod
// template of a Deployment), whose JSON the caller has decoded from d's
// (so that a List's items cost one decoding of d, not one each), as a
// document of its own, so that a platform package converts it as it would
// a file's object. Its problems name their field from the top of d
// ("spec.template.metadata.annotations[...]") and their line in d's file.
// apiVersion and kind, when not empty, are set on a part that names none
// (a pod template names neither); its name and namespace default to d's,
// as a workload's pods take their owner's.
func (d *Document) Part(path string, raw []byte, apiVersion, kind string) (*Document, error) {
	if len(d.refused) > 0 {
		return nil, d.refused
	}
	_, n := d.find(path)
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if n == nil || n.Kind != yaml.MappingNode || dec.Decode(&obj) != nil || obj == nil {
		return nil, spec.Errors{d.Error(path, "want an object")}
	}
	p := &Document{File: d.File, Line: d.Line, Format: d.Format, Raw: d.Raw,
		node: &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}}, within: d.field(path) + "."}
	// A part of a kind of its own (a List's item) is an object of its
	// own; one that names none (a pod template) is its owner's.
	p.object = d.object
	if k := str(obj["kind"]); k != "" {
		p.object = objectName(k, str(mapOf(obj["metadata"])["name"]))
	}
	setDefault(obj, "apiVersion", apiVersion)
	setDefault(obj, "kind", kind)
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	setDefault(meta, "name", d.Name)
	setDefault(meta, "namespace", d.Namespace)
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, spec.Errors{d.Error(path, err.Error())}
	}
	p.JSON = j
	p.APIVersion, p.Kind = str(obj["apiVersion"]), str(obj["kind"])
	p.Name, p.Namespace = str(meta["name"]), str(meta["namespace"])
	return p, nil
}

// setDefault sets m[k] to v when v is not empty and m has no k.
func setDefault(m map[string]any, k, v string) {
	if _, ok := m[k]; !ok && v != "" {
		m[k] = v
	}
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// field is path as problems name it: prefixed with where d is within its
// file's document when d is a Part.
func (d *Document) field(path string) string {
	if path == "" {
		return trimDot(d.within)
	}
	return d.within + path
}

func trimDot(s string) string {
	if len(s) > 0 && s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
}
