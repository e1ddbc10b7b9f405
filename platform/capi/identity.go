package capi

// identity names the machine built. Cluster API never sets a host name:
// each Machine gets one from its infrastructure provider (the VM named
// after the Machine, its metadata's local-hostname), and a template's
// data is rendered per Machine. Options.Machine (--machine NAME) is that
// Machine's name, which gives the host name and the instance id, so two
// machines built from one template never share them. Without it the
// machine is named after the object; for a template (a
// KubeadmConfigTemplate or KubeadmControlPlane(Template), whose machines
// are many) that is a warning, since every machine built so shares one
// identity and cloud-init would run first boot only once per instance id.
func (c *conv) identity() {
	if c.opts.Machine != "" {
		c.b.Instance.Metadata.Name = c.opts.Machine
		// A bad name is the flag's problem; the spec's validation names
		// metadata.name.
		return
	}
	c.b.From("metadata.name", "metadata.name")
	if c.src.role == roleMachine {
		return
	}
	c.b.Warnf("metadata.name", "every machine built from this template without --machine gets the host name and instance id %q: Cluster API names each of its machines; give --machine NAME for each", c.src.name)
}
