// Package ovirt reads an oVirt VM's REST representation (a <vm>, the
// <action> of a start request with use_cloud_init, a <template> or a
// <vm_pool>, in XML or JSON) and gives the guest what ovirt-engine's
// CloudInitHandler and IgnitionHandler build for VDSM's config-2 disc,
// minus their bugs. A start action names no VM (its URL does):
// Options.Name (--name) names it when initialization.host_name does not. The representation is
// decoded strictly into go-ovirt's types (decode.go says why by hand).
//
// cloud-init guests (every OS type but rhcos and Windows):
//
//   - host_name: spec.hostname (and spec.fqdn when it has dots);
//   - authorized_ssh_keys: one key per line, for user_name when given (oVirt
//     renames the image's default user to it with cloud-init's legacy user
//     key), else for the image's default user; ConfigDrive's public_keys is
//     a dict, as OpenStack writes it, where oVirt wrote a list;
//   - user_name and root_password: the user, the only one (no image
//     default user, as oVirt's renaming leaves none), with the password hashed
//     (SHA-512 crypt), never in plain text as oVirt writes it; a hash needs a
//     salt to be reproducible, so the password is refused unless
//     Options.PasswordSalt (--password-salt) gives one, or the field already
//     holds a crypt hash;
//   - regenerate_ssh_keys: ssh_deletekeys; timezone: spec.timezone;
//   - nic_configurations, dns_servers, dns_search: spec.network, so
//     network_data.json finds each NIC by its MAC address when the VM's
//     <nics> give it (GET .../vms/ID?follow=nics), else by its name alone,
//     as oVirt writes it (a start action has no <nics>), with a warning:
//     the guest's own naming then decides which NIC it is; cloud_init_network_protocol
//     eni is written as network_data.json too (ENI is cloud-init's legacy
//     path, and oVirt commented IPv6 out of it);
//   - custom_script: merged by cloud-init's own merge rules, where oVirt
//     appended its text to the generated YAML (a key given in both, runcmd
//     say, appeared twice and the script's silently won); a #! script stays a
//     script (oVirt made it part of the YAML);
//   - what oVirt always adds: disable_root: false, ssh_pwauth: true,
//     chpasswd expire: false, meta_data meta (dsmode local…) and
//     availability_zone nova. Not its runcmd that rewrites the guest's
//     /etc/cloud/cloud.cfg datasource_list, nor its random uuid per build:
//     the instance-id is the VM's id (or derives from its name) and stays.
//
// Ignition guests (OS types rhcos_*, or a custom_script that is an Ignition
// config): custom_script is the config, spec 2.x translated to 3 (oVirt
// sets a missing version to 2.3.0); the hostname and user_name (with the
// hashed password and the keys) are added as oVirt adds them, but in spec
// 3 and through Ignition's merge, so a config that already writes
// /etc/hostname or has the user keeps its own.
//
// Windows (sysprep: a Windows OS type, use_sysprep, or user_name
// Administrator without an OS type) is not supported. Every difference is listed in
// docs/platforms/ovirt.md.
package ovirt

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/GehirnInc/crypt/sha512_crypt"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// Recognizes reports whether doc is an oVirt REST representation: XML, or
// a JSON object without apiVersion that has initialization or a vm.
func Recognizes(doc *platform.Document) bool {
	if doc.Format == platform.XML {
		return true
	}
	if doc.APIVersion != "" || doc.Kind != "" {
		return false
	}
	t := strings.TrimSpace(string(doc.Raw))
	return strings.HasPrefix(t, "{") && (strings.Contains(t, `"initialization"`) || strings.Contains(t, `"vm"`))
}

var (
	cryptRE = lazyre.New(`^\$(1|5|6|y|gy|7|2[abxy])\$[./A-Za-z0-9$=,+-]+$`)
	saltRE  = lazyre.New(`^[./A-Za-z0-9]{1,16}$`)
	nameRE  = lazyre.New(`[^a-z0-9.-]+`)
)

// Convert converts an oVirt vm.
func Convert(_ context.Context, doc *platform.Document, opts platform.Options) (*platform.Result, error) {
	body, err := DecodeBody(doc)
	if err != nil {
		return nil, err
	}
	vm, root := body.VM, body.Path
	in, ok := vm.Initialization()
	if !ok {
		return nil, spec.Errors{doc.Error(root, "no initialization: oVirt gives this VM no first-boot data")}
	}
	ip := root + ".initialization"
	if body.Sysprep {
		return windowsGuest(doc, vm, in, ip, strings.TrimSuffix(root, ".vm")+".use_sysprep", "true: the engine writes a Windows sysprep answer file")
	}
	if err := windowsAccount(doc, vm, in, ip); err != nil {
		return nil, err
	}
	host, _ := in.HostName()
	vmName, _ := vm.Name()
	if vmName == "" {
		vmName = opts.Name
	}
	name := strings.Trim(nameRE.ReplaceAllString(strings.ToLower(vmName), "-"), "-.")
	if name == "" {
		name = strings.ToLower(host)
	}
	if name == "" {
		return nil, spec.Errors{doc.Error(root+".name", "required: the instance needs a name, and neither the body nor initialization.host_name gives one (a start action's VM is named in its URL, .../vms/ID/start): pass --name NAME")}
	}
	b := platform.NewBuilder(doc, name)
	s := &b.Instance.Spec
	b.From("metadata.name", root+".name")
	if id, ok := vm.Id(); ok && id != "" {
		s.InstanceID = id
		b.From("spec.instanceID", root+".id")
	}
	if host != "" {
		h := strings.ToLower(host)
		if short, _, fqdn := strings.Cut(h, "."); fqdn {
			s.Hostname, s.FQDN = short, h
			b.From("spec.fqdn", ip+".host_name")
		} else {
			s.Hostname = h
		}
		b.From("spec.hostname", ip+".host_name")
	}
	s.Datasource = spec.DatasourceConfigDrive
	for _, f := range []struct {
		name string
		get  func() (string, bool)
	}{{"domain", in.Domain}, {"org_name", in.OrgName}, {"active_directory_ou", in.ActiveDirectoryOu}, {"windows_license_key", in.WindowsLicenseKey},
		{"input_locale", in.InputLocale}, {"system_locale", in.SystemLocale}, {"ui_language", in.UiLanguage}, {"user_locale", in.UserLocale}} {
		if v, ok := f.get(); ok && v != "" {
			b.Warnf(ip+"."+f.name, "ignored: oVirt uses it only in Windows sysprep answer files")
		}
	}

	osType := ""
	if os, ok := vm.Os(); ok {
		osType, _ = os.Type()
	}
	script, _ := in.CustomScript()
	switch {
	case strings.HasPrefix(strings.ToLower(osType), "windows"):
		return windowsGuest(doc, vm, in, ip, root+".os.type", fmt.Sprintf("%q: Windows guests get a sysprep answer file", osType))
	case strings.HasPrefix(strings.ToLower(osType), "rhcos"):
		ignitionGuest(b, in, ip, script, opts)
	case osType == "" && looksLikeIgnition(script):
		b.Warnf(ip+".custom_script", "an Ignition config and no os.type: read as for oVirt's rhcos OS types, which decide Ignition")
		ignitionGuest(b, in, ip, script, opts)
	default:
		cloudInitGuest(b, vm, in, root, script, opts)
	}
	vmDesc := vmName
	if vmDesc == "" {
		vmDesc = host
	}
	return b.Finish("oVirt vm " + vmDesc)
}

// unsupportedWindows is the refusal of a body the engine would give
// sysprep rather than cloud-init or Ignition.
func unsupportedWindows(doc *platform.Document, field, msg string) error {
	e := doc.Error(field, msg)
	e.Cause = platform.ErrUnsupported
	return spec.Errors{e}
}

// windowsAccount refuses, as unsupported, a body without an OS type whose
// user_name is Windows' built-in Administrator: no Linux guest can have
// that user, and a template's OS type is its source VM's, which its body
// only names, so this is the one sign left that the engine will write a
// sysprep answer file.
func windowsAccount(doc *platform.Document, vm *ovirtsdk.Vm, in *ovirtsdk.Initialization, ip string) error {
	if os, ok := vm.Os(); ok {
		if t, _ := os.Type(); t != "" {
			return nil // the OS type decides, in Convert
		}
	}
	if name, _ := in.UserName(); !strings.EqualFold(name, "Administrator") {
		return nil
	}
	return unsupportedWindows(doc, ip+".user_name", "\"Administrator\": Windows' built-in account, which no Linux guest has; the engine writes a sysprep answer file for a VM whose OS type is Windows (a template takes its source VM's), which vminit does not build. For a Linux guest, name a Linux user")
}

func looksLikeIgnition(s string) bool {
	t := strings.TrimSpace(s)
	return strings.HasPrefix(t, "{") && strings.Contains(t, `"ignition"`)
}

func splitKeys(s string) []string {
	var out []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// hashPassword returns root_password as a crypt hash: as given when it is
// one, else SHA-512 crypt with the salt; "" and a problem when it cannot.
func hashPassword(b *platform.Builder, path, pw string, opts platform.Options) string {
	if cryptRE.MatchString(pw) {
		return pw
	}
	if opts.PasswordSalt == "" {
		b.Errorf(path, "a plain-text password: vminit never writes one to the seed (oVirt does), and a hash of it is the same on every build only with a fixed salt: pass --password-salt SALT (1-16 of [./A-Za-z0-9]), or put a crypt hash (mkpasswd -m sha-512) in the field")
		return ""
	}
	if !saltRE.MatchString(opts.PasswordSalt) {
		b.Errorf(path, "--password-salt %q: want 1 to 16 characters of [./A-Za-z0-9]", opts.PasswordSalt)
		return ""
	}
	h, err := sha512_crypt.New().Generate([]byte(pw), []byte("$6$"+opts.PasswordSalt))
	if err != nil {
		b.Errorf(path, "hashing: %v", err)
		return ""
	}
	return h
}

// user adds the user oVirt's user_name/root_password/authorized_ssh_keys
// mean, or gives the keys to the default user.
func user(b *platform.Builder, in *ovirtsdk.Initialization, ip string, opts platform.Options, defaultUser string) {
	s := &b.Instance.Spec
	keys := splitKeys(optional(in.AuthorizedSshKeys))
	name, _ := in.UserName()
	pw, hasPW := in.RootPassword()
	hash := ""
	if hasPW && pw != "" {
		hash = hashPassword(b, ip+".root_password", pw, opts)
	}
	if name == "" && hash != "" {
		name = defaultUser
	}
	if name == "" {
		for i := range keys {
			b.From(fmt.Sprintf("spec.sshAuthorizedKeys[%d]", i), ip+".authorized_ssh_keys")
		}
		s.SSHAuthorizedKeys = keys
		return
	}
	u := spec.User{Name: name, PasswordHash: hash, SSHAuthorizedKeys: keys}
	if hash != "" {
		f := false
		u.LockPassword = &f
	}
	b.From(fmt.Sprintf("spec.users[%d]", len(s.Users)), ip+".user_name")
	b.From(fmt.Sprintf("spec.users[%d].sshAuthorizedKeys", len(s.Users)), ip+".authorized_ssh_keys")
	b.From(fmt.Sprintf("spec.users[%d].passwordHash", len(s.Users)), ip+".root_password")
	s.Users = append(s.Users, u)
}

func optional(get func() (string, bool)) string {
	v, _ := get()
	return v
}

func cloudInitGuest(b *platform.Builder, vm *ovirtsdk.Vm, in *ovirtsdk.Initialization, root, script string, opts platform.Options) {
	s := &b.Instance.Spec
	ip := root + ".initialization"
	user(b, in, ip, opts, "root")
	if name, _ := in.UserName(); name != "" {
		// oVirt's legacy user: key renames the image's default user, so
		// no ubuntu or fedora account exists beside this one.
		s.CloudInit.NoDefaultUser = true
		b.From("spec.cloudInit.noDefaultUser", ip+".user_name")
	}
	if tz, ok := in.Timezone(); ok && tz != "" {
		s.Timezone = tz
		b.From("spec.timezone", ip+".timezone")
	}
	base := "#cloud-config\ndisable_root: false\nssh_pwauth: true\nchpasswd:\n  expire: false\n"
	if regen, ok := in.RegenerateSshKeys(); ok {
		base += fmt.Sprintf("ssh_deletekeys: %t\n", regen)
	}
	s.CloudInit.MetaData = map[string]any{
		"availability_zone": "nova",
		"meta":              map[string]any{"dsmode": "local", "essential": "false", "role": "server"},
	}
	network(b, vm, in, root)
	ud := []byte(base)
	if strings.TrimSpace(script) != "" {
		user := []byte(script)
		if cloudinit.PartType(user) == "" {
			// oVirt appends the script to its YAML: a script without a
			// header is more cloud-config.
			user = append([]byte("#cloud-config\n"), user...)
		}
		var err error
		if ud, err = cloudinit.Combine(ud, user); err != nil {
			// A script that is no YAML: oVirt's appended text breaks the
			// whole cloud-config, which cloud-init then ignores.
			b.Errorf(ip+".custom_script", "%v (oVirt appends the script to the YAML it writes, which cloud-init then cannot read: the guest gets none of it)", err)
			return
		}
	}
	s.CloudInit.UserData = string(ud)
	b.From("spec.cloudInit.userData", ip+".custom_script")
}

// network turns nic_configurations into spec.network.
func network(b *platform.Builder, vm *ovirtsdk.Vm, in *ovirtsdk.Initialization, root string) {
	ip := root + ".initialization"
	ncs, _ := in.NicConfigurations()
	dnsServers := strings.Fields(optional(in.DnsServers))
	dnsSearch := strings.Fields(optional(in.DnsSearch))
	if ncs == nil || len(ncs.Slice()) == 0 {
		if len(dnsServers)+len(dnsSearch) > 0 {
			b.Warnf(ip+".dns_servers", "ignored without nic_configurations, as oVirt does")
		}
		return
	}
	macs := map[string]string{}
	if nics, ok := vm.Nics(); ok {
		for _, n := range nics.Slice() {
			name, _ := n.Name()
			if mac, ok := n.Mac(); ok {
				macs[name], _ = mac.Address()
			}
		}
	}
	net := &spec.Network{Ethernets: map[string]spec.Ethernet{}}
	for i, nc := range ncs.Slice() {
		p := fmt.Sprintf("%s.nic_configurations.nic_configuration[%d]", ip, i)
		name, _ := nc.Name()
		if name == "" {
			b.Errorf(p+".name", "required: the guest's interface name (oVirt writes the settings under no name, for no interface of the guest)")
			continue
		}
		if onBoot, ok := nc.OnBoot(); ok && !onBoot {
			b.Errorf(p+".on_boot", "false: oVirt refuses cloud-init network settings that do not start on boot (the engine does not run the VM: 'Start on boot' must be true)")
			continue
		}
		e := spec.Ethernet{Match: &spec.Match{Name: name}}
		if mac := macs[name]; mac != "" {
			e = spec.Ethernet{Match: &spec.Match{MACAddress: strings.ToLower(mac)}, SetName: name}
		} else {
			b.Warnf(p+".name", "%q: matched by interface name, as oVirt writes it (a start action carries no <nics>); the guest must call its NIC so. The NIC's MAC is stronger: give the VM's <nics> (GET .../vms/ID?follow=nics) and the NIC is found by MAC and named %s", name, name)
		}
		address(b, family{false, "boot_protocol", "ip", nc.BootProtocol, nc.Ip}, p, &e.Interface)
		address(b, family{true, "ipv6_boot_protocol", "ipv6", nc.Ipv6BootProtocol, nc.Ipv6}, p, &e.Interface)
		if len(dnsServers)+len(dnsSearch) > 0 {
			e.Nameservers = &spec.Nameservers{Addresses: dnsServers, Search: dnsSearch}
		}
		b.From("spec.network.ethernets."+name, p)
		net.Ethernets[name] = e
	}
	if len(net.Ethernets) > 0 {
		b.Instance.Spec.Network = net
	}
	if proto, ok := in.CloudInitNetworkProtocol(); ok && proto == ovirtsdk.CLOUDINITNETWORKPROTOCOL_ENI {
		b.Warnf(ip+".cloud_init_network_protocol", "eni: written as network_data.json, which every cloud-init reads (oVirt's ENI text is cloud-init's legacy path and left IPv6 commented out)")
	}
}

// family is what differs between a NIC configuration's IPv4 and IPv6
// settings.
type family struct {
	v6                bool
	protoField, ipKey string // boot_protocol or ipv6_boot_protocol; ip or ipv6
	proto             func() (ovirtsdk.BootProtocol, bool)
	ip                func() (*ovirtsdk.Ip, bool)
}

// address reads one family's boot protocol and static address into it.
func address(b *platform.Builder, f family, p string, it *spec.Interface) {
	proto, _ := f.proto()
	switch proto {
	case ovirtsdk.BOOTPROTOCOL_DHCP:
		if f.v6 {
			it.DHCP6 = true
		} else {
			it.DHCP4 = true
		}
	case ovirtsdk.BOOTPROTOCOL_STATIC:
		a, ok := f.ip()
		addr := ""
		if ok {
			addr, _ = a.Address()
		}
		if addr == "" {
			b.Errorf(p+"."+f.ipKey+".address", "required with %s static (the engine does not run the VM without it)", f.protoField)
			return
		}
		mask, _ := a.Netmask()
		prefix, err := prefixLen(mask, f.v6)
		if err != nil {
			b.Errorf(p+"."+f.ipKey+".netmask", "%v (oVirt writes it into network_data.json as given, which cloud-init cannot read)", err)
			return
		}
		it.Addresses = append(it.Addresses, fmt.Sprintf("%s/%d", addr, prefix))
		if gw, _ := a.Gateway(); gw != "" && f.v6 {
			it.Gateway6 = gw
		} else if gw != "" {
			it.Gateway4 = gw
		}
	case "", ovirtsdk.BOOTPROTOCOL_NONE:
	case ovirtsdk.BOOTPROTOCOL_AUTOCONF, ovirtsdk.BOOTPROTOCOL_POLY_DHCP_AUTOCONF:
		if f.v6 {
			b.Errorf(p+"."+f.protoField, "%q: oVirt refuses IPv6 autoconf for cloud-init (the engine does not run the VM)", proto)
		} else {
			b.Errorf(p+"."+f.protoField, "%q is for IPv6; IPv4 is dhcp, static or none", proto)
		}
	}
}

// prefixLen reads a netmask: a dotted IPv4 mask or a prefix length.
func prefixLen(mask string, v6 bool) (int, error) {
	max := 32
	if v6 {
		max = 128
	}
	if mask == "" {
		return 0, fmt.Errorf("required with a static address")
	}
	var n int
	if _, err := fmt.Sscanf(mask, "%d", &n); err == nil && fmt.Sprint(n) == mask && n >= 0 && n <= max {
		return n, nil
	}
	if !v6 {
		if a, err := netip.ParseAddr(mask); err == nil && a.Is4() {
			bits := a.As4()
			ones := 0
			for _, by := range bits {
				ones += popcount(by)
			}
			var want [4]byte
			for i := range ones {
				want[i/8] |= 1 << (7 - i%8)
			}
			if want == bits {
				return ones, nil
			}
		}
	}
	return 0, fmt.Errorf("%q is not a netmask (255.255.255.0) or prefix length (0-%d)", mask, max)
}

func popcount(b byte) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}
