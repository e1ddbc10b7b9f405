package cloudbaseinit

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/spec"
)

// MaxPasswordLength is the longest password cloudbase-init sets on Windows
// (WindowsUtils.get_maximum_password_length); its users module refuses a
// longer one.
const MaxPasswordLength = 20

// NetBIOSNameLength is the longest host name cloudbase-init sets
// unchanged: it truncates a longer one (netbios_host_name_compatibility,
// on by default).
const NetBIOSNameLength = 15

// AdminGroup is the Windows group whose first member with a password
// becomes the metadata's admin user (OpenStack's meta.admin_username and
// admin_pass). Windows group names are case-insensitive, so the spec's
// lower-case name is the built-in Administrators group.
const AdminGroup = "administrators"

// scriptName is the file name the user's own script part carries in the
// multipart message: no extension, so cloudbase-init chooses the executor
// by the script's first line (fileExecutor), as it does for the same
// script given alone.
const scriptName = "user-data"

// UserData renders the instance's user data for cloudbase-init: the
// generated #cloud-config (CloudConfig), alone or followed by
// spec.cloudInit.userData in a MIME multipart message; with
// spec.cloudInit.userDataOnly, the user data as given. A spec with
// nothing to say gives empty user data (cloudbase-init refuses an empty
// #cloud-config). Problems are spec.Errors naming the field.
func UserData(inst *spec.Instance) ([]byte, error) {
	ci := &inst.Spec.CloudInit
	user := []byte(ci.UserData)
	gen, err := CloudConfig(inst)
	// Every problem at once: the spec's fields, then the user's data.
	if probs := append(spec.AsErrors(err), checkUser(user)...); len(probs) > 0 {
		return nil, probs
	}
	if err != nil {
		return nil, err
	}
	if ci.UserDataOnly {
		return user, nil
	}
	if len(strings.TrimSpace(ci.UserData)) == 0 {
		if gen == nil {
			return []byte{}, nil // the file is there, empty: "no user data"
		}
		return gen, nil
	}
	if gen == nil {
		return user, nil
	}
	user, _ = cloudinit.Decompress(user)
	genPart := cloudinit.Part{Type: cloudinit.TypeCloudConfig, Data: gen}
	f, _ := Classify(user)
	switch f.Kind {
	case KindMultipart:
		return cloudinit.Multipart(genPart, cloudinit.Part{Data: user, Nested: true}), nil
	case KindCloudConfig:
		return cloudinit.Multipart(genPart, cloudinit.Part{Type: cloudinit.TypeCloudConfig, Data: user}), nil
	case KindScript:
		return cloudinit.Multipart(genPart, cloudinit.Part{Type: cloudinit.TypeShellScript, Filename: scriptName, Data: user}), nil
	}
	return nil, spec.Errors{{Field: "spec.cloudInit.userData", Message: fmt.Sprintf("a %s runs only as the whole user data in cloudbase-init, not beside what the spec generates: set spec.cloudInit.userDataOnly, or move the spec's fields into it", f.Kind)}}
}

// checkUser is CheckUserData as field errors of spec.cloudInit.userData.
func checkUser(data []byte) spec.Errors {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	var errs spec.Errors
	for _, p := range CheckUserData(data) {
		errs = append(errs, &spec.FieldError{Field: "spec.cloudInit.userData", Message: p})
	}
	return errs
}

// CloudConfig renders the #cloud-config of the spec's fields that
// cloudbase-init takes from user data, in the order it runs its modules
// (write_files, timezone, ntp, groups, users, runcmd), or nil when there are
// none. The fields it cannot express are errors naming them (Unsupported).
func CloudConfig(inst *spec.Instance) ([]byte, error) {
	s := &inst.Spec
	var errs spec.ErrorList
	Unsupported(inst, &errs)
	doc := yaml11.Mapping()
	add := func(k string, v *yaml.Node) { yaml11.AddPair(doc, k, v) }
	files := writeFiles(s.Files)
	cmds := s.Commands
	if keys := AdminKeys(s); len(keys) > 0 {
		// Windows OpenSSH reads an administrator's keys from one file of
		// its own (sshkeys.go): staged by write_files, added by runcmd,
		// after the spec's commands (which may start sshd, which makes
		// its directory).
		checkStaging(s.Files, &errs)
		files.Content = append(files.Content, writeFile(AdminKeysStaging, adminKeysFile(keys), 0o644, false))
		cmds = append(slices.Clip(cmds), adminKeysCommands()...)
	}
	if len(files.Content) > 0 {
		add("write_files", files)
	}
	if s.Timezone != "" {
		if p := TimezoneProblem(s.Timezone); p != "" {
			errs.Add("spec.timezone", "%s", p)
		}
		add("timezone", yaml11.String(s.Timezone))
	}
	if s.NTP != nil {
		add("ntp", cloudinit.NTP(s.NTP, false))
	}
	if groups := groupsOf(s.Users); len(groups) > 0 {
		add("groups", yaml11.Flow(yaml11.Strings(groups)))
	}
	if len(s.Users) > 0 {
		add("users", users(s.Users))
	}
	if len(cmds) > 0 {
		add("runcmd", runcmd(cmds, &errs))
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	body, err := yaml11.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("#cloud-config\n"), body...), nil
}

// Unsupported adds an error for every field of inst that cloudbase-init
// cannot apply, each saying why and what to do instead.
func Unsupported(inst *spec.Instance, errs *spec.ErrorList) {
	s := &inst.Spec
	for _, f := range []struct {
		field string
		set   bool
		why   string
	}{
		{"spec.fqdn", s.FQDN != "", "cloudbase-init sets the computer name only (the first label, spec.hostname); a Windows guest takes its DNS suffix from its domain or DHCP"},
		{"spec.sshHostKeys", s.SSHHostKeys != nil, "cloudbase-init does not write SSH host keys; Windows OpenSSH generates them when its service first starts"},
		{"spec.units", len(s.Units) > 0, "a Windows guest has no systemd: install a service from spec.commands (sc.exe create, New-Service) or a #ps1 user data"},
		{"spec.bootCommands", len(s.BootCommands) > 0, "cloudbase-init runs user data on first boot only; an every-boot script belongs in its LocalScripts directory, which the image sets"},
		{"spec.mounts", len(s.Mounts) > 0, "cloudbase-init mounts nothing; Windows assigns drive letters itself (set them from spec.commands: Set-Partition -NewDriveLetter)"},
		{"spec.packages", len(s.Packages) > 0, "cloudbase-init has no package module: install from spec.commands (winget, choco, msiexec) or a #ps1 user data"},
		{"spec.cloudInit.vendorData", s.CloudInit.VendorData != "", "cloudbase-init reads no vendor data"},
		{"spec.cloudInit.noDefaultUser", s.CloudInit.NoDefaultUser, "cloudbase-init always creates its admin user (its configuration's username, or the metadata's admin_username)"},
	} {
		if f.set {
			errs.Add(f.field, "not for a cloudbase-init guest: %s", f.why)
		}
	}
	if st := s.Storage; st != nil {
		if len(st.Disks) > 0 {
			errs.Add("spec.storage.disks", "not for a cloudbase-init guest: it partitions no disk (initialize one from spec.commands: Initialize-Disk, New-Partition)")
		}
		if len(st.Filesystems) > 0 {
			errs.Add("spec.storage.filesystems", "not for a cloudbase-init guest: it formats no filesystem (Format-Volume from spec.commands)")
		}
		if st.Swap != nil {
			errs.Add("spec.storage.swap", "not for a cloudbase-init guest: Windows' page file is set by the image (cloudbase-init's PageFilesPlugin and its configuration)")
		}
		if st.GrowRoot != nil && !*st.GrowRoot {
			errs.Add("spec.storage.growRoot", "false is not for a cloudbase-init guest: its ExtendVolumesPlugin, enabled in the image's configuration, grows the volumes and the data cannot stop it")
		}
	}
	for i, u := range s.Users {
		f := fmt.Sprintf("spec.users[%d]", i)
		for _, uf := range []struct {
			field string
			set   bool
			why   string
		}{
			{".passwordHash", u.PasswordHash != "" || u.PasswordHashFrom != nil, "Windows takes no crypt(3) hash: cloudbase-init sets a password from plain text; give it in password (or leave it out, and cloudbase-init sets a random one)"},
			{".shell", u.Shell != "", "a Windows account has no login shell (Windows OpenSSH's DefaultShell is a registry value of the image)"},
			{".homeDir", u.HomeDir != "", "Windows makes the profile directory itself, at the user's first logon"},
			{".sudo", u.Sudo != "", "Windows has no sudo: put the user in groups: [administrators]"},
			{".system", u.System, "cloudbase-init creates no system accounts"},
		} {
			if uf.set {
				errs.Add(f+uf.field, "not for a cloudbase-init guest: %s", uf.why)
			}
		}
		if len(u.Password) > MaxPasswordLength {
			errs.Add(f+".password", "longer than %d characters, which cloudbase-init refuses on Windows", MaxPasswordLength)
		}
		if u.LockPassword != nil && *u.LockPassword != (u.Password == "") {
			errs.Add(f+".lockPassword", "cloudbase-init locks no password: a user with password logs in with it, and one without gets a random password nobody is told (which is locked in all but name)")
		}
	}
	for i, fl := range s.Files {
		if fl.Owner != "" && fl.Owner != "root:root" && fl.Owner != "root" {
			errs.Add(fmt.Sprintf("spec.files[%d].owner", i), "not for a cloudbase-init guest: its write_files sets no owner (files are the Administrators')")
		}
	}
}

// Warnings are what cloudbase-init does with inst other than the spec
// says, where the guest still comes up: a host name past Windows'
// NetBIOS limit, which it truncates (platforms deliver such names, and
// their Windows guests boot with the truncated one); a key it cannot
// encrypt the password it posts to the OpenStack dialect with.
func Warnings(inst *spec.Instance) spec.Errors {
	var ws spec.Errors
	if h := inst.Spec.Hostname; len(h) > NetBIOSNameLength {
		ws = append(ws, &spec.FieldError{Field: "spec.hostname", Message: fmt.Sprintf("%q is longer than %d characters, the Windows computer (NetBIOS) name's limit: cloudbase-init truncates it to %q", h, NetBIOSNameLength, h[:NetBIOSNameLength])})
	}
	if ms := inst.Spec.MetadataServer; ms != nil && ms.ServesDialect(spec.DialectOpenStack) {
		for i, k := range inst.Spec.SSHAuthorizedKeys {
			if !strings.HasPrefix(k, "ssh-rsa ") {
				ws = append(ws, &spec.FieldError{Field: fmt.Sprintf("spec.sshAuthorizedKeys[%d]", i), Message: "not ssh-rsa: over the OpenStack dialect cloudbase-init posts the admin's password encrypted with one of the keys (the first of an unordered set), and encrypts with ssh-rsa only; with this one its SetUserPassword plugin sets the password but fails to post it, and the password cannot be retrieved: give an RSA key alone where it must be"})
			}
		}
	}
	return ws
}

// groupsOf is every group the users are put in, sorted and unique:
// cloudbase-init's groups module creates those missing (the built-in
// ones, administrators or users, exist), and its users module adds a user
// only to a group that exists.
func groupsOf(users []spec.User) []string {
	var gs []string
	for _, u := range users {
		gs = append(gs, memberOf(u)...)
	}
	slices.Sort(gs)
	return slices.Compact(gs)
}

// memberOf is a user's groups: cloudbase-init has no primary group, and
// takes primary_group as one group more.
func memberOf(u spec.User) []string {
	gs := slices.Clone(u.Groups)
	if u.PrimaryGroup != "" && !slices.Contains(gs, u.PrimaryGroup) {
		gs = append(gs, u.PrimaryGroup)
	}
	return gs
}

// isAdmin says whether u is in Windows' Administrators group.
func isAdmin(u spec.User) bool { return slices.Contains(memberOf(u), AdminGroup) }

func users(list []spec.User) *yaml.Node {
	seq := yaml11.Sequence()
	for _, u := range list {
		m := yaml11.Mapping("name", yaml11.String(u.Name))
		if u.Gecos != "" {
			yaml11.AddPair(m, "gecos", yaml11.String(u.Gecos))
		}
		if gs := memberOf(u); len(gs) > 0 {
			yaml11.AddPair(m, "groups", yaml11.Flow(yaml11.Strings(gs)))
		}
		if u.Password != "" {
			yaml11.AddPair(m, "passwd", yaml11.String(u.Password))
		}
		if len(u.SSHAuthorizedKeys) > 0 {
			yaml11.AddPair(m, "ssh_authorized_keys", yaml11.Strings(u.SSHAuthorizedKeys))
		}
		seq.Content = append(seq.Content, m)
	}
	return seq
}

// writeFiles is cloudbase-init's write_files: the content in base64 (so
// any bytes travel), the mode as its permissions (on Windows, os.chmod
// sets only the read-only attribute), append kept. A path is the spec's
// absolute path, which Windows resolves on the system drive
// (/ProgramData/app.conf is C:\ProgramData\app.conf).
func writeFiles(files []spec.File) *yaml.Node {
	seq := yaml11.Sequence()
	for _, f := range files {
		mode := spec.Mode(0o644)
		if f.Mode != nil {
			mode = *f.Mode
		}
		seq.Content = append(seq.Content, writeFile(f.Path, f.Data(), mode, f.Append))
	}
	return seq
}

// writeFile is one write_files entry.
func writeFile(path string, data []byte, mode spec.Mode, appendTo bool) *yaml.Node {
	m := yaml11.Mapping(
		"path", yaml11.String(path),
		"encoding", yaml11.String("b64"),
		"content", yaml11.String(base64.StdEncoding.EncodeToString(data)),
		"permissions", yaml11.String(mode.String()),
	)
	if appendTo {
		yaml11.AddPair(m, "append", yaml11.BoolNode(true))
	}
	return m
}

// cmdSpecial are the characters cmd.exe gives a meaning: an argument
// holding one (or white space) cannot be joined into a command line
// unquoted, which is all cloudbase-init's runcmd does with a list.
const cmdSpecial = " \t\"&|<>^%()!"

// runcmd is cloudbase-init's runcmd: one cmd.exe script, a line a
// command, under its "rem cmd" header. A list command is joined with
// spaces, as cloudbase-init joins it, so its arguments must need no
// quoting; a command is one line.
func runcmd(cmds []spec.Command, errs *spec.ErrorList) *yaml.Node {
	seq := yaml11.Sequence()
	for i, c := range cmds {
		f := fmt.Sprintf("spec.commands[%d]", i)
		if c.Argv == nil {
			if strings.ContainsAny(c.Shell, "\r\n") {
				errs.Add(f, "cloudbase-init runs spec.commands as one cmd.exe script, a line a command: give one line (or a #ps1 user data for a script)")
			}
			seq.Content = append(seq.Content, yaml11.String(c.Shell))
			continue
		}
		for j, a := range c.Argv {
			if a == "" || strings.ContainsAny(a, cmdSpecial+"\r\n") {
				errs.Add(fmt.Sprintf("%s[%d]", f, j), "%q needs quoting for cmd.exe, and cloudbase-init joins a list command with spaces, unquoted: write the command as one string, quoted for cmd.exe", a)
			}
		}
		seq.Content = append(seq.Content, yaml11.Flow(yaml11.Strings(c.Argv)))
	}
	return seq
}

// Admin is the spec's Windows administrator: the first user in group
// administrators with a password, or nil. The OpenStack metadata
// (ConfigDrive, the OpenStack dialect) names it as meta.admin_username,
// with its password as admin_pass, which cloudbase-init's CreateUser and
// SetUserPassword plugins apply (and its SSH public keys plugin gives
// spec.sshAuthorizedKeys to it). Without one, cloudbase-init's own admin
// user (its configuration's username, "Admin") gets the keys and a random
// password, which it posts encrypted to the OpenStack password endpoint.
func Admin(s *spec.Spec) *spec.User {
	for i, u := range s.Users {
		if u.Password != "" && isAdmin(u) {
			return &s.Users[i]
		}
	}
	return nil
}

// ConfigDriveMetaData renders openstack/latest/meta_data.json for a
// cloudbase-init guest: cloud-init's (cloudinit.ConfigDriveMetaData) with
// meta.admin_username and admin_pass of the spec's Admin.
func ConfigDriveMetaData(inst *spec.Instance) ([]byte, error) {
	admin := Admin(&inst.Spec)
	if admin == nil {
		return cloudinit.ConfigDriveMetaData(inst)
	}
	md := inst.Spec.CloudInit.MetaData
	if _, ok := md["meta"]; ok {
		return nil, spec.Errors{{Field: "spec.cloudInit.metaData.meta", Message: fmt.Sprintf("generated for cloudbase-init from spec.users (admin_username %q, in group %s, and its password); set them there", admin.Name, AdminGroup)}}
	}
	cp := *inst
	cp.Spec.CloudInit.MetaData = maps.Clone(md)
	if cp.Spec.CloudInit.MetaData == nil {
		cp.Spec.CloudInit.MetaData = map[string]any{}
	}
	cp.Spec.CloudInit.MetaData["meta"] = map[string]any{"admin_username": admin.Name, "admin_pass": admin.Password}
	return cloudinit.ConfigDriveMetaData(&cp)
}
