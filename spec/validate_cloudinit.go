package spec

// The rules of spec.cloudInit: the data passed through to cloud-init, and
// the fields that userDataOnly and noDefaultUser leave without effect.

import (
	"strings"

	"github.com/vminit/vminit/internal/lib/yamlbound"
)

// reservedMD are the meta-data keys the spec generates, which
// spec.cloudInit.metaData may not set, with what to do instead.
var reservedMD = map[string]string{
	"instance-id":    "set spec.instanceID",
	"local-hostname": "set spec.hostname",
	"public-keys":    "set spec.sshAuthorizedKeys",
	// ConfigDrive's meta_data.json names for the same things.
	"uuid":         "set spec.instanceID",
	"hostname":     "set spec.hostname",
	"name":         "set metadata.name",
	"public_keys":  "set spec.sshAuthorizedKeys",
	"launch_index": "it is always 0 for a single instance; leave it out",
}

// validateCloudInit checks spec.cloudInit's pass-through data: user-data
// and vendor-data that say #cloud-config are YAML mappings, network-config
// is one, and metaData sets no key the spec generates (reservedMD).
func validateCloudInit(c *ErrorList, ci *CloudInit) {
	checkCloudConfig := func(field, data string) {
		if !isCloudConfig(data) {
			return
		}
		var v any
		if err := yamlbound.Unmarshal([]byte(data), &v, FieldYAML); err != nil {
			c.Add(field, "#cloud-config %s", yamlbound.Describe(err, "is not valid YAML"))
			return
		}
		if _, ok := v.(map[string]any); !ok && v != nil {
			c.Add(field, "#cloud-config must be a mapping of module keys")
		}
	}
	checkCloudConfig("spec.cloudInit"+fromField(".userData", ci.UserDataFrom), ci.UserData)
	checkCloudConfig("spec.cloudInit.vendorData", ci.VendorData)
	if nc := ci.NetworkConfig; nc != "" {
		var v any
		if err := yamlbound.Unmarshal([]byte(nc), &v, FieldYAML); err != nil {
			c.Add("spec.cloudInit.networkConfig", "%s", yamlbound.Describe(err, "is not valid YAML or JSON"))
		} else if _, ok := v.(map[string]any); !ok {
			c.Add("spec.cloudInit.networkConfig", "must be a mapping: network-config version 1 or 2, or network_data.json")
		}
	}
	for _, k := range sortedKeys(ci.MetaData) {
		if hint, ok := reservedMD[k]; ok {
			c.Add("spec.cloudInit.metaData."+k, "generated from the spec: %s instead", hint)
		}
	}
}

// isCloudConfig reports whether user-data is a #cloud-config document the
// way cloud-init decides it: after leading whitespace, case-insensitively,
// by the longest matching prefix (#cloud-config-archive and
// #cloud-config-jsonp are other part types).
func isCloudConfig(data string) bool {
	lc := strings.ToLower(strings.TrimLeft(data, " \t\r\n"))
	if strings.HasPrefix(lc, "#cloud-config-archive") || strings.HasPrefix(lc, "#cloud-config-jsonp") {
		return false
	}
	return strings.HasPrefix(lc, "#cloud-config")
}

// validateUserDataOnly refuses the fields only the generated #cloud-config
// carries, which spec.cloudInit.userDataOnly leaves out.
func validateUserDataOnly(c *ErrorList, in *Instance) {
	s := &in.Spec
	if s.Agent == AgentIgnition {
		c.Add("spec.cloudInit.userDataOnly", "is for cloud-init guests; an Ignition guest reads no user-data")
		return
	}
	for _, f := range []struct {
		field string
		set   bool
	}{
		{"spec.fqdn", s.FQDN != ""}, {"spec.users", len(s.Users) > 0}, {"spec.files", len(s.Files) > 0},
		{"spec.units", len(s.Units) > 0}, {"spec.mounts", len(s.Mounts) > 0}, {"spec.timezone", s.Timezone != ""},
		{"spec.packages", len(s.Packages) > 0}, {"spec.commands", len(s.Commands) > 0}, {"spec.bootCommands", len(s.BootCommands) > 0}, {"spec.ntp", s.NTP != nil},
		{"spec.storage", s.Storage != nil}, {"spec.sshHostKeys", s.SSHHostKeys != nil},
	} {
		if f.set {
			c.Add(f.field, "goes into the generated #cloud-config, which spec.cloudInit.userDataOnly leaves out: remove one of them (or put this in spec.cloudInit.userData)")
		}
	}
}

// validateNoDefaultUser refuses what spec.cloudInit.noDefaultUser cannot
// do: without spec.users no users key is generated, and cloud-init's own
// configuration then creates the default user anyway; the meta-data keys
// of spec.sshAuthorizedKeys would have no user to go to.
func validateNoDefaultUser(c *ErrorList, s *Spec) {
	const f = "spec.cloudInit.noDefaultUser"
	switch {
	case s.Agent == AgentIgnition:
		c.Add(f, "is for cloud-init guests; an Ignition guest always has its core user")
	case len(s.Users) == 0:
		c.Add(f, "needs spec.users: without them cloud-init's own configuration creates the default user")
	case len(s.SSHAuthorizedKeys) > 0 || s.SSHAuthorizedKeysFrom != nil:
		c.Add(fromField("spec.sshAuthorizedKeys", s.SSHAuthorizedKeysFrom), "go to the image's default user, which spec.cloudInit.noDefaultUser leaves out: give them to a user of spec.users")
	}
}
