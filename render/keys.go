package render

import (
	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/spec"
)

// keys checks the SSH keys of the instance with spec.AuthorizedKeyProblem,
// the rule of the spec's own keys: the spec's keys that only look odd
// (Validate refuses those sshd skips), and every key inside the raw
// configs the agent reads, which no one else looks into
// (spec.RawKeyProblems): a cloud-config's ssh_authorized_keys and
// users[].ssh_authorized_keys (user and vendor data), an Ignition
// config's or Butane's passwd.users[] keys. A key sshd would skip is an
// error, one that looks odd a warning.
func (r *Result) keys(inst *spec.Instance, agent string) {
	r.Warnings = append(r.Warnings, inst.AuthorizedKeyWarnings()...)
	add := func(field, text string, ps []spec.RawKeyProblem) {
		for _, p := range ps {
			e := &spec.FieldError{Field: field, Message: p.String(), TextLine: spec.TextLine(text, p.Path)}
			if p.Drop {
				r.Errors = append(r.Errors, e)
			} else {
				r.Warnings = append(r.Warnings, e)
			}
		}
	}
	if agent == spec.AgentIgnition {
		add("spec.ignition.config", inst.Spec.Ignition.Config, spec.RawKeyProblems(spec.RawIgnition, inst.Spec.Ignition.Config))
		add("spec.ignition.butane", inst.Spec.Ignition.Butane, spec.RawKeyProblems(spec.RawButane, inst.Spec.Ignition.Butane))
		return
	}
	ci := &inst.Spec.CloudInit
	for _, c := range []struct{ field, data string }{
		{"spec.cloudInit.userData", ci.UserData},
		{"spec.cloudInit.vendorData", ci.VendorData},
	} {
		if cloudinit.PartType([]byte(c.data)) == cloudinit.TypeCloudConfig {
			add(c.field, c.data, spec.RawKeyProblems(spec.RawCloudConfig, c.data))
		}
	}
}
