package seed

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/spec"
)

// This file reads raw network-config (versions 1 and 2) as cloud-init
// 22.4's network_state.py does, to find what it fails on, the entries it
// drops ("Skipping invalid command", logged and forgotten) and a
// configuration it reads no interface from: each leaves a guest without
// the network its author meant, and without a word at build time.
// The tests hold it against cloud-init's own parser.

// v1Required is, for each network-config version 1 entry type cloud-init
// 22.4 has a handler for, the keys without which the handler raises
// InvalidCommand and parse_config_v1 skips the entry
// (network_state.py's ensure_command_keys).
var v1Required = map[string][]string{
	"physical":   {"name"},
	"loopback":   {"name"},
	"infiniband": {"name"},
	"vlan":       {"name", "vlan_id", "vlan_link"},
	"bond":       {"name", "bond_interfaces", "params"},
	"bridge":     {"name", "bridge_interfaces"},
	"nameserver": {"address"},
	"route":      {"destination"},
}

// v1Interface says which version 1 entry types make an interface of
// cloud-init's network state.
var v1Interface = map[string]bool{"physical": true, "loopback": true, "infiniband": true, "vlan": true, "bond": true, "bridge": true}

// v2Sections are the interface sections of network-config version 2
// (wifis only on a netplan guest: cloud-init's other renderers warn and
// skip it).
var v2Sections = []string{"ethernets", "bonds", "bridges", "vlans", "wifis"}

func checkNetworkConfig(data []byte, add addFunc) {
	const f = "network-config"
	var v any
	if err := yamlbound.Unmarshal(data, &v, yamlbound.Limits{Bytes: spec.MaxSpecSize}); err != nil {
		add(f, "%s", yamlbound.Describe(err, "not YAML"))
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		add(f, "must be a mapping with version: 1 or version: 2")
		return
	}
	prefix := ""
	if inner, ok := m["network"].(map[string]any); ok {
		add(f, "wrapped in a top-level network: key; cloud-init 22.2 and later unwrap it (stages.py _remove_top_level_network_key), older releases find no configuration: put version: at the top level")
		m, prefix = inner, "network."
	}
	if m["config"] == "disabled" {
		return // cloud-init's way to say "configure no network" (net.is_disabled_cfg)
	}
	switch m["version"] {
	case 1:
		checkV1(m, prefix, func(format string, args ...any) { add(f, format, args...) })
	case 2:
		checkV2(m, prefix, func(format string, args ...any) { add(f, format, args...) })
	default:
		add(f, "version must be 1 or 2, not %v", m["version"])
	}
}

// checkV1 checks a version 1 document as parse_config_v1 reads it.
func checkV1(m map[string]any, prefix string, add func(format string, args ...any)) {
	config, ok := m["config"].([]any)
	if !ok {
		add("%sconfig: version 1 needs a config: list", prefix)
		return
	}
	// Keys beside config: are read by nobody; an entry's keys indented
	// one level too little land there (KubeVirt's user guide: name and
	// subnets of its physical entry beside config:).
	var stray []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "version" && k != "config" {
			stray = append(stray, k)
		}
	}
	strayNote := ""
	if len(stray) > 0 {
		strayNote = fmt.Sprintf("; %s%s beside config: %s read by nobody: indent %s into the entry they belong to", prefix, strings.Join(stray, ", "), isAre(len(stray)), itThem(len(stray)))
	}
	interfaces := 0
	for i, e := range config {
		field := fmt.Sprintf("%sconfig[%d]", prefix, i)
		entry, ok := e.(map[string]any)
		if !ok {
			add("%s: must be a mapping with a type (cloud-init fails on this entry and applies no network configuration)", field)
			continue
		}
		typ, _ := entry["type"].(string)
		required, known := v1Required[typ]
		if !known {
			if entry["type"] == nil {
				add("%s: no type (cloud-init fails on this entry and applies no network configuration)", field)
			} else {
				add("%s.type: %v is no version 1 entry type (cloud-init fails with \"No handler found\" and applies no network configuration): want one of %s", field, entry["type"], strings.Join(slices.Sorted(maps.Keys(v1Required)), ", "))
			}
			continue
		}
		var missing []string
		for _, k := range required {
			if _, ok := entry[k]; !ok {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			add("%s: a %s entry without %s: cloud-init 22.4 drops it (\"Skipping invalid command\") and configures nothing from it%s", field, typ, strings.Join(missing, ", "), strayNote)
			strayNote = ""
			continue
		}
		if v1Interface[typ] {
			interfaces++
		}
	}
	if interfaces == 0 {
		add("%sconfig: configures no interface: cloud-init 22.4 reads none from it, and the guest comes up without a network%s", prefix, strayNote)
	}
}

// checkV2 checks a version 2 document as parse_config_v2 reads it (and
// netplan, which a netplan guest hands it to).
func checkV2(m map[string]any, prefix string, add func(format string, args ...any)) {
	interfaces := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch k {
		case "version", "renderer":
			continue
		case "ethernets", "bonds", "bridges", "vlans", "wifis":
		default:
			add("%s%s: version 2 has no %q section (cloud-init fails on it)", prefix, k, k)
			continue
		}
		sec, ok := m[k].(map[string]any)
		if !ok {
			if m[k] != nil {
				add("%s%s: must be a mapping of interface IDs (cloud-init fails on it)", prefix, k)
			}
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(sec)) {
			field := prefix + k + "." + id
			cfg, ok := sec[id].(map[string]any)
			if !ok {
				add("%s: must be a mapping of the interface's settings (cloud-init fails on it)", field)
				continue
			}
			switch k {
			case "bonds", "bridges":
				if _, ok := cfg["interfaces"].([]any); !ok {
					add("%s.interfaces: required, a list of the member interfaces' IDs (cloud-init fails without it)", field)
					continue
				}
			case "vlans":
				var missing []string
				for _, key := range []string{"id", "link"} {
					if cfg[key] == nil {
						missing = append(missing, key)
					}
				}
				if len(missing) > 0 {
					add("%s: a VLAN without %s: netplan refuses it, and cloud-init's other renderers write a VLAN of no parent or ID", field, strings.Join(missing, " and "))
					continue
				}
			}
			interfaces++
		}
	}
	if interfaces == 0 {
		add("%sversion 2 configures no interface: no entry of %s, so cloud-init 22.4 reads none from it and the guest comes up without a network", prefix, strings.Join(v2Sections, ", "))
	}
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func itThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
