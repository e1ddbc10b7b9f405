package ignition

import (
	"fmt"
	"slices"
	"strings"

	types "github.com/coreos/ignition/v2/config/v3_0/types"

	"github.com/vminit/vminit/spec"
)

// lockedPassword is the password field `passwd -l` leaves on an account
// without a password. Ignition's own default for a new user is "*", which
// also refuses passwords, but it is not a lock (passwd -S, and sshd without
// PAM, tell them apart), and it does not touch users the image already has.
const lockedPassword = "!"

// etcGroups are the groups the images keep in /etc/group, where useradd
// --root finds them. Fedora CoreOS and RHCOS keep their other system groups
// in /usr/lib/group (nss-altfiles) and Flatcar in
// /usr/share/baselayout/group, which useradd --root cannot see.
var etcGroups = map[Variant][]string{
	FCOS:    {"root", "wheel", "sudo", "adm", "systemd-journal"},
	RHCOS:   {"root", "wheel", "sudo", "adm", "systemd-journal"},
	Flatcar: {"root", "wheel", "sudo", "adm", "systemd-journal", "docker", "portage", "core"},
}

// imageGroups are system groups the images have outside /etc/group: a user
// cannot be put in them by Ignition (coreos/ignition#1596), and creating
// them would give the guest a second group of the same name.
var imageGroups = []string{
	"audio", "bin", "cdrom", "daemon", "dialout", "disk", "docker", "floppy",
	"input", "kmem", "kvm", "lock", "lp", "mail", "man", "mem", "render",
	"ssh_keys", "sys", "tape", "tty", "users", "utmp", "video",
}

func (r *renderer) users(cfg *types.Config) {
	s := &r.inst.Spec
	var defaultKeys []types.SSHAuthorizedKey
	for _, k := range s.SSHAuthorizedKeys {
		defaultKeys = append(defaultKeys, types.SSHAuthorizedKey(strings.TrimRight(k, "\n")))
	}
	coreListed := slices.ContainsFunc(s.Users, func(u spec.User) bool { return u.Name == DefaultUser })
	if len(defaultKeys) > 0 && !coreListed {
		cfg.Passwd.Users = append(cfg.Passwd.Users, types.PasswdUser{Name: DefaultUser, SSHAuthorizedKeys: defaultKeys})
	}
	created := map[string]bool{}
	group := func(field, name string, primary bool) bool {
		switch {
		case slices.Contains(etcGroups[r.opts.Variant], name):
			return true
		case slices.Contains(imageGroups, name) && !(r.opts.Variant == Flatcar && name == "docker"):
			what := "supplementary group"
			if primary {
				what = "primary group"
			}
			r.unsupported(field, "%s %q lives outside /etc/group on %s images, where Ignition's useradd cannot find it (coreos/ignition#1596); add the membership with a command instead, e.g. usermod -aG %s <user>", what, name, r.opts.Variant, name)
			return false
		case !created[name]:
			// useradd fails on a missing group; cloud-init creates it.
			created[name] = true
			cfg.Passwd.Groups = append(cfg.Passwd.Groups, types.PasswdGroup{Name: name})
		}
		return true
	}
	for i, u := range s.Users {
		f := fmt.Sprintf("spec.users[%d]", i)
		pu := types.PasswdUser{
			Name:    u.Name,
			Gecos:   optStr(u.Gecos),
			HomeDir: optStr(u.HomeDir),
			Shell:   optStr(u.Shell),
		}
		if u.PrimaryGroup != "" && group(f+".primaryGroup", u.PrimaryGroup, true) {
			pu.PrimaryGroup = optStr(u.PrimaryGroup)
		}
		for j, g := range u.Groups {
			if group(fmt.Sprintf("%s.groups[%d]", f, j), g, false) {
				pu.Groups = append(pu.Groups, types.Group(g))
			}
		}
		if u.System {
			// cloud-init's useradd gets -M for system users.
			pu.System, pu.NoCreateHome = boolPtr(true), boolPtr(true)
		}
		locked := u.LockPassword == nil && u.PasswordHash == "" || u.LockPassword != nil && *u.LockPassword
		switch {
		case u.PasswordHash != "" && locked:
			pu.PasswordHash = strPtr(lockedPassword + u.PasswordHash)
		case u.PasswordHash != "":
			pu.PasswordHash = strPtr(u.PasswordHash)
		case locked:
			pu.PasswordHash = strPtr(lockedPassword)
		}
		if u.Name == DefaultUser {
			pu.SSHAuthorizedKeys = append(pu.SSHAuthorizedKeys, defaultKeys...)
		}
		for _, k := range u.SSHAuthorizedKeys {
			k := types.SSHAuthorizedKey(strings.TrimRight(k, "\n"))
			if !slices.Contains(pu.SSHAuthorizedKeys, k) {
				pu.SSHAuthorizedKeys = append(pu.SSHAuthorizedKeys, k)
			}
		}
		cfg.Passwd.Users = append(cfg.Passwd.Users, pu)
		if u.Sudo != "" {
			p := "/etc/sudoers.d/vminit-" + u.Name
			if r.claim(p, f+".sudo") {
				r.addFile(cfg, p, []byte(u.Name+" "+u.Sudo+"\n"), 0o440, "", false)
			}
		}
	}
}

// homeOf returns the home directory a user named in an owner gets, or ""
// for a user the spec does not create (other than core) or a system user.
func (r *renderer) homeOf(user string) string {
	for _, u := range r.inst.Spec.Users {
		if u.Name != user {
			continue
		}
		switch {
		case u.HomeDir != "":
			return u.HomeDir
		case u.System:
			return ""
		}
		return "/home/" + u.Name
	}
	if user == DefaultUser {
		return "/home/" + DefaultUser
	}
	return ""
}
