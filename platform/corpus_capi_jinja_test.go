package platform_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/capi"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// jinjaRenderer reads each seed directory (cloud/seed/nocloud or
// cloud/seed/config_drive under it) as cloud-init 22.4 does on first boot
// (the datasource's get_data, which writes instance-data.json), then
// renders its user data with cloud-init's Jinja handler
// (render_jinja_payload_from_file), and returns each rendered text.
const jinjaRenderer = `
import json, os, sys
from unittest import mock
from cloudinit import helpers, settings, distros, util
from cloudinit.sources import DataSourceNoCloud as nc, DataSourceConfigDrive as cd
from cloudinit.handlers.jinja_template import render_jinja_payload_from_file
out = []
for tmp in json.load(sys.stdin):
    paths = helpers.Paths({"cloud_dir": tmp + "/cloud", "run_dir": tmp + "/run"})
    d = distros.fetch("ubuntu")("ubuntu", {}, paths)
    cfg = util.mergemanydict([{"datasource": {"NoCloud": {"fs_label": None}}}, settings.CFG_BUILTIN])
    if os.path.isdir(tmp + "/cloud/seed/config_drive"):
        ds = cd.DataSourceConfigDrive(cfg, d, paths)
    else:
        ds = nc.DataSourceNoCloud(cfg, d, paths)
    with mock.patch("cloudinit.dmi.read_dmi_data", return_value=None), mock.patch("cloudinit.util.get_cmdline", return_value=""), \
         mock.patch("cloudinit.util.find_devs_with", return_value=[]):
        if not ds.get_data():
            sys.exit("no seed in " + tmp)
    ud = ds.userdata_raw
    if isinstance(ud, bytes):
        ud = ud.decode()
    out.append(render_jinja_payload_from_file(ud, "user-data", paths.get_runpath("instance_data")))
json.dump(out, sys.stdout)
`

// TestCorpusCAPIJinjaRendered builds every published Cluster API object
// whose user data is CABPK's Jinja template (CAPO's,
// CAPV's and CAPA's templates name the node {{ local_hostname }} or
// {{ ds.meta_data.local_hostname }}) for a machine (--machine), and has
// cloud-init 22.4 read the seed and render it: nothing is left literal,
// nothing is missing from the instance data, and the machine's name is
// where the templates asked for it.
func TestCorpusCAPIJinjaRendered(t *testing.T) {
	cloudinittest.Require(t)
	vars, err := readVarsEnv(filepath.Join("testdata", "corpus", "capi", "vars.env"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "corpus", "capi")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var keys, seeds []string
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".yaml") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		data, err := clusterctlSubst(raw, vars)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := platform.Split(n, data)
		if err != nil {
			continue
		}
		objects, _ := convert.Contents(docs)
		for i, k := range objects {
			opts := capiCorpusOpts
			opts.Object, opts.Machine = k, fmt.Sprintf("machine-%d-x7k2p", i)
			rs, err := convert.Documents(t.Context(), docs, opts)
			if err != nil {
				t.Logf("%s#%s: refused (expect.txt says why): %v", n, k, strings.SplitN(err.Error(), "\n", 2)[0])
				continue
			}
			if !strings.HasPrefix(rs[0].Instance.Spec.CloudInit.UserData, capi.JinjaHeader) {
				continue
			}
			ds, sub := seed.NoCloud, "nocloud"
			if rs[0].Instance.Spec.Datasource == spec.DatasourceConfigDrive {
				ds, sub = seed.ConfigDrive, "config_drive"
			}
			s, err := seed.Build(rs[0].Instance, ds, seed.Options{})
			if err != nil {
				t.Fatalf("%s#%s: %v", n, k, err)
			}
			tmp := t.TempDir()
			sd := filepath.Join(tmp, "cloud", "seed", sub)
			if err := os.MkdirAll(sd, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := s.WriteDir(sd, 0o600); err != nil {
				t.Fatal(err)
			}
			keys, seeds = append(keys, n+"#"+k+" "+opts.Machine), append(seeds, tmp)
		}
	}
	if len(seeds) < 13 {
		t.Fatalf("%d objects with CABPK's Jinja header, want the 13 published worker templates at least: %q", len(seeds), keys)
	}
	var rendered []*string
	cloudinittest.Run(t, jinjaRenderer, seeds, &rendered)
	for i, r := range rendered {
		key, machine, _ := strings.Cut(keys[i], " ")
		switch {
		case r == nil:
			t.Errorf("%s: cloud-init ignored its Jinja template", key)
		case strings.Contains(*r, "{{") || strings.Contains(*r, "{%") || strings.Contains(*r, "CI_MISSING_JINJA_VAR"):
			t.Errorf("%s: left literal or missing after cloud-init's rendering:\n%s", key, *r)
		case !strings.Contains(*r, machine):
			t.Errorf("%s: the machine's name %s is nowhere in the rendered user data:\n%s", key, machine, *r)
		}
	}
	t.Logf("%d objects rendered by cloud-init's Jinja: %s", len(keys), strings.Join(keys, ", "))
}
