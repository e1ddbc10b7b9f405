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

	ignconfig "github.com/coreos/ignition/v2/config"

	"github.com/vminit/vminit/seed"
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

// ConfigDrive returns a config-2 seed carrying the config as
// openstack/latest/user_data, where Ignition's openstack and kubevirt
// platforms read it; meta_data.json gives cloud-init-style tools the uuid
// they require.
func ConfigDrive(config []byte, instanceID, hostname string) (*seed.Seed, error) {
	md, err := json.Marshal(map[string]any{"uuid": instanceID, "hostname": hostname, "name": hostname})
	if err != nil {
		return nil, err
	}
	return &seed.Seed{Datasource: seed.ConfigDrive, Label: seed.ConfigDrive.Label(), Files: []seed.File{
		{Path: "openstack/latest/meta_data.json", Data: md},
		{Path: "openstack/latest/user_data", Data: config},
	}}, nil
}

// NoCloud returns a cidata seed carrying the config as /user-data, where
// Ignition's kubevirt, proxmoxve and ibmcloud platforms read it.
func NoCloud(config []byte, instanceID, hostname string) *seed.Seed {
	md := fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", instanceID, hostname)
	return &seed.Seed{Datasource: seed.NoCloud, Label: seed.NoCloud.Label(), Files: []seed.File{
		{Path: "meta-data", Data: []byte(md)},
		{Path: "user-data", Data: config},
	}}
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

// Transports are the known budgets. The research behind them is in
// shared/research/ignition.md (§1, §11) and platforms.md (§1.7).
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
	var v struct {
		Ignition struct{ Version string } `json:"ignition"`
	}
	if err := json.Unmarshal(config, &v); err != nil || !strings.HasPrefix(v.Ignition.Version, "3.") {
		return nil, nil, fmt.Errorf("pointer configs need an Ignition 3.x config: %v", err)
	}
	version := v.Ignition.Version
	sum := sha512.Sum512(config)
	ref := map[string]any{"source": publishURL, "verification": map[string]any{"hash": "sha512-" + hex.EncodeToString(sum[:])}}
	if len(headers) > 0 {
		if version < "3.1.0" {
			// httpHeaders exist from spec 3.1 on.
			version = "3.1.0"
		}
		var hs []map[string]string
		for _, k := range slices.Sorted(maps.Keys(headers)) {
			for _, val := range headers[k] {
				hs = append(hs, map[string]string{"name": k, "value": val})
			}
		}
		ref["httpHeaders"] = hs
	}
	pointer, err := json.Marshal(map[string]any{"ignition": map[string]any{"version": version, "config": map[string]any{"replace": ref}}})
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
