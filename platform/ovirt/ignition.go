package ovirt

import (
	"encoding/json"
	"errors"
	"strings"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// ignitionGuest reads initialization for an Ignition guest, as
// IgnitionHandler does: custom_script is the config; the hostname, and
// user_name with the password and keys, are added to it.
func ignitionGuest(b *platform.Builder, in *ovirtsdk.Initialization, ip, script string, opts platform.Options) {
	s := &b.Instance.Spec
	s.Agent = spec.AgentIgnition
	s.Ignition.Variant = spec.VariantRHCOS
	cfg := strings.TrimSpace(script)
	if cfg == "" {
		cfg = "{}"
	}
	// IgnitionHandler sets the osinfo's version, 2.3.0 for rhcos_x64.
	cfg = injectVersion(cfg)
	up, from, err := ignition.Upgrade([]byte(cfg))
	var se *ignition.SyntaxError
	switch {
	case errors.As(err, &se):
		// The position in the script as written, before the trimming.
		lead := script[:len(script)-len(strings.TrimLeft(script, " \t\r\n"))]
		line, col := se.Line+strings.Count(lead, "\n"), se.Column
		if se.Line == 1 {
			col += len(lead) - strings.LastIndexByte(lead, '\n') - 1
		}
		b.TextErrorf(ip+".custom_script", line, col, "not JSON: %v (the engine's IgnitionHandler cannot parse it either: the VM does not start)", se.Err)
		return
	case err != nil:
		b.Errorf(ip+".custom_script", "%v", err)
		return
	}
	if !strings.HasPrefix(from, "3.") {
		b.Warnf(ip+".custom_script", "Ignition spec %s translated to spec 3", from)
	}
	s.Ignition.Config = string(up)
	b.From("spec.ignition.config", ip+".custom_script")
	if name, _ := in.UserName(); name == "" {
		if pw, _ := in.RootPassword(); pw != "" {
			b.Warnf(ip+".root_password", "ignored without user_name, as oVirt ignores it for Ignition guests")
		}
		if keys := splitKeys(optional(in.AuthorizedSshKeys)); len(keys) > 0 {
			// oVirt drops them too; the spec gives them to "core", the
			// user Fedora CoreOS and RHCOS log in with.
			s.SSHAuthorizedKeys = keys
			b.From("spec.sshAuthorizedKeys", ip+".authorized_ssh_keys")
		}
		return
	}
	user(b, in, ip, opts, "")
	if tz, _ := in.Timezone(); tz != "" {
		b.Warnf(ip+".timezone", "ignored for an Ignition guest, as oVirt ignores it")
	}
	if ncs, ok := in.NicConfigurations(); ok && len(ncs.Slice()) > 0 {
		b.Warnf(ip+".nic_configurations", "ignored for an Ignition guest, as oVirt ignores them: describe the network in the Ignition config")
	}
}

// injectVersion sets ignition.version to 2.3.0 in a config that has
// none, as IgnitionHandler does; text that is no JSON object is left for
// Upgrade to report.
func injectVersion(cfg string) string {
	var m map[string]any
	if json.Unmarshal([]byte(cfg), &m) != nil {
		return cfg
	}
	ig, _ := m["ignition"].(map[string]any)
	if ig == nil {
		ig = map[string]any{}
	}
	if _, ok := ig["version"]; ok {
		return cfg
	}
	ig["version"] = "2.3.0"
	m["ignition"] = ig
	out, err := json.Marshal(m)
	if err != nil {
		return cfg
	}
	return string(out)
}
