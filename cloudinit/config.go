package cloudinit

import (
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/systemd"
	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/spec"
)

// CloudConfig returns the #cloud-config document that the spec itself
// describes, before spec.cloudInit.userData is combined with it (UserData
// does both). inst must be defaulted and valid (spec.Load does both).
//
// Keys come in a fixed order that follows first boot rather than the
// alphabet: identity (hostname, fqdn), accounts (groups, users), files
// (write_files), system settings (timezone, ntp, packages), storage
// (disk_setup, fs_setup, growpart, resize_rootfs, swap), then commands
// (bootcmd, runcmd).
func CloudConfig(inst *spec.Instance) ([]byte, error) {
	doc, err := cloudConfig(inst)
	if err != nil {
		return nil, err
	}
	return marshalCloudConfig(doc)
}

func cloudConfig(inst *spec.Instance) (*yaml.Node, error) {
	s := &inst.Spec
	var errs spec.ErrorList
	doc := yaml11.Mapping()
	add := func(k string, v *yaml.Node) { yaml11.AddPair(doc, k, v) }

	if s.Hostname != "" {
		add("hostname", yaml11.String(s.Hostname))
	}
	if s.FQDN != "" {
		add("fqdn", yaml11.String(s.FQDN))
		// RHEL-family distros default to using the FQDN as the system
		// hostname; the spec's hostname is the short name everywhere.
		add("prefer_fqdn_over_hostname", yaml11.BoolNode(false))
		// Without an /etc/hosts entry `hostname --fqdn` cannot resolve
		// the FQDN. "localhost" adds or updates the 127.0.1.1 line only,
		// where true would rewrite the whole file from a template on
		// every boot and lose the user's own entries.
		add("manage_etc_hosts", yaml11.String("localhost"))
	}

	if groups := primaryGroups(s.Users); len(groups) > 0 {
		// cloud-init creates the groups listed in a user's groups but not
		// its primary_group (useradd --gid then fails); the top-level
		// groups key is processed before users.
		add("groups", yaml11.Flow(yaml11.Strings(groups)))
	}
	if len(s.Users) > 0 {
		add("users", users(s.Users, !s.CloudInit.NoDefaultUser))
	}
	if keys := sshKeys(s); keys != nil {
		add("ssh_keys", keys)
	}

	files, units := writeFiles(s, &errs)
	if len(files.Content) > 0 {
		add("write_files", files)
	}
	if s.Timezone != "" {
		add("timezone", yaml11.String(s.Timezone))
	}
	if s.NTP != nil {
		add("ntp", NTP(s.NTP, true))
	}
	if len(s.Packages) > 0 {
		add("packages", yaml11.Flow(yaml11.Strings(s.Packages)))
	}
	storage(add, s.Storage, &errs)
	if len(s.BootCommands) > 0 {
		add("bootcmd", commands(s.BootCommands))
	}
	run := append(units, commands(s.Commands).Content...)
	if len(run) > 0 {
		add("runcmd", yaml11.Sequence(run...))
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return doc, nil
}

// NTP is the ntp key of cloud-init's cc_ntp, which cloudbase-init's ntp
// plugin reads too (servers and pools, concatenated); enabled is cc_ntp's
// switch, which cloudbase-init defaults to true.
func NTP(n *spec.NTP, enabled bool) *yaml.Node {
	m := yaml11.Mapping()
	if enabled {
		yaml11.AddPair(m, "enabled", yaml11.BoolNode(true))
	}
	if len(n.Servers) > 0 {
		yaml11.AddPair(m, "servers", yaml11.Flow(yaml11.Strings(n.Servers)))
	}
	if len(n.Pools) > 0 {
		yaml11.AddPair(m, "pools", yaml11.Flow(yaml11.Strings(n.Pools)))
	}
	return m
}

// primaryGroups returns the users' primary groups, sorted and unique.
func primaryGroups(users []spec.User) []string {
	seen := map[string]bool{}
	var out []string
	for _, u := range users {
		if g := u.PrimaryGroup; g != "" && !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return sortedCopy(out)
}

// users renders the users list. The distribution's default user (ubuntu,
// debian, fedora…) comes first: a users key without "default" would stop
// cloud-init from creating it, and the meta-data public-keys (the spec's
// sshAuthorizedKeys) would then go nowhere but root. Unless withDefault is
// false (spec.cloudInit.noDefaultUser): then the spec's users are the only
// ones.
func users(list []spec.User, withDefault bool) *yaml.Node {
	seq := yaml11.Sequence()
	if withDefault {
		seq = yaml11.Sequence(yaml11.String("default"))
	}
	for _, u := range list {
		m := yaml11.Mapping("name", yaml11.String(u.Name))
		str := func(k, v string) {
			if v != "" {
				yaml11.AddPair(m, k, yaml11.String(v))
			}
		}
		str("gecos", u.Gecos)
		str("primary_group", u.PrimaryGroup)
		if len(u.Groups) > 0 {
			yaml11.AddPair(m, "groups", yaml11.Flow(yaml11.Strings(u.Groups)))
		}
		str("shell", u.Shell)
		str("homedir", u.HomeDir)
		str("sudo", u.Sudo)
		str("hashed_passwd", u.PasswordHash)
		lock := u.PasswordHash == ""
		if u.LockPassword != nil {
			lock = *u.LockPassword
		}
		yaml11.AddPair(m, "lock_passwd", yaml11.BoolNode(lock))
		if len(u.SSHAuthorizedKeys) > 0 {
			keys := make([]string, len(u.SSHAuthorizedKeys))
			for i, k := range u.SSHAuthorizedKeys {
				keys[i] = strings.TrimRight(k, "\n")
			}
			yaml11.AddPair(m, "ssh_authorized_keys", yaml11.Strings(keys))
		}
		if u.System {
			yaml11.AddPair(m, "system", yaml11.BoolNode(true))
		}
		seq.Content = append(seq.Content, m)
	}
	return seq
}

// writeFiles renders spec.files, the units, the mount units and the swap
// units of spec.storage as write_files entries, and returns the systemctl
// commands that must start runcmd for the units, mounts and swap to take
// effect.
func writeFiles(s *spec.Spec, errs *spec.ErrorList) (files *yaml.Node, run []*yaml.Node) {
	files = yaml11.Sequence()
	written := spec.PathClaims{}
	claim := func(p, field string) bool { return written.Claim(errs, p, field) }
	for i, f := range s.Files {
		field := fmt.Sprintf("spec.files[%d]", i)
		claim(f.Path, field+".path")
		mode := *f.Mode // spec.Default sets it
		deferred := false
		if f.Owner != "" {
			var problem string
			if deferred, problem = nonRootOwner(f.Owner); problem != "" {
				errs.Add(field+".owner", "%s", problem)
			}
		}
		// write_files runs before cloud-init creates users and groups; the
		// deferred pass runs in the final stage, after them and before
		// runcmd.
		e := fileEntry(f.Path, f.Data(), mode, f.Owner, f.Append, deferred)
		files.Content = append(files.Content, e)
	}

	var reload bool
	var mountCmds, unitCmds []*yaml.Node
	for i, m := range s.Mounts {
		field := fmt.Sprintf("spec.mounts[%d]", i)
		name := systemd.MountUnitName(m.Path)
		p := path.Join(systemd.UnitDir, name)
		if !claim(p, field) {
			continue
		}
		files.Content = append(files.Content, fileEntry(p, []byte(systemd.MountUnit(systemd.Mount(m))), 0o644, "", false, false))
		reload = true
		// Started synchronously, unlike units: commands that follow may
		// write into the mount.
		mountCmds = append(mountCmds, argv("systemctl", "enable", "--now", name))
	}
	if swaps := swapUnits(s.Storage, files, claim); len(swaps) > 0 {
		reload = true
		mountCmds = append(mountCmds, swaps...)
	}
	for i, u := range s.Units {
		field := fmt.Sprintf("spec.units[%d]", i)
		if u.Content != "" {
			p := path.Join(systemd.UnitDir, u.Name)
			if claim(p, field+".name") {
				files.Content = append(files.Content, fileEntry(p, []byte(u.Content), 0o644, "", false, false))
				reload = true
			}
		}
		for j, d := range u.Dropins {
			p := path.Join(systemd.UnitDir, u.Name+".d", d.Name)
			if claim(p, fmt.Sprintf("%s.dropins[%d].name", field, j)) {
				files.Content = append(files.Content, fileEntry(p, []byte(d.Content), 0o644, "", false, false))
				reload = true
			}
		}
		// --no-block queues the start instead of waiting for it: runcmd
		// runs inside cloud-final.service, and a unit ordered after
		// multi-user.target or cloud-init would otherwise wait for the
		// very job that is starting it.
		switch {
		case u.Enabled == nil:
		case *u.Enabled:
			unitCmds = append(unitCmds, argv("systemctl", "enable", "--now", "--no-block", u.Name))
		default:
			unitCmds = append(unitCmds, argv("systemctl", "disable", "--now", "--no-block", u.Name))
		}
	}
	if reload {
		run = append(run, argv("systemctl", "daemon-reload"))
	}
	if len(mountCmds) > 0 {
		run = append(run, udevRefresh(s.Storage)...)
	}
	run = append(run, mountCmds...)
	run = append(run, unitCmds...)
	return files, run
}

// nonRootOwner reports whether an owner ("user", "user:group", ":group")
// names anything but root, and refuses numeric IDs: cloud-init looks the
// names up with getpwnam/getgrnam and its write_files module fails on a
// number.
func nonRootOwner(owner string) (bool, string) {
	u, g, _ := strings.Cut(owner, ":")
	for _, id := range []string{u, g} {
		if id != "" && strings.Trim(id, "0123456789") == "" {
			return false, fmt.Sprintf("%q: cloud-init's write_files resolves owners by name and fails on a numeric ID; use the user and group names", owner)
		}
	}
	return u != "" && u != "root" || g != "" && g != "root", ""
}

// fileEntry renders one write_files entry, its content last. Text that
// YAML can carry exactly is written as is, for readable user-data;
// anything else (binary, control characters, invalid UTF-8) is base64.
func fileEntry(p string, data []byte, mode spec.Mode, owner string, appendTo, deferred bool) *yaml.Node {
	e := yaml11.Mapping("path", yaml11.String(p))
	if owner != "" {
		yaml11.AddPair(e, "owner", yaml11.String(owner))
	}
	// Quoted, so that neither YAML 1.1 (octal) nor a reader that takes
	// 0644 as decimal can misread it; cloud-init parses the string as
	// octal.
	yaml11.AddPair(e, "permissions", yaml11.String(mode.String()))
	if appendTo {
		yaml11.AddPair(e, "append", yaml11.BoolNode(true))
	}
	if deferred {
		yaml11.AddPair(e, "defer", yaml11.BoolNode(true))
	}
	if isPlainText(data) {
		yaml11.AddPair(e, "content", yaml11.String(string(data)))
	} else {
		yaml11.AddPair(e, "encoding", yaml11.String("b64"))
		yaml11.AddPair(e, "content", yaml11.String(base64.StdEncoding.EncodeToString(data)))
	}
	return e
}

// isPlainText reports whether data is UTF-8 text made of printable
// characters, tabs and newlines. Carriage returns, other control
// characters, NEL, the Unicode line and paragraph separators and a BOM are
// all legal in a YAML string only when escaped, and a file that holds them
// is better shipped byte-exact as base64.
func isPlainText(data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	for _, r := range string(data) {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r == 0x2028, r == 0x2029, r == 0xfeff, r >= 0xfffe && r <= 0xffff:
			return false
		}
	}
	return true
}

// commands renders commands for runcmd or bootcmd: an argument vector
// stays a list (cloud-init quotes each element for the shell), a string
// is run by the shell as written.
func commands(cmds []spec.Command) *yaml.Node {
	seq := yaml11.Sequence()
	for _, c := range cmds {
		if c.Argv != nil {
			seq.Content = append(seq.Content, yaml11.Flow(yaml11.Strings(c.Argv)))
		} else {
			seq.Content = append(seq.Content, yaml11.String(c.Shell))
		}
	}
	return seq
}

func argv(args ...string) *yaml.Node { return yaml11.Flow(yaml11.Strings(args)) }

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
