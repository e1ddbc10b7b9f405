// Package delivery gets a first-boot config to a guest: the QEMU and
// libvirt arguments that pass an Ignition config through fw_cfg, VMware
// guestinfo keys, config drives that carry Ignition, and transport size
// budgets with pointer configs for configs too large for their transport.
package delivery

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/coreos/go-semver/semver"
	ignconfig "github.com/coreos/ignition/v2/config"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// FwCfgName is where Ignition's qemu platform reads its config on x86_64
// and aarch64 (/sys/firmware/qemu_fw_cfg/by_name/opt/com.coreos/config).
const FwCfgName = "opt/com.coreos/config"

// QEMUArgs returns the qemu-system arguments that pass the config file at
// path through fw_cfg. QEMU splits option values on commas, so a comma in
// the path is doubled.
//
// s390x and ppc64le have no fw_cfg: Ignition reads a virtio disk with
// serial "ignition" there instead (QEMUDiskArgs).
func QEMUArgs(path string) []string {
	return []string{"-fw_cfg", "name=" + FwCfgName + ",file=" + qemuEscape(path)}
}

// QEMUDiskArgs returns the arguments that attach the config as the raw
// virtio disk Ignition's qemu platform reads on s390x and ppc64le.
func QEMUDiskArgs(path string) []string {
	return []string{
		"-drive", "if=none,id=ignition,format=raw,readonly=on,file=" + qemuEscape(path),
		"-device", "virtio-blk,serial=ignition,drive=ignition",
	}
}

func qemuEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// LibvirtSysinfo returns the domain XML element (libvirt 6.5 or newer)
// that passes the config file through fw_cfg, for the <domain> element.
func LibvirtSysinfo(path string) string {
	return "<sysinfo type='fwcfg'>\n  <entry name='" + FwCfgName + "' file='" + xmlEscape(path) + "'/>\n</sysinfo>\n"
}

// LibvirtQEMUCommandline returns the <qemu:commandline> form for older
// libvirt; the <domain> element must declare
// xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'.
func LibvirtQEMUCommandline(path string) string {
	var b strings.Builder
	b.WriteString("<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n")
	for _, a := range QEMUArgs(path) {
		b.WriteString("  <qemu:arg value='" + xmlEscape(a) + "'/>\n")
	}
	b.WriteString("</qemu:commandline>\n")
	return b.String()
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return strings.ReplaceAll(b.String(), "'", "&#39;")
}

// Guestinfo returns the VMware guestinfo keys and values that carry the
// config: gzip+base64, the encoding Ignition's vmware provider decodes.
func Guestinfo(config []byte) [][2]string {
	return [][2]string{
		{"guestinfo.ignition.config.data", base64.StdEncoding.EncodeToString(gzipBytes(config))},
		{"guestinfo.ignition.config.data.encoding", "gzip+base64"},
	}
}

// GuestinfoVMX formats the keys as .vmx lines (also what govc vm.change -e
// takes, one key=value per flag).
func GuestinfoVMX(config []byte) string {
	var b strings.Builder
	for _, kv := range Guestinfo(config) {
		fmt.Fprintf(&b, "%s = %q\n", kv[0], kv[1])
	}
	return b.String()
}

// gzipBytes compresses deterministically: the zero header has no name and
// no modification time.
func gzipBytes(data []byte) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Write(data)
	zw.Close()
	return b.Bytes()
}

// Seed returns a seed of datasource ds carrying the config as its user
// data, where Ignition's platforms read it (openstack and kubevirt read a
// config drive's openstack/latest/user_data; kubevirt, proxmoxve and
// ibmcloud a cidata seed's user-data), beside the meta-data the cloud-init
// seed of inst has (instance-id, host name, public keys), which Afterburn
// reads.
func Seed(config []byte, inst *spec.Instance, ds seed.Datasource) (*seed.Seed, error) {
	var md []byte
	var err error
	switch ds {
	case seed.NoCloud:
		md, err = cloudinit.MetaData(inst)
	case seed.ConfigDrive:
		md, err = cloudinit.ConfigDriveMetaData(inst)
	default:
		err = fmt.Errorf("%w %q", seed.ErrUnknownDatasource, ds)
	}
	if err != nil {
		return nil, err
	}
	return &seed.Seed{Datasource: ds, Label: ds.Label(), Files: []seed.File{
		{Path: ds.MetaDataPath(), Data: md},
		{Path: ds.UserDataPath(), Data: config},
	}}, nil
}

// Transport is a way user data reaches a guest, with a size limit.
type Transport struct {
	Name string
	// Limit is the largest payload in bytes, after Encode.
	Limit int
	// Source says where the limit comes from.
	Source string
	// Encode is what the transport does to the config (nil: nothing).
	Encode func([]byte) []byte
}

// Transports are the known budgets, each with the documented limit it
// comes from.
var Transports = []Transport{
	{Name: "ec2", Limit: 16384, Source: "EC2 user data: 16 KB"},
	{Name: "openstack", Limit: 65535, Source: "Nova user_data: 64 KB (65535 bytes)"},
	{Name: "azure", Limit: 65536, Source: "Azure custom data: 64 KB"},
	{Name: "gcp", Limit: 262144, Source: "GCE metadata value: 256 KB"},
	{Name: "hetzner", Limit: 32768, Source: "Hetzner Cloud user data: 32 KiB"},
	{Name: "vmware", Limit: 65536, Source: "VMware guestinfo value: 64 KiB, after gzip+base64", Encode: func(b []byte) []byte {
		return []byte(base64.StdEncoding.EncodeToString(gzipBytes(b)))
	}},
	{Name: "virtualbox", Limit: 1024, Source: "VirtualBox guest property: 1 KB"},
	{Name: "kubevirt", Limit: 2048, Source: "KubeVirt inline userData: 2048 bytes (admission webhook)"},
}

// ErrUnknownTransport is returned for a transport name not in Transports.
var ErrUnknownTransport = errors.New("unknown transport")

// LookupTransport finds a transport by name.
func LookupTransport(name string) (Transport, error) {
	i := slices.IndexFunc(Transports, func(t Transport) bool { return t.Name == name })
	if i < 0 {
		names := make([]string, len(Transports))
		for i, t := range Transports {
			names[i] = t.Name
		}
		return Transport{}, fmt.Errorf("%w %q (want one of %s)", ErrUnknownTransport, name, strings.Join(names, ", "))
	}
	return Transports[i], nil
}

// Size is the config's size on the transport.
func (t Transport) Size(config []byte) int {
	if t.Encode != nil {
		return len(t.Encode(config))
	}
	return len(config)
}

// Pointer returns a pointer config for config: its ignition.config.replace
// fetches the config from source and checks its sha512, so the guest gets
// exactly config or nothing. headers are sent with the fetch (httpHeaders,
// which need Ignition spec 3.1: a pointer for a 3.0 config with headers is
// a 3.1 config). config must be an Ignition 3.x config.
func Pointer(config []byte, source string, headers http.Header) ([]byte, error) {
	var v struct {
		Ignition struct{ Version string } `json:"ignition"`
	}
	if err := json.Unmarshal(config, &v); err != nil {
		return nil, fmt.Errorf("pointer configs need an Ignition 3.x config: %v", err)
	}
	version, err := semver.NewVersion(v.Ignition.Version)
	if err != nil || version.Major != 3 {
		return nil, fmt.Errorf("pointer configs need an Ignition 3.x config, not version %q", v.Ignition.Version)
	}
	sum := sha512.Sum512(config)
	ref := map[string]any{"source": source, "verification": map[string]any{"hash": "sha512-" + hex.EncodeToString(sum[:])}}
	if len(headers) > 0 {
		if v31 := (semver.Version{Major: 3, Minor: 1}); version.LessThan(v31) {
			version = &v31
		}
		var hs []map[string]string
		for _, k := range slices.Sorted(maps.Keys(headers)) {
			for _, val := range headers[k] {
				hs = append(hs, map[string]string{"name": k, "value": val})
			}
		}
		ref["httpHeaders"] = hs
	}
	return json.Marshal(map[string]any{"ignition": map[string]any{"version": version.String(), "config": map[string]any{"replace": ref}}})
}

// ErrTooLarge is returned when a config exceeds its transport's budget
// and no URL to publish it at was given.
var ErrTooLarge = errors.New("config too large for its transport")

// Fit returns what to hand the transport. A config that fits is returned
// as is, with publish nil. A larger one is replaced by a pointer config
// whose ignition.config.replace fetches the full config from publishURL and
// checks its sha512; publish is the full config to upload there. headers
// are sent with the fetch (Ignition 3.1+).
func Fit(config []byte, t Transport, publishURL string, headers http.Header) (payload, publish []byte, err error) {
	size := t.Size(config)
	if size <= t.Limit {
		return config, nil, nil
	}
	if publishURL == "" {
		return nil, nil, fmt.Errorf("%w: %d bytes; %s allows %d: publish it and give its URL to get a pointer config", ErrTooLarge, size, t.Source, t.Limit)
	}
	u, err := url.Parse(publishURL)
	if err != nil || u.Scheme == "" {
		return nil, nil, fmt.Errorf("publish URL %q: want an absolute http(s), s3, gs or tftp URL", publishURL)
	}
	pointer, err := Pointer(config, publishURL, headers)
	if err != nil {
		return nil, nil, err
	}
	if ps := t.Size(pointer); ps > t.Limit {
		return nil, nil, fmt.Errorf("%w: even the pointer config is %d bytes; %s allows %d", ErrTooLarge, ps, t.Source, t.Limit)
	}
	return pointer, config, nil
}

// ErrNotIgnition is returned by CheckConfig for data that is not an
// Ignition config.
var ErrNotIgnition = errors.New("not an Ignition config")

// CheckConfig reports the spec version of an Ignition config, or why it is
// not one Ignition would accept: not JSON, no ignition.version, or (for
// spec 3.x) what Ignition's own parser and validator refuse. Spec 2.x
// configs, which older Ignition releases read, are checked for their
// version only.
func CheckConfig(data []byte) (version string, err error) {
	var head struct {
		Ignition struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		if len(data) > 0 && data[0] != '{' && data[0] != ' ' && data[0] != '\n' {
			return "", fmt.Errorf("%w: it is not JSON (a seed image or a cloud-config? Ignition configs are .ign JSON files)", ErrNotIgnition)
		}
		return "", fmt.Errorf("%w: %v", ErrNotIgnition, err)
	}
	v := head.Ignition.Version
	switch {
	case v == "":
		return "", fmt.Errorf("%w: it has no ignition.version", ErrNotIgnition)
	case strings.HasPrefix(v, "2."):
		return v, nil
	}
	if _, rpt, err := ignconfig.Parse(data); err != nil {
		if rpt.IsFatal() {
			return "", fmt.Errorf("ignition spec %s: %v: %s", v, err, strings.TrimSpace(rpt.String()))
		}
		return "", fmt.Errorf("ignition spec %s: %v", v, err)
	}
	return v, nil
}
