package kubevirt

import (
	"bytes"

	"gopkg.in/yaml.v3"
)

// unwrapNetwork returns NoCloud network data written inside a top-level
// network: key (as KubeVirt users write it, both ways) without that key,
// and whether it was wrapped. cloud-init strips the key only since 22.2
// (22.4: stages.py _remove_top_level_network_key); before, it finds no
// version and configures no network. The rest is re-encoded from the YAML
// tree, keeping its order and comments; aliases stay aliases (the tree is
// never expanded).
func unwrapNetwork(data []byte) ([]byte, bool) {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) != 1 {
		return data, false
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode || len(top.Content) != 2 || top.Content[0].Value != "network" || top.Content[1].Kind != yaml.MappingNode {
		return data, false
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if enc.Encode(top.Content[1]) != nil || enc.Close() != nil {
		return data, false
	}
	return out.Bytes(), true
}
