package seed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/spec"

	ignconfig "github.com/coreos/ignition/v2/config"
)

// The files each datasource reads, as cloud-init names them.
var (
	noCloudFiles     = []string{"meta-data", "network-config", "user-data", "vendor-data"}
	configDriveFiles = []string{"meta_data.json", "network_data.json", "user_data", "vendor_data.json", "vendor_data2.json"}
	// openStackVersions are the openstack/<version> directories cloud-init
	// knows, oldest first; it reads the newest present, else "latest".
	openStackVersions = []string{"2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15", "2016-06-30", "2016-10-06", "2017-02-22", "2018-08-27"}
)

// MaxFileSize bounds each file Read loads; seeds hold kilobytes.
const MaxFileSize = 64 << 20

// Read recognises the seed in fsys, the file system of a datasource disk
// whose volume label is label (anyone's, not only vminit's), and loads the
// files cloud-init would read from it. The datasource follows from the
// label (cidata or config-2, in any case) or, failing that, from the
// layout; Check then reports what cloud-init would make of it.
func Read(fsys fs.FS, label string) (*Seed, error) {
	s := &Seed{Label: label}
	switch {
	case strings.EqualFold(label, NoCloud.Label()):
		s.Datasource = NoCloud
	case strings.EqualFold(label, ConfigDrive.Label()):
		s.Datasource = ConfigDrive
	case exists(fsys, "user-data") || exists(fsys, "meta-data"):
		s.Datasource = NoCloud
	case configDriveDir(fsys) != "":
		s.Datasource = ConfigDrive
	default:
		return nil, fmt.Errorf("no cloud-init seed: the label %q is neither cidata nor config-2, and there is no user-data, meta-data or openstack/latest/meta_data.json", label)
	}
	names := noCloudFiles
	dir := "."
	if s.Datasource == ConfigDrive {
		names = configDriveFiles
		if dir = configDriveDir(fsys); dir == "" {
			dir = "openstack/latest"
		}
	}
	for _, name := range names {
		p := path.Join(dir, name)
		fi, err := fs.Stat(fsys, p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", p)
		}
		if fi.Size() > MaxFileSize {
			return nil, fmt.Errorf("%s: %d bytes; the limit is %d", p, fi.Size(), MaxFileSize)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		s.Files = append(s.Files, File{Path: p, Data: data})
	}
	slices.SortFunc(s.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return s, nil
}

func exists(fsys fs.FS, p string) bool {
	_, err := fs.Stat(fsys, p)
	return err == nil
}

// configDriveDir returns the openstack/<version> directory cloud-init would
// read: the newest known version present, else latest; "" if neither has a
// meta_data.json.
func configDriveDir(fsys fs.FS) string {
	for _, v := range slices.Backward(openStackVersions) {
		if d := "openstack/" + v; exists(fsys, d) {
			if exists(fsys, d+"/meta_data.json") {
				return d
			}
			return ""
		}
	}
	if exists(fsys, "openstack/latest/meta_data.json") {
		return "openstack/latest"
	}
	return ""
}

// Check reports what cloud-init would make of s: as errors (err, a
// spec.Errors), the problems that make it fail or configure something
// other than the author meant (a label it does not look for, a missing
// required file, meta-data without an instance-id, files it cannot parse,
// network configuration it fails on or reads no interface from); as
// warnings, what it delivers but ignores or reads oddly (user data of no
// type it knows: KubeVirt's quick-start "Hi."), which `vminit build`
// writes with a warning too. Each names as Field "label" or the file's
// path.
func Check(s *Seed) (warnings spec.Errors, err error) {
	var es spec.Errors
	add := func(field, format string, args ...any) {
		es = append(es, &spec.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	warn := func(field, format string, args ...any) {
		warnings = append(warnings, &spec.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	switch s.Datasource {
	case NoCloud:
		if s.Label != "cidata" && s.Label != "CIDATA" {
			add("label", "%q: cloud-init's NoCloud looks for the label cidata (or CIDATA), exactly", s.Label)
		}
		checkNoCloud(s, add, warn)
	case ConfigDrive:
		if s.Label != "config-2" && s.Label != "CONFIG-2" {
			add("label", "%q: cloud-init's ConfigDrive looks for the label config-2 (or CONFIG-2), exactly", s.Label)
		}
		checkConfigDrive(s, add, warn)
	default:
		return nil, fmt.Errorf("seed: unknown datasource %q", s.Datasource)
	}
	if len(es) > 0 {
		return warnings, es
	}
	return warnings, nil
}

type addFunc func(field, format string, args ...any)

func checkNoCloud(s *Seed, add, warn addFunc) {
	for _, req := range []string{"meta-data", "user-data"} {
		if _, ok := s.Lookup(req); !ok {
			add(req, "missing: cloud-init's NoCloud needs both user-data and meta-data (an empty file will do) and otherwise rejects the disk")
		}
	}
	if md, ok := s.Lookup("meta-data"); ok {
		var v any
		if err := yamlbound.Unmarshal(md, &v, yamlbound.Limits{Bytes: spec.MaxSpecSize}); err != nil {
			add("meta-data", "%s", yamlbound.Describe(err, "not YAML"))
		} else if m, ok := v.(map[string]any); !ok && v != nil {
			add("meta-data", "must be a mapping (YAML or JSON object)")
		} else if id, _ := m["instance-id"].(string); id == "" {
			add("meta-data", "no instance-id: cloud-init then uses \"nocloud\", the same for every VM, and cannot tell a new VM from a reboot")
		}
	}
	if data, ok := s.Lookup("user-data"); ok {
		checkUserData("user-data", data, add, warn)
	}
	if data, ok := s.Lookup("vendor-data"); ok {
		if err := cloudinit.CheckUserData(data); err != nil {
			add("vendor-data", "%v", err)
		}
	}
	if nc, ok := s.Lookup("network-config"); ok && len(nc) > 0 {
		checkNetworkConfig(nc, add)
	}
}

func checkConfigDrive(s *Seed, add, warn addFunc) {
	var dir string
	for _, f := range s.Files {
		if path.Base(f.Path) == "meta_data.json" {
			dir = path.Dir(f.Path)
		}
	}
	if dir == "" {
		add("openstack/latest/meta_data.json", "missing: cloud-init's ConfigDrive needs it and otherwise ignores the disk")
		return
	}
	get := func(name string) ([]byte, string, bool) {
		p := path.Join(dir, name)
		data, ok := s.Lookup(p)
		return data, p, ok
	}
	data, p, _ := get("meta_data.json")
	var md map[string]any
	if err := json.Unmarshal(data, &md); err != nil {
		add(p, "not a JSON object: %v", err)
	} else {
		if _, ok := md["uuid"]; !ok {
			add(p, "no uuid: cloud-init takes the instance-id from it and rejects the drive as BrokenMetadata without it")
		}
		if _, ok := md["public-keys"]; ok && md["public_keys"] == nil {
			add(p, "public-keys is read only from the legacy (v1) layout; under openstack/ cloud-init reads public_keys")
		}
	}
	if data, p, ok := get("user_data"); ok {
		checkUserData(p, data, add, warn)
	}
	for _, name := range []string{"vendor_data.json", "vendor_data2.json"} {
		data, p, ok := get(name)
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			add(p, "not JSON: %v", err)
			continue
		}
		if m, ok := v.(map[string]any); ok {
			v = m["cloud-init"]
		}
		switch t := v.(type) {
		case string:
			if err := cloudinit.CheckUserData([]byte(t)); err != nil {
				add(p, "%v", err)
			}
		case nil, []any:
		default:
			add(p, "cloud-init takes vendor data from a string, a list or an object's \"cloud-init\" member, and ignores this %T", t)
		}
	}
	if data, p, ok := get("network_data.json"); ok {
		checkNetworkData(data, p, add)
	}
}

// checkNetworkData looks for what makes cloud-init's convert_net_json fail.
func checkNetworkData(data []byte, p string, add addFunc) {
	var nd struct {
		Links    []map[string]any `json:"links"`
		Networks []map[string]any `json:"networks"`
	}
	if err := json.Unmarshal(data, &nd); err != nil {
		add(p, "not the network_data.json format: %v", err)
		return
	}
	if len(nd.Links) == 0 {
		add(p, "links: configures no interface: cloud-init 22.4 makes interfaces of links only (networks name the link they configure), and the guest comes up without a network")
	}
	ids := map[any]bool{}
	for i, l := range nd.Links {
		ids[l["id"]] = true
		if l["id"] == nil || l["type"] == nil {
			add(p, "links[%d]: needs an id and a type (cloud-init fails without them and applies no network configuration)", i)
			continue
		}
		switch l["type"] {
		case "bond":
			if _, ok := l["bond_links"].([]any); !ok {
				add(p, "links[%d]: a bond needs bond_links", i)
			}
		case "vlan":
			if l["vlan_mac_address"] == nil || l["vlan_link"] == nil || l["vlan_id"] == nil {
				add(p, "links[%d]: a VLAN needs vlan_link, vlan_id and vlan_mac_address (cloud-init fails without them)", i)
			}
		default:
			if l["ethernet_mac_address"] == nil && l["name"] == nil {
				add(p, "links[%d]: without ethernet_mac_address (or a name) cloud-init cannot find the NIC and fails", i)
			}
		}
	}
	for i, n := range nd.Networks {
		if !ids[n["link"]] {
			add(p, "networks[%d]: link %v is not a link id", i, n["link"])
		}
		if n["type"] == nil {
			add(p, "networks[%d]: no type", i)
		}
	}
}

// checkUserData checks user data as its consumer reads it: an Ignition
// config (a JSON object with an "ignition" key, which Ignition's
// openstack, kubevirt, proxmoxve and ibmcloud platforms read from these
// drives) with Ignition's own parser, anything else as cloud-init would.
func checkUserData(field string, data []byte, add, warn addFunc) {
	if ignition.LooksLikeConfig(data) {
		if _, rep, err := ignconfig.Parse(data); err != nil || rep.IsFatal() {
			msg := strings.TrimSpace(rep.String())
			if err != nil {
				msg = strings.TrimSpace(err.Error() + "; " + msg)
			}
			add(field, "Ignition config does not validate: %s", strings.TrimSuffix(msg, ";"))
			return
		}
		checkKeys(field, spec.RawIgnition, data, add, warn)
		return
	}
	switch err := cloudinit.CheckUserData(data); {
	case errors.Is(err, cloudinit.ErrIgnored):
		warn(field, "%v", err)
	case err != nil:
		add(field, "%v", err)
	case cloudinit.PartType(data) == cloudinit.TypeCloudConfig:
		checkKeys(field, spec.RawCloudConfig, data, add, warn)
	}
}

// checkKeys judges the SSH keys inside user data as build does
// (spec.RawKeyProblems): a key sshd skips is a problem, one that looks
// odd a warning.
func checkKeys(field, format string, data []byte, add, warn addFunc) {
	for _, p := range spec.RawKeyProblems(format, string(data)) {
		if p.Drop {
			add(field, "%s", p)
		} else {
			warn(field, "%s", p)
		}
	}
}
