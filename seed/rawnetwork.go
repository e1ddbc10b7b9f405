package seed

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/spec"
)

// rawNetworkErrors runs one of Check's network checkers on
// spec.cloudInit.networkConfig and returns what it finds as errors naming
// that field, so a build refuses what Check would flag on the disk.
func rawNetworkErrors(raw string, check func(add addFunc)) error {
	var es spec.Errors
	check(func(_, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		e := &spec.FieldError{Field: "spec.cloudInit.networkConfig", Message: msg}
		// A message about one entry starts with its path (config[0]: …).
		if path, _, ok := strings.Cut(msg, ": "); ok && !strings.Contains(path, " ") {
			e.TextLine = spec.TextLine(raw, path)
		}
		es = append(es, e)
	})
	if len(es) > 0 {
		return es
	}
	return nil
}

// checkRawNetworkConfig checks raw NoCloud network-config as Check does,
// and refuses network_data.json, which NoCloud does not read.
func checkRawNetworkConfig(raw string) error {
	var doc map[string]any
	if yamlbound.Unmarshal([]byte(raw), &doc, yamlbound.Limits{Bytes: spec.MaxSpecSize}) == nil && doc["links"] != nil && doc["version"] == nil {
		return rawNetworkErrors(raw, func(add addFunc) {
			add("", "this is OpenStack network_data.json, which only the configdrive datasource reads; NoCloud reads network-config version 1 or 2")
		})
	}
	return rawNetworkErrors(raw, func(add addFunc) { checkNetworkConfig([]byte(raw), add) })
}

// checkRawNetworkData checks raw ConfigDrive network_data.json as Check
// does, and refuses network-config, which ConfigDrive does not read (the
// most common mistake of KubeVirt users: kubevirt/user-guide#243).
func checkRawNetworkData(raw string) error {
	var doc map[string]any
	if json.Unmarshal([]byte(raw), &doc) != nil {
		if yamlbound.Unmarshal([]byte(raw), &doc, yamlbound.Limits{Bytes: spec.MaxSpecSize}) == nil && doc != nil && (doc["version"] != nil || doc["network"] != nil) {
			return rawNetworkErrors(raw, func(add addFunc) {
				add("", "this is network-config (netplan or version 1), which ConfigDrive does not read: ConfigDrive reads OpenStack network_data.json; use the nocloud datasource, or describe the network in spec.network, which vminit writes in either format")
			})
		}
		return rawNetworkErrors(raw, func(add addFunc) { add("", "ConfigDrive's network_data.json must be a JSON object") })
	}
	return rawNetworkErrors(raw, func(add addFunc) { checkNetworkData([]byte(raw), "", add) })
}
