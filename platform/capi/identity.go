package capi

import (
	"github.com/vminit/vminit/spec"
)

// identity names the machine built. Cluster API never sets a host name:
// each Machine gets one from its infrastructure provider (the VM named
// after the Machine, its metadata's local-hostname), and a template's
// data is rendered per Machine. Options.Machine (--machine NAME) is that
// Machine's name, which gives the host name and the instance id, so two
// machines built from one template never share them. Without it the
// machine is named after its Machine when the input (or the cluster)
// holds the one naming a KubeadmConfig, else after the object; for a template (a
// KubeadmConfigTemplate or KubeadmControlPlane(Template), whose machines
// are many) that is a warning, since every machine built so shares one
// identity and cloud-init would run first boot only once per instance id.
func (c *conv) identity() {
	if m := c.opts.Machine; m != "" {
		if msg := nameProblem(m); msg != "" {
			c.b.Errorf("metadata.name", "--machine %q: %s", m, msg)
		}
		c.b.Instance.Metadata.Name = m
		return
	}
	c.b.From("metadata.name", "metadata.name")
	if c.src.role == roleMachine {
		// The Machine beside it (or in the cluster) names the VM.
		if m, _ := c.ownMachine(); m != nil && nameProblem(m.Name) == "" {
			c.b.Instance.Metadata.Name = m.Name
		}
		return
	}
	c.b.Warnf("metadata.name", "every machine built from this template without --machine gets the host name and instance id %q: Cluster API names each of its machines; give --machine NAME for each", c.src.name)
}

// nameProblem is why the spec refuses name as an instance's name (and so
// its host name), or "": the spec's own validation of a bare instance.
func nameProblem(name string) string {
	in := spec.Instance{APIVersion: spec.APIVersion, Kind: spec.Kind}
	in.Metadata.Name = name
	in.Default()
	for _, e := range spec.AsErrors(in.Validate()) {
		if e.Field == "metadata.name" || e.Field == "spec.hostname" {
			return e.Message
		}
	}
	return ""
}
