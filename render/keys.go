package render

import (
	"fmt"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/spec"
)

// keys checks the SSH keys of the instance with spec.AuthorizedKeyProblem,
// the rule of the spec's own keys: the spec's keys that only look odd
// (Validate refuses those sshd skips), and every key inside the raw
// configs the agent reads, which no one else looks into: a cloud-config's
// ssh_authorized_keys and users[].ssh_authorized_keys (user and vendor
// data), an Ignition config's or Butane's passwd.users[] keys. A key sshd
// would skip is an error, one that looks odd a warning (issue 33 item 2).
func (r *Result) keys(inst *spec.Instance, agent string) {
	r.Warnings = append(r.Warnings, inst.AuthorizedKeyWarnings()...)
	check := func(field, path string, keys any) {
		list, _ := keys.([]any)
		for i, k := range list {
			key, ok := k.(string)
			if !ok {
				continue // the agent's own schema says what is wrong
			}
			msg, drop := spec.AuthorizedKeyProblem(key)
			if msg == "" {
				continue
			}
			e := &spec.FieldError{Field: field, Message: fmt.Sprintf("%s[%d]: %s", path, i, msg)}
			if drop {
				r.Errors = append(r.Errors, e)
			} else {
				r.Warnings = append(r.Warnings, e)
			}
		}
	}
	users := func(field string, doc map[string]any, prefix, key string) {
		list, _ := doc["users"].([]any)
		for i, u := range list {
			if m, ok := u.(map[string]any); ok {
				check(field, fmt.Sprintf("%susers[%d].%s", prefix, i, key), m[key])
			}
		}
	}
	if agent == spec.AgentIgnition {
		ig := &inst.Spec.Ignition
		for _, c := range []struct{ field, data, key string }{
			{"spec.ignition.config", ig.Config, "sshAuthorizedKeys"},
			{"spec.ignition.butane", ig.Butane, "ssh_authorized_keys"},
		} {
			if doc := mapping(c.data); doc != nil {
				passwd, _ := doc["passwd"].(map[string]any)
				users(c.field, passwd, "passwd.", c.key)
			}
		}
		return
	}
	ci := &inst.Spec.CloudInit
	for _, c := range []struct{ field, data string }{
		{"spec.cloudInit.userData", ci.UserData},
		{"spec.cloudInit.vendorData", ci.VendorData},
	} {
		if cloudinit.PartType([]byte(c.data)) != cloudinit.TypeCloudConfig {
			continue
		}
		if doc := mapping(c.data); doc != nil {
			check(c.field, "ssh_authorized_keys", doc["ssh_authorized_keys"])
			users(c.field, doc, "", "ssh_authorized_keys")
		}
	}
}

// mapping reads a YAML (or JSON) document as a mapping; nil when it is
// none, which rendering reports.
func mapping(data string) map[string]any {
	var doc map[string]any
	if data == "" || yamlbound.Unmarshal([]byte(data), &doc, spec.FieldYAML) != nil {
		return nil
	}
	return doc
}
