// Package ignition renders an instance spec to an Ignition config for
// Fedora CoreOS, RHCOS and Flatcar, with the same meaning as the cloud-init
// rendering: the same users, files, units, mounts and first-boot commands.
//
// The config is built with the types of github.com/coreos/ignition/v2 and
// validated by its own parser for the exact spec version emitted. By
// default that version is the lowest stable one that can express the
// config (3.0.0 unless a feature or a user-supplied config needs more), so
// the widest range of guests accepts it; Options.Version forces one.
package ignition

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/coreos/go-semver/semver"
	types "github.com/coreos/ignition/v2/config/v3_0/types"

	"github.com/vminit/vminit/internal/systemd"
	"github.com/vminit/vminit/spec"
)

// Variant is the guest distribution family; it decides conventions the
// spec leaves open, such as how network settings are written.
type Variant string

// The variants Render knows.
const (
	FCOS    Variant = "fcos"    // Fedora CoreOS
	RHCOS   Variant = "rhcos"   // Red Hat Enterprise Linux CoreOS
	Flatcar Variant = "flatcar" // Flatcar Container Linux
)

// DefaultUser is the account every CoreOS-family image has; spec-level SSH
// keys (cloud-init's meta-data public-keys) go to it.
const DefaultUser = "core"

// Options tune Render.
type Options struct {
	// Variant defaults to FCOS.
	Variant Variant
	// Version forces the emitted spec version, e.g. "3.4.0". Empty means
	// the lowest stable version that can express the config.
	Version string
	// AllowPartial turns spec features Ignition cannot express (packages,
	// cloud-init data) into warnings instead of errors.
	AllowPartial bool
	// Strict turns the warnings of user-supplied Ignition and Butane
	// (unused keys and the like) into errors.
	Strict bool
}

// Result is a rendered config.
type Result struct {
	// Config is the Ignition config, compact JSON with sorted keys.
	Config []byte
	// Version is its spec version.
	Version string
	// Warnings are problems that did not stop the rendering.
	Warnings []string
}

// Render renders a defaulted, valid instance (spec.Load gives one).
func Render(inst *spec.Instance, opts Options) (*Result, error) {
	if opts.Variant == "" {
		opts.Variant = FCOS
	}
	switch opts.Variant {
	case FCOS, RHCOS, Flatcar:
	default:
		return nil, fmt.Errorf("unknown Ignition variant %q (want fcos, rhcos or flatcar)", opts.Variant)
	}
	r := &renderer{inst: inst, opts: opts, need: semver.Version{Major: 3}}
	cfg := r.build()
	if err := r.errs.Err(); err != nil {
		return nil, err
	}
	return r.finish(&cfg)
}

type renderer struct {
	inst     *spec.Instance
	opts     Options
	errs     spec.ErrorList
	warnings []string
	need     semver.Version // lowest spec version the generated part needs
}

// unsupported reports a spec feature Ignition cannot express: an error,
// or a warning with AllowPartial.
func (r *renderer) unsupported(field, format string, args ...any) {
	if r.opts.AllowPartial {
		r.warnings = append(r.warnings, field+": "+fmt.Sprintf(format, args...))
		return
	}
	r.errs.Add(field, format+" (AllowPartial / --allow-partial drops it with a warning)", args...)
}

func (r *renderer) build() types.Config {
	s := &r.inst.Spec
	var cfg types.Config
	cfg.Ignition.Version = "3.0.0"

	r.users(&cfg)
	if s.Hostname != "" {
		// cloud-init's rendering keeps the short name in /etc/hostname
		// (prefer_fqdn_over_hostname: false); so does this one.
		r.addFile(&cfg, "/etc/hostname", []byte(s.Hostname+"\n"), 0o644, "", false)
	}
	for i := range s.Files {
		f := &s.Files[i]
		mode := 0o644
		if f.Mode != nil {
			mode = int(*f.Mode)
		}
		if mode&0o7000 != 0 {
			// Ignition before spec 3.6 ignores setuid, setgid and sticky
			// bits, and 3.6 masks them off older configs it translates.
			r.needs(semver.Version{Major: 3, Minor: 6}, fmt.Sprintf("spec.files[%d].mode %04o (setuid, setgid or sticky bits)", i, mode))
		}
		r.addFile(&cfg, f.Path, f.Data(), mode, f.Owner, f.Append)
	}
	for _, u := range s.Units {
		unit := types.Unit{Name: u.Name, Enabled: u.Enabled}
		if u.Content != "" {
			unit.Contents = strPtr(u.Content)
		}
		for _, d := range u.Dropins {
			unit.Dropins = append(unit.Dropins, types.Dropin{Name: d.Name, Contents: strPtr(d.Content)})
		}
		cfg.Systemd.Units = append(cfg.Systemd.Units, unit)
	}
	for _, m := range s.Mounts {
		cfg.Systemd.Units = append(cfg.Systemd.Units, types.Unit{
			Name: systemd.MountUnitName(m.Path), Contents: strPtr(systemd.MountUnit(m)), Enabled: boolPtr(true),
		})
	}
	r.commandUnits(&cfg)
	if s.Timezone != "" {
		// What timedatectl set-timezone (cloud-init's timezone module on
		// systemd distributions) leaves behind.
		cfg.Storage.Links = append(cfg.Storage.Links, types.Link{
			Node:          types.Node{Path: "/etc/localtime", Overwrite: boolPtr(true)},
			LinkEmbedded1: types.LinkEmbedded1{Target: "../usr/share/zoneinfo/" + s.Timezone},
		})
	}
	if len(s.Packages) > 0 {
		r.unsupported("spec.packages", "Ignition cannot install packages; layer them with rpm-ostree (Fedora CoreOS, RHCOS) or a systemd-sysext image (Flatcar)")
	}
	if s.CloudInit.UserData != "" || s.CloudInit.VendorData != "" || len(s.CloudInit.MetaData) > 0 {
		r.unsupported("spec.cloudInit", "cloud-init data has no meaning to Ignition; express it with the spec's own fields or spec.ignition")
	}
	if s.Network != nil {
		r.network(&cfg)
	}
	return cfg
}

func (r *renderer) users(cfg *types.Config) {
	s := &r.inst.Spec
	if len(s.SSHAuthorizedKeys) > 0 {
		core := types.PasswdUser{Name: DefaultUser}
		for _, k := range s.SSHAuthorizedKeys {
			core.SSHAuthorizedKeys = append(core.SSHAuthorizedKeys, types.SSHAuthorizedKey(k))
		}
		cfg.Passwd.Users = append(cfg.Passwd.Users, core)
	}
	groups := map[string]bool{}
	for _, u := range s.Users {
		pu := types.PasswdUser{Name: u.Name, Gecos: optStr(u.Gecos), HomeDir: optStr(u.HomeDir), Shell: optStr(u.Shell), PrimaryGroup: optStr(u.PrimaryGroup)}
		if u.System {
			pu.System = boolPtr(true)
		}
		for _, g := range u.Groups {
			pu.Groups = append(pu.Groups, types.Group(g))
		}
		// useradd leaves a new account's password locked ("!"); a hash is
		// locked the same way by prefixing "!", which cloud-init's
		// lock_passwd does too (passwd -l).
		switch locked := u.LockPassword != nil && *u.LockPassword; {
		case u.PasswordHash != "" && locked:
			pu.PasswordHash = strPtr("!" + u.PasswordHash)
		case u.PasswordHash != "":
			pu.PasswordHash = strPtr(u.PasswordHash)
		}
		for _, k := range u.SSHAuthorizedKeys {
			pu.SSHAuthorizedKeys = append(pu.SSHAuthorizedKeys, types.SSHAuthorizedKey(k))
		}
		if u.PrimaryGroup != "" && !groups[u.PrimaryGroup] {
			// useradd --gid needs the group to exist; cloud-init's
			// rendering creates it too.
			groups[u.PrimaryGroup] = true
			cfg.Passwd.Groups = append(cfg.Passwd.Groups, types.PasswdGroup{Name: u.PrimaryGroup})
		}
		cfg.Passwd.Users = append(cfg.Passwd.Users, pu)
		if u.Sudo != "" {
			r.addFile(cfg, "/etc/sudoers.d/vminit-"+u.Name, []byte(u.Name+" "+u.Sudo+"\n"), 0o440, "", false)
		}
	}
}

// firstBoot is the unit that runs spec.commands once; its stamp file is
// what makes it first-boot only, as cloud-init's per-instance semaphore.
const (
	firstBootUnit   = "vminit-first-boot.service"
	firstBootScript = "/etc/vminit/first-boot.sh"
	firstBootStamp  = "/var/lib/vminit/first-boot.done"
	bootUnit        = "vminit-boot.service"
	bootScript      = "/etc/vminit/boot.sh"
)

func (r *renderer) commandUnits(cfg *types.Config) {
	s := &r.inst.Spec
	if len(s.Commands) > 0 {
		r.addFile(cfg, firstBootScript, script(s.Commands), 0o700, "", false)
		cfg.Systemd.Units = append(cfg.Systemd.Units, types.Unit{Name: firstBootUnit, Enabled: boolPtr(true), Contents: strPtr(`# Generated by vminit: spec.commands, once, in order, late in the first boot
# (as cloud-init's runcmd). The stamp makes later boots skip it.
[Unit]
Description=vminit first-boot commands
Wants=network-online.target
After=network-online.target multi-user.target
ConditionPathExists=!` + firstBootStamp + `

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=` + firstBootScript + `
ExecStartPost=/bin/mkdir -p ` + path.Dir(firstBootStamp) + `
ExecStartPost=/bin/touch ` + firstBootStamp + `

[Install]
WantedBy=multi-user.target
`)})
	}
	if len(s.BootCommands) > 0 {
		r.addFile(cfg, bootScript, script(s.BootCommands), 0o700, "", false)
		cfg.Systemd.Units = append(cfg.Systemd.Units, types.Unit{Name: bootUnit, Enabled: boolPtr(true), Contents: strPtr(`# Generated by vminit: spec.bootCommands, early on every boot (as
# cloud-init's bootcmd), before the network is configured.
[Unit]
Description=vminit boot commands
DefaultDependencies=no
After=local-fs.target
Before=network-pre.target sysinit.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=` + bootScript + `

[Install]
WantedBy=sysinit.target
`)})
	}
}

// script runs commands in order and stops at the first failure, so a
// failed step is visible in the unit's status instead of being skipped.
func script(cmds []spec.Command) []byte {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Generated by vminit.\nset -e\n")
	for _, c := range cmds {
		b.WriteString(c.ShellLine())
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// addFile adds a file with its content as a data URL (the shortest of
// percent-encoded, base64 and gzip+base64).
func (r *renderer) addFile(cfg *types.Config, p string, data []byte, mode int, owner string, appendTo bool) {
	f := types.File{Node: types.Node{Path: p}, FileEmbedded1: types.FileEmbedded1{Mode: intPtr(mode)}}
	if owner != "" {
		user, group, _ := strings.Cut(owner, ":")
		f.User.Name, f.Group.Name = optStr(user), optStr(group)
	}
	contents := dataURL(data)
	if appendTo {
		f.Append = []types.FileContents{contents}
	} else {
		// cloud-init's write_files replaces an existing file.
		f.Overwrite = boolPtr(true)
		f.Contents = contents
	}
	cfg.Storage.Files = append(cfg.Storage.Files, f)
}

func dataURL(data []byte) types.FileContents {
	best := "data:," + percentEncode(data)
	if b64 := "data:;base64," + base64.StdEncoding.EncodeToString(data); len(b64) < len(best) {
		best = b64
	}
	// gzip's 18 bytes of framing and base64's third more rarely pay off
	// below a kilobyte, and resetting a compressor costs more than the
	// rest of a file's rendering.
	if len(data) < 1024 {
		return types.FileContents{Source: &best}
	}
	var zb bytes.Buffer
	zw := gzipPool.Get().(*gzip.Writer)
	zw.Reset(&zb) // zero header: no name, no mtime, so the bytes are stable
	zw.Write(data)
	zw.Close()
	gzipPool.Put(zw)
	if gz := "data:;base64," + base64.StdEncoding.EncodeToString(zb.Bytes()); len(gz) < len(best) {
		return types.FileContents{Source: &gz, Compression: strPtr("gzip")}
	}
	return types.FileContents{Source: &best}
}

// gzipPool keeps compressors: each holds about 800 KB of state, which
// dominated rendering time when allocated per file.
var gzipPool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestCompression)
	return zw
}}

// percentEncode escapes everything but unreserved URL characters and a few
// that are safe in a data URL's payload, keeping text readable.
func percentEncode(data []byte) string {
	var b strings.Builder
	for _, c := range data {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~/:=@", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// needs raises the lowest spec version the config needs.
func (r *renderer) needs(v semver.Version, why string) {
	if r.need.LessThan(v) {
		r.need = v
		r.warnings = append(r.warnings, fmt.Sprintf("%s needs Ignition spec %s", why, v))
	}
}

func strPtr(s string) *string { return &s }
func boolPtr(b bool) *bool    { return &b }
func intPtr(i int) *int       { return &i }

func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
