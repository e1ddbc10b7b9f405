package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/qemutest"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

const example = "../../../examples/ubuntu-server/instance.yaml"

// image is one seed written to disk with our writers.
type image struct {
	name string
	path string
	seed *seed.Seed
}

func build(t *testing.T, specPath string, ds seed.Datasource, f media.Format) image {
	t.Helper()
	inst, err := spec.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	s, err := seed.Build(inst, ds, seed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ext := map[media.Format]string{media.ISO9660: ".iso", media.VFAT: ".img"}[f]
	name := string(ds) + "-" + strings.TrimSuffix(filepath.Base(specPath), ".yaml") + ext
	p := filepath.Join(t.TempDir(), name)
	var buf bytes.Buffer
	if err := media.Write(&buf, s, f, media.Options{ModTime: time.Unix(1700000000, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return image{name: name, path: p, seed: s}
}

// TestKernelMountsSeeds boots a real kernel twice (each label may appear on
// one attached image per boot, since the label check stops at the first
// device) and compares every file the kernel reads with what was written:
// NoCloud and ConfigDrive, ISO9660 (Rock Ridge and Joliet views) and VFAT.
func TestKernelMountsSeeds(t *testing.T) {
	boots := [][]struct {
		img   image
		views []qemutest.View
		label string
	}{
		{
			{build(t, example, seed.NoCloud, media.ISO9660), []qemutest.View{qemutest.ISO9660, qemutest.Joliet}, "cidata"},
			{build(t, example, seed.ConfigDrive, media.VFAT), []qemutest.View{qemutest.VFAT}, "config-2"},
		},
		{
			{build(t, example, seed.ConfigDrive, media.ISO9660), []qemutest.View{qemutest.ISO9660, qemutest.Joliet}, "config-2"},
			{build(t, example, seed.NoCloud, media.VFAT), []qemutest.View{qemutest.VFAT}, "cidata"},
		},
		{
			{build(t, "../../../examples/dev-vm.yaml", seed.NoCloud, media.ISO9660), []qemutest.View{qemutest.ISO9660, qemutest.ISO9660Plain}, "cidata"},
		},
	}
	for i, boot := range boots {
		var probe qemutest.Probe
		var want []image
		for _, b := range boot {
			for j, v := range b.views {
				m := qemutest.Mount{Image: b.img.path, View: v}
				if j == 0 {
					m.Label = b.label
				}
				probe.Mounts = append(probe.Mounts, m)
				want = append(want, b.img)
			}
		}
		rep := qemutest.Inspect(t, probe)
		for k, fsys := range rep.FS {
			img := want[k]
			t.Run(img.name+"/"+string(fsys.View), func(t *testing.T) {
				if fsys.View == qemutest.ISO9660Plain {
					// Without Rock Ridge and Joliet the kernel shows the
					// primary 8.3 names: all files must still be there.
					if len(fsys.Regular()) != len(img.seed.Files) {
						t.Errorf("plain ISO 9660 view has %d files, want %d: %v", len(fsys.Regular()), len(img.seed.Files), fsys.Paths())
					}
				} else {
					checkTree(t, img.seed, fsys)
				}
				if probe.Mounts[k].Label != "" && !fsys.LabelFound {
					t.Errorf("the guest found no device labelled %q (device %s, findfs %q)", probe.Mounts[k].Label, fsys.Device, fsys.LabelDevice)
				}
				if i == 0 && k == 0 {
					readWithCloudInit(t, img.seed, fsys)
				}
			})
		}
		// The ConfigDrive read by cloud-init from the kernel's view.
		for k, fsys := range rep.FS {
			if want[k].seed.Datasource == seed.ConfigDrive && fsys.View != qemutest.Joliet {
				t.Run(want[k].name+"/cloud-init", func(t *testing.T) { readWithCloudInit(t, want[k].seed, fsys) })
				break
			}
		}
	}
}

// checkTree compares the regular files the kernel read with the seed.
func checkTree(t *testing.T, s *seed.Seed, fsys *qemutest.FS) {
	t.Helper()
	got := fsys.Regular()
	var gotPaths, wantPaths []string
	for p := range got {
		gotPaths = append(gotPaths, p)
	}
	for _, f := range s.Files {
		wantPaths = append(wantPaths, f.Path)
		g, ok := got[f.Path]
		if !ok {
			continue
		}
		if !bytes.Equal(g, f.Data) {
			t.Errorf("%s: the kernel read %d bytes that differ from the %d written", f.Path, len(g), len(f.Data))
		}
	}
	sort.Strings(gotPaths)
	sort.Strings(wantPaths)
	if strings.Join(gotPaths, "\n") != strings.Join(wantPaths, "\n") {
		t.Errorf("the kernel sees files\n  %v\nwant\n  %v\n(mount: %s)", gotPaths, wantPaths, fsys.MountLine)
	}
}

// readWithCloudInit writes the files as the kernel read them into a
// directory and lets cloud-init's datasource code read it: NoCloud's
// pathprefix2dict and meta-data loader, or ConfigDrive's reader.
func readWithCloudInit(t *testing.T, s *seed.Seed, fsys *qemutest.FS) {
	t.Helper()
	dir := t.TempDir()
	for p, f := range fsys.Regular() {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inst, err := spec.Load(example)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		InstanceID string   `json:"instance_id"`
		Hostname   string   `json:"hostname"`
		Keys       []string `json:"keys"`
		UserData   string   `json:"user_data"`
		HasNetwork bool     `json:"has_network"`
	}
	switch s.Datasource {
	case seed.NoCloud:
		cloudinittest.Run(t, `
import json, sys
from cloudinit import util
from cloudinit.sources import normalize_pubkey_data
d = json.load(sys.stdin)
seed = util.pathprefix2dict(d, required=["user-data", "meta-data"], optional=["vendor-data", "network-config"])
md = util.load_yaml(seed["meta-data"])
print(json.dumps({"instance_id": md["instance-id"], "hostname": md["local-hostname"],
  "keys": normalize_pubkey_data(md.get("public-keys", [])),
  "user_data": seed["user-data"].decode(), "has_network": bool(util.load_yaml(seed.get("network-config", b"{}")))}))
`, dir, &got)
	case seed.ConfigDrive:
		cloudinittest.Run(t, `
import json, sys
from cloudinit.sources.helpers import openstack
from cloudinit.sources import normalize_pubkey_data
r = openstack.ConfigDriveReader(json.load(sys.stdin)).read_v2()
md = r["metadata"]
print(json.dumps({"instance_id": md["instance-id"], "hostname": md["local-hostname"],
  "keys": normalize_pubkey_data(md.get("public_keys", {})),
  "user_data": r["userdata"].decode(), "has_network": bool(r.get("networkdata"))}))
`, dir, &got)
	}
	if got.InstanceID != inst.Spec.InstanceID {
		t.Errorf("cloud-init's instance-id = %q, want %q", got.InstanceID, inst.Spec.InstanceID)
	}
	if got.Hostname != inst.Spec.Hostname && got.Hostname != inst.Spec.FQDN {
		t.Errorf("cloud-init's local-hostname = %q, want %q", got.Hostname, inst.Spec.Hostname)
	}
	if len(got.Keys) != len(inst.Spec.SSHAuthorizedKeys) || len(got.Keys) > 0 && got.Keys[0] != inst.Spec.SSHAuthorizedKeys[0] {
		t.Errorf("cloud-init's public keys = %q, want %q", got.Keys, inst.Spec.SSHAuthorizedKeys)
	}
	if !strings.HasPrefix(got.UserData, "#cloud-config") {
		t.Errorf("cloud-init's user-data starts %q", firstLine(got.UserData))
	}
	if !got.HasNetwork {
		t.Errorf("cloud-init found no network configuration")
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
