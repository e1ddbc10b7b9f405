package seed

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/spec"
)

// The readers of a seed directory are cloudinittest's.
const (
	pyNoCloud     = cloudinittest.NoCloudReader
	pyConfigDrive = cloudinittest.ConfigDriveReader
)

func readWith(t *testing.T, script string, s *Seed, knownMACs map[string]string) *cloudinittest.Seed {
	t.Helper()
	dir := t.TempDir()
	if err := s.WriteDir(dir, 0o600); err != nil {
		t.Fatal(err)
	}
	return cloudinittest.ReadSeed(t, script, dir, knownMACs)
}

func keysOf(inst *spec.Instance) []string {
	var out []string
	for _, k := range inst.Spec.SSHAuthorizedKeys {
		out = append(out, strings.TrimSpace(k))
	}
	return out
}

func TestNoCloudReadByCloudInit(t *testing.T) {
	for name := range goldenCases {
		inst := load(t, name)
		for _, opts := range []Options{{}, {NetworkConfigVersion: 1}} {
			if opts.NetworkConfigVersion == 1 && fileExists(filepath.Join("testdata", name, "golden", nocloudV1.name+".err")) {
				continue // TestGolden checks the refusal
			}
			s, err := Build(inst, NoCloud, opts)
			if err != nil {
				t.Fatal(err)
			}
			rb := readWith(t, pyNoCloud, s, nil)
			ud, _ := s.Lookup("user-data")
			vd, _ := s.Lookup("vendor-data")
			wantHost := inst.Spec.Hostname
			wantFQDN := inst.Spec.FQDN
			if wantFQDN == "" {
				wantFQDN = wantHost
			}
			switch {
			case rb.InstanceID != inst.Spec.InstanceID:
				t.Errorf("%s: instance-id %q, want %q", name, rb.InstanceID, inst.Spec.InstanceID)
			case rb.Hostname != wantHost || rb.FQDN != wantFQDN:
				t.Errorf("%s: hostname %q fqdn %q, want %q %q", name, rb.Hostname, rb.FQDN, wantHost, wantFQDN)
			case strings.Join(rb.Keys, "\n") != strings.Join(keysOf(inst), "\n"):
				t.Errorf("%s: public keys %q", name, rb.Keys)
			case !bytes.Equal(rb.UserData, ud):
				t.Errorf("%s: user-data differs", name)
			}
			if got := base64Bytes(rb.VendorData); !bytes.Equal(got, vd) {
				t.Errorf("%s: vendor-data %q, want %q", name, got, vd)
			}
			nc, _ := s.Lookup("network-config")
			if inst.Spec.Network == nil {
				if rb.NetworkConfig != nil {
					t.Errorf("%s: network-config %v", name, rb.NetworkConfig)
				}
			} else {
				var want map[string]any
				yaml.Unmarshal(nc, &want)
				if show(rb.NetworkConfig) != show(want) {
					t.Errorf("%s: cloud-init reads network-config\n%s\nwe wrote\n%s", name, show(rb.NetworkConfig), nc)
				}
				if v := rb.NetworkConfig["version"]; v != float64(max(opts.NetworkConfigVersion, 1)) && !(opts.NetworkConfigVersion == 0 && v == 2.0) {
					t.Errorf("%s: network-config version %v", name, v)
				}
			}
			if rb.Config["hostname"] != inst.Spec.Hostname {
				t.Errorf("%s: the final cloud-config has hostname %v", name, rb.Config["hostname"])
			}
			for k, v := range inst.Spec.CloudInit.MetaData {
				if show(rb.Metadata[k]) != show(v) {
					t.Errorf("%s: meta-data %s = %v, want %v", name, k, rb.Metadata[k], v)
				}
			}
		}
	}
}

func base64Bytes(v any) []byte {
	s, _ := v.(string)
	b, _ := base64.StdEncoding.DecodeString(s)
	return b
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestConfigDriveReadByCloudInit(t *testing.T) {
	for name, renders := range goldenCases {
		inst := load(t, name)
		ok := false
		for _, r := range renders {
			ok = ok || r.ds == ConfigDrive
		}
		s, err := Build(inst, ConfigDrive, Options{})
		if err != nil {
			if ok && name != "ubuntu-server" {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		known := map[string]string{}
		if n := inst.Spec.Network; n != nil {
			// The guest's names for NICs without a setName.
			for id, e := range n.Ethernets {
				if e.SetName == "" && e.Match != nil && e.Match.MACAddress != "" {
					known[strings.ToLower(e.Match.MACAddress)] = id
				}
			}
		}
		rb := readWith(t, pyConfigDrive, s, known)
		ud, _ := s.Lookup("openstack/latest/user_data")
		wantHost := inst.Spec.Hostname
		if inst.Spec.FQDN != "" {
			wantHost = inst.Spec.FQDN
		}
		if rb.InstanceID != inst.Spec.InstanceID || rb.Hostname != wantHost {
			t.Errorf("%s: instance-id %q hostname %q", name, rb.InstanceID, rb.Hostname)
		}
		if strings.Join(rb.Keys, "\n") != strings.Join(keysOf(inst), "\n") {
			t.Errorf("%s: public keys %q, want %q", name, rb.Keys, keysOf(inst))
		}
		if !bytes.Equal(rb.UserData, ud) {
			t.Errorf("%s: user_data differs", name)
		}
		if vd := inst.Spec.CloudInit.VendorData; vd == "" && rb.VendorData != nil || vd != "" && rb.VendorData != vd {
			t.Errorf("%s: vendor data %#v, want %q", name, rb.VendorData, vd)
		}
		if rb.Config["hostname"] != inst.Spec.Hostname {
			t.Errorf("%s: the final cloud-config has hostname %v", name, rb.Config["hostname"])
		}
		if n := inst.Spec.Network; n != nil {
			// cloud-init's names are the spec's configuration IDs (or
			// setNames), bonds and VLANs included.
			for id, e := range n.Ethernets {
				name := id
				if e.SetName != "" {
					name = e.SetName
				}
				if got := rb.Network[name]; got.Type != "physical" || got.MAC != strings.ToLower(e.Match.MACAddress) {
					t.Errorf("ethernet %s: %+v", name, got)
				}
			}
			for id, b := range n.Bonds {
				if got := rb.Network[id]; got.Type != "bond" || len(got.Addresses) != len(b.Addresses) {
					t.Errorf("bond %s: %+v", id, got)
				}
				for _, m := range b.Interfaces {
					if rb.Network[m].Master != id {
						t.Errorf("bond member %s: %+v", m, rb.Network[m])
					}
				}
			}
			for id, v := range n.VLANs {
				if got := rb.Network[id]; got.Type != "vlan" || got.VLANID != v.ID || got.Link != v.Link {
					t.Errorf("vlan %s: %+v (network %v)", id, got, rb.Network)
				}
			}
		}
	}
}

func TestUserDataAsCloudInitSeesIt(t *testing.T) {
	s, err := Build(load(t, "merge"), NoCloud, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rb := readWith(t, pyNoCloud, s, nil)
	if show(rb.Config["packages"]) != `["git","docker.io"]` || show(rb.Config["runcmd"]) != `[["systemctl","enable","--now","docker"],["usermod","-aG","docker","ubuntu"]]` || rb.Config["ssh_pwauth"] != false {
		t.Errorf("merged config: %s", show(rb.Config))
	}
	s, err = Build(load(t, "script"), NoCloud, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rb = readWith(t, pyNoCloud, s, nil)
	if show(rb.PartTypes) != `["text/cloud-config","text/x-shellscript"]` {
		t.Errorf("parts: %v", rb.PartTypes)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
