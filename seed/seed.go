// Package seed lays out the files of a cloud-init datasource for an
// instance spec, as plain data that package media writes to a disk image
// (ISO9660, VFAT) or a tar archive, and WriteDir to a directory.
//
// Two datasources are supported:
//
//   - NoCloud (filesystem label "cidata"): user-data and meta-data at the
//     root, always, since cloud-init rejects a seed without either;
//     network-config when the spec has a network (network-config v2 by
//     default, v1 on request); vendor-data when the spec has vendor data.
//   - ConfigDrive (label "config-2"): openstack/latest/meta_data.json and
//     user_data, always; network_data.json and vendor_data.json when there
//     is something to put in them. Only the "latest" version directory is
//     written: cloud-init falls back to it, and cloudbase-init and Ignition
//     read nothing else.
//
// For a cloudbase-init guest (spec.agent) the layout and the metadata are
// the same (cloudbase-init reads both datasources), the user data is
// package cloudbaseinit's, and ConfigDrive's meta_data.json names the
// Windows admin user and password.
//
// The same spec always gives the same bytes. Problems are returned as
// spec.Errors naming the spec field, so a CLI can list them all at once.
package seed

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vminit/vminit/cloudbaseinit"
	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/network"
	"github.com/vminit/vminit/spec"
)

// Datasource is a cloud-init datasource that reads its data from a disk.
type Datasource string

const (
	// NoCloud is cloud-init's NoCloud datasource: a filesystem labelled
	// cidata with user-data and meta-data at its root.
	NoCloud Datasource = "nocloud"
	// ConfigDrive is OpenStack's config drive: a filesystem labelled
	// config-2 with an openstack/latest directory.
	ConfigDrive Datasource = "configdrive"
)

// Datasources lists the supported datasources, for flag help and
// completion.
var Datasources = []Datasource{NoCloud, ConfigDrive}

// ErrUnknownDatasource is returned for a datasource name ParseDatasource
// does not know.
var ErrUnknownDatasource = errors.New("unknown datasource")

// ParseDatasource parses a datasource name, case-insensitively; the labels
// ("cidata", "config-2") and "config-drive" are accepted as well.
func ParseDatasource(s string) (Datasource, error) {
	switch ls := strings.ToLower(s); ls {
	case "cidata":
		return NoCloud, nil
	case "config-drive", "config-2":
		return ConfigDrive, nil
	default:
		for _, d := range Datasources {
			if ls == string(d) {
				return d, nil
			}
		}
	}
	names := make([]string, len(Datasources))
	for i, d := range Datasources {
		names[i] = string(d)
	}
	return "", fmt.Errorf("%w %q (want one of %s)", ErrUnknownDatasource, s, strings.Join(names, ", "))
}

// Label returns the filesystem label cloud-init looks for: "cidata" or
// "config-2" (lower case: both cloud-init and Ignition accept it, and
// Ignition's kubevirt and proxmoxve providers accept only lower-case
// cidata).
func (d Datasource) Label() string {
	switch d {
	case NoCloud:
		return "cidata"
	case ConfigDrive:
		return "config-2"
	}
	return ""
}

// UserDataPath is where the datasource keeps the user data:
// "user-data" or "openstack/latest/user_data".
func (d Datasource) UserDataPath() string {
	if d == ConfigDrive {
		return configDriveLatest + "user_data"
	}
	return "user-data"
}

// MetaDataPath is where the datasource keeps the instance's meta-data:
// "meta-data" or "openstack/latest/meta_data.json".
func (d Datasource) MetaDataPath() string {
	if d == ConfigDrive {
		return configDriveLatest + "meta_data.json"
	}
	return "meta-data"
}

// NetworkConfigPath is where the datasource keeps the guest's network
// configuration: "network-config" (netplan-style YAML) or
// "openstack/latest/network_data.json".
func (d Datasource) NetworkConfigPath() string {
	if d == ConfigDrive {
		return configDriveLatest + "network_data.json"
	}
	return "network-config"
}

// File is one file of a seed.
type File struct {
	// Path is slash-separated and relative to the filesystem root, e.g.
	// "user-data" or "openstack/latest/meta_data.json".
	Path string
	Data []byte
}

// Seed is the content of one datasource disk.
type Seed struct {
	Datasource Datasource
	// Label is the filesystem label the datasource is found by.
	Label string
	// Files are sorted by Path.
	Files []File
}

// Options tune Build.
type Options struct {
	// NetworkConfigVersion selects NoCloud's network-config format: 2
	// (netplan-like; the default when zero) or 1. ConfigDrive always
	// carries OpenStack's network_data.json and ignores it.
	NetworkConfigVersion int
	// ReportTo, the base URL of a vminit server, makes the user data
	// report the first boot to it (cloudinit.WithReport).
	ReportTo string
}

// Build renders inst (defaulted and valid, as spec.Load returns it) into
// the files of datasource ds. Every problem found is returned together as
// spec.Errors.
func Build(inst *spec.Instance, ds Datasource, opts Options) (*Seed, error) {
	if inst == nil {
		return nil, errors.New("seed: nil instance")
	}
	var b builder
	userData, err := b.userData(inst, opts)
	b.add(ds.UserDataPath(), userData, err)
	b.metadata(inst, ds, opts)
	if err := b.err(); err != nil {
		return nil, err
	}
	return &Seed{Datasource: ds, Label: ds.Label(), Files: b.sorted()}, nil
}

// BuildError returns the error Build(inst, ds, opts) would return, without
// encoding the YAML documents where that cannot fail (the user data
// generated from the spec alone, NoCloud's meta-data): for a server that
// checks every instance it loads and renders each one only when its guest
// asks. FuzzBuildError holds it to Build.
func BuildError(inst *spec.Instance, ds Datasource, opts Options) error {
	if inst == nil {
		return errors.New("seed: nil instance")
	}
	b := builder{check: true}
	userData, err := b.userData(inst, opts)
	b.add(ds.UserDataPath(), userData, err)
	b.metadata(inst, ds, opts)
	return b.err()
}

// UserData renders the user data every datasource serves for inst, and
// checks inst's vendor data with it, as Build does. With Metadata it lets
// a server that answers several datasources render the user data once.
func UserData(inst *spec.Instance) ([]byte, error) {
	var b builder
	data, err := b.userData(inst, Options{})
	b.add("user-data", nil, err) // the error only
	return data, b.err()
}

// Metadata renders the files of datasource ds other than the user data,
// at the paths Build gives them: NoCloud's meta-data, network-config and
// vendor-data; ConfigDrive's openstack/latest/meta_data.json,
// network_data.json and vendor_data.json.
func Metadata(inst *spec.Instance, ds Datasource, opts Options) ([]File, error) {
	var b builder
	b.metadata(inst, ds, opts)
	if err := b.err(); err != nil {
		return nil, err
	}
	return b.sorted(), nil
}

const configDriveLatest = "openstack/latest/"

// builder collects a seed's files and every problem found rendering them.
type builder struct {
	files    []File
	problems spec.Errors
	fatal    error
	check    bool // BuildError: the errors only, without encoding what cannot fail
}

// add records the file at p, or err: field errors join the problems,
// the first other error is fatal.
func (b *builder) add(p string, data []byte, err error) {
	if err != nil {
		if es := spec.AsErrors(err); es != nil {
			b.problems = append(b.problems, es...)
		} else if b.fatal == nil {
			b.fatal = fmt.Errorf("seed: rendering %s: %w", p, err)
		}
		return
	}
	if data != nil {
		b.files = append(b.files, File{Path: p, Data: data})
	}
}

// userData checks the vendor data and renders the user data, with the
// first-boot report when opts.ReportTo names a server; its error is left
// to add (under the datasource's path for it).
func (b *builder) userData(inst *spec.Instance, opts Options) ([]byte, error) {
	if inst.Spec.Agent == spec.AgentCloudbaseInit {
		// cloudbase-init's own user data (its errors name the fields;
		// vendor data is one of them: it reads none).
		if opts.ReportTo != "" {
			return nil, errors.New("the first-boot report is for cloud-init and Ignition guests; cloudbase-init has no way to send it")
		}
		return cloudbaseinit.UserData(inst)
	}
	if err := cloudinit.CheckUserData(cloudinit.VendorData(inst)); err != nil {
		b.problems = append(b.problems, &spec.FieldError{Field: "spec.cloudInit.vendorData", Message: err.Error()})
	}
	if b.check && opts.ReportTo == "" {
		return nil, cloudinit.UserDataError(inst)
	}
	data, err := cloudinit.UserData(inst)
	if err != nil || opts.ReportTo == "" {
		return data, err
	}
	if data, err = cloudinit.WithReport(data, opts.ReportTo); err != nil {
		return nil, fmt.Errorf("the first-boot report to %s: %w", opts.ReportTo, err)
	}
	return data, nil
}

func (b *builder) metadata(inst *spec.Instance, ds Datasource, opts Options) {
	net := inst.Spec.Network
	switch ds {
	case NoCloud:
		if b.check {
			b.add(ds.MetaDataPath(), nil, cloudinit.MetaDataError(inst))
		} else {
			md, err := cloudinit.MetaData(inst)
			b.add(ds.MetaDataPath(), md, err)
		}
		if net != nil {
			var nc []byte
			var err error
			switch opts.NetworkConfigVersion {
			case 0, 2:
				nc, err = network.V2(net)
			case 1:
				nc, err = network.V1(net)
			default:
				b.fatal = cmp.Or(b.fatal, fmt.Errorf("seed: network-config version %d: want 1 or 2", opts.NetworkConfigVersion))
				return
			}
			b.add(ds.NetworkConfigPath(), nc, err)
		} else if raw := inst.Spec.CloudInit.NetworkConfig; raw != "" {
			b.add(ds.NetworkConfigPath(), []byte(raw), checkRawNetworkConfig(raw))
		}
		b.add("vendor-data", cloudinit.VendorData(inst), nil)
	case ConfigDrive:
		metaData := cloudinit.ConfigDriveMetaData
		if inst.Spec.Agent == spec.AgentCloudbaseInit {
			metaData = cloudbaseinit.ConfigDriveMetaData // with the admin user
		}
		md, err := metaData(inst)
		b.add(ds.MetaDataPath(), md, err)
		if net != nil {
			nd, err := network.NetworkDataJSON(net)
			b.add(ds.NetworkConfigPath(), nd, err)
		} else if raw := inst.Spec.CloudInit.NetworkConfig; raw != "" {
			b.add(ds.NetworkConfigPath(), []byte(raw), checkRawNetworkData(raw))
		}
		vd, err := cloudinit.ConfigDriveVendorData(inst)
		b.add(configDriveLatest+"vendor_data.json", vd, err)
	default:
		b.fatal = cmp.Or(b.fatal, fmt.Errorf("seed: unknown datasource %q", ds))
	}
}

func (b *builder) err() error {
	if b.fatal != nil {
		return b.fatal
	}
	if len(b.problems) > 0 {
		return b.problems
	}
	return nil
}

func (b *builder) sorted() []File {
	slices.SortFunc(b.files, func(x, y File) int { return strings.Compare(x.Path, y.Path) })
	return b.files
}

// Lookup returns the content of the file at path, if the seed has one.
func (s *Seed) Lookup(path string) ([]byte, bool) {
	for _, f := range s.Files {
		if f.Path == path {
			return f.Data, true
		}
	}
	return nil, false
}
