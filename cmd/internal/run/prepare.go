package run

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// render runs every check `vminit build` runs and returns the seed or
// Ignition config for the agent (with serve, only the checks matter: the
// metadata server renders the same data).
func (c *config) render() (*render.Result, error) {
	t := render.Target{LenientSchema: true, NetworkConfigVersion: 2}
	if c.agent == agentCloudInit && !c.Serve {
		t.Datasource = seed.Datasource(c.datasource)
	}
	rep := render.Instance(c.Instance, t)
	if !rep.OK() {
		return nil, fmt.Errorf("run: the spec does not render: %w", rep.Errors)
	}
	return rep, nil
}

// writeDelivery writes the seed drive or the fw_cfg file into dir.
func (c *config) writeDelivery(rep *render.Result, dir string, f *files) error {
	if c.Serve {
		return nil
	}
	var s *seed.Seed
	switch {
	case c.agent == agentCloudInit:
		s = rep.Seed
	case c.datasource == DatasourceFwCfg:
		f.fwCfg = filepath.Join(dir, "config.ign")
		return os.WriteFile(f.fwCfg, rep.Ignition.Config, 0o600)
	default:
		var err error
		if s, err = delivery.Seed(rep.Ignition.Config, c.Instance, seed.ConfigDrive); err != nil {
			return err
		}
	}
	ext := ".iso"
	if c.media == media.VFAT {
		ext = ".img"
	}
	f.seed = filepath.Join(dir, "seed"+ext)
	out, err := os.OpenFile(f.seed, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// 4 KiB alignment: QEMU wants whole sectors of its block size.
	err = media.Write(out, s, c.media, media.Options{Alignment: 4096})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// primaryMAC is the MAC of the guest's first NIC when the spec names none:
// QEMU's own default, given explicitly so the metadata server can name it.
const primaryMAC = "52:54:00:12:34:56"

// servedInstance is the instance the metadata server answers with. An
// EC2 guest finds its NICs in the metadata (network/interfaces/macs/),
// which the server renders from the spec's ethernets that name a MAC; a
// spec without a network gets, in the served copy only, what a cloud
// always has: its first NIC, by its MAC, with DHCP (which is also
// cloud-init's fallback), so cloud-init 22.4 does not warn "Metadata
// 'network' key not valid". The caller's instance is not modified.
func (c *config) servedInstance() *spec.Instance {
	inst := c.Instance
	if c.dialect != spec.DialectEC2 || inst.Spec.Network != nil {
		return inst
	}
	cp := *inst
	cp.Spec.Network = &spec.Network{Ethernets: map[string]spec.Ethernet{
		"eth0": {Match: &spec.Match{MACAddress: primaryMAC}, Interface: spec.Interface{DHCP4: true}},
	}}
	c.macs[0] = primaryMAC
	return &cp
}
