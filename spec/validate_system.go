package spec

// The rules of the guest's system fields: spec.users, spec.files,
// spec.units, spec.commands and spec.bootCommands, spec.mounts.

import (
	"fmt"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/vminit/vminit/internal/lib/lazyre"
)

var (
	ownerRE  = lazyre.New(`^([a-z_][a-z0-9_-]*\$?)?(:[a-z_][a-z0-9_-]*\$?)?$`)
	cryptRE  = lazyre.New(`^\$(1|2[abxy]|5|6|y|gy|7|sha1|md5)\$[./A-Za-z0-9$=,+-]+$`)
	unitRE   = lazyre.New(`^[A-Za-z0-9:_.\\@-]+\.(service|socket|timer|mount|automount|target|path|slice|swap|device|scope)$`)
	dropinRE = lazyre.New(`^[A-Za-z0-9:_.@-]+\.conf$`)
	fstypeRE = lazyre.New(`^[a-z0-9_.-]+$`)
)

// validateUsers checks spec.users: unique user names, group names, the
// shell's and home's paths, and passwords as crypt hashes (plain text
// only for cloudbase-init, which takes no hash).
func validateUsers(c *ErrorList, users []User, agent string) {
	seen := map[string]int{}
	for i, u := range users {
		f := fmt.Sprintf("spec.users[%d]", i)
		switch {
		case u.Name == "":
			c.Add(f+".name", "required")
		case !validUserName(u.Name):
			c.Add(f+".name", "%q is not a valid user name: lowercase letters, digits, '_' and '-', starting with a letter or '_', at most 32 characters", u.Name)
		}
		if j, dup := seen[u.Name]; dup && u.Name != "" {
			c.Add(f+".name", "user %q is already defined at spec.users[%d]", u.Name, j)
		} else {
			seen[u.Name] = i
		}
		if u.PrimaryGroup != "" && !validUserName(u.PrimaryGroup) {
			c.Add(f+".primaryGroup", "%q is not a valid group name", u.PrimaryGroup)
		}
		for j, g := range u.Groups {
			if !validUserName(g) {
				c.Add(fmt.Sprintf("%s.groups[%d]", f, j), "%q is not a valid group name", g)
			}
		}
		if u.Shell != "" {
			checkPath(c, f+".shell", u.Shell)
		}
		if u.HomeDir != "" {
			checkPath(c, f+".homeDir", u.HomeDir)
		}
		if strings.ContainsAny(u.Sudo, "\n\r") {
			c.Add(f+".sudo", "one sudoers rule on one line, e.g. \"ALL=(ALL) NOPASSWD:ALL\"")
		}
		if strings.ContainsAny(u.Gecos, ":\n") {
			c.Add(f+".gecos", "may not contain ':' or a newline (it is a passwd field)")
		}
		if u.Password != "" && agent != AgentCloudbaseInit {
			c.Add(f+".password", "plain-text passwords are refused (they would sit readable on the seed): put a crypt hash in passwordHash, e.g. from `mkpasswd -m sha-512`")
		}
		if u.PasswordHash != "" && !cryptRE.MatchString(u.PasswordHash) {
			c.Add(f+fromField(".passwordHash", u.PasswordHashFrom), "not a crypt(3) hash such as \"$6$salt$…\" (generate one with `mkpasswd -m sha-512`)")
		}
		for j, k := range u.SSHAuthorizedKeys {
			checkSSHKey(c, fmt.Sprintf("%s.sshAuthorizedKeys[%d]", f, j), k)
		}
	}
}

// validateFiles checks spec.files: each path written once (PathClaims),
// one source of content, and an owner by name.
func validateFiles(c *ErrorList, files []File) {
	claims := PathClaims{}
	for i, fl := range files {
		f := fmt.Sprintf("spec.files[%d]", i)
		checkPath(c, f+".path", fl.Path)
		if fl.Path != "" {
			claims.Claim(c, fl.Path, f+".path")
		}
		n := 0
		if fl.Content != nil {
			n++
		}
		if fl.ContentBase64 != "" {
			n++
		}
		if fl.Source != nil {
			n++ // validateRefs checks it
		}
		if n > 1 {
			c.Add(f, "set only one of content, contentBase64 and source")
		}
		if fl.Owner != "" && !ownerRE.MatchString(fl.Owner) {
			c.Add(f+".owner", "%q: want \"user\", \"user:group\" or \":group\" by name (cloud-init looks owners up by name, so numeric IDs cannot work)", fl.Owner)
		}
	}
}

// validateUnits checks spec.units: unique names with their type suffix,
// something to do, and unit and drop-in texts that systemd can read.
func validateUnits(c *ErrorList, units []Unit) {
	seen := map[string]int{}
	for i, u := range units {
		f := fmt.Sprintf("spec.units[%d]", i)
		if !unitRE.MatchString(u.Name) {
			c.Add(f+".name", "%q is not a systemd unit name with its type suffix, e.g. \"app.service\"", u.Name)
		}
		if j, dup := seen[u.Name]; dup {
			c.Add(f+".name", "unit %q is already defined at spec.units[%d]", u.Name, j)
		} else {
			seen[u.Name] = i
		}
		if u.Content == "" && len(u.Dropins) == 0 && u.Enabled == nil {
			c.Add(f, "nothing to do: give content, dropins or enabled")
		}
		checkUnitSyntax(c, f+".content", u.Content)
		dseen := map[string]bool{}
		for j, d := range u.Dropins {
			df := fmt.Sprintf("%s.dropins[%d]", f, j)
			if !dropinRE.MatchString(d.Name) {
				c.Add(df+".name", "%q: a drop-in name ends in .conf", d.Name)
			}
			if dseen[d.Name] {
				c.Add(df+".name", "drop-in %q is given twice", d.Name)
			}
			checkUnitSyntax(c, df+".content", d.Content)
			dseen[d.Name] = true
		}
	}
}

// checkUnitSyntax reports unit file text that systemd (and Ignition's
// validator, which uses the same go-systemd parser) cannot read: an
// unterminated section header, a line outside any section.
func checkUnitSyntax(c *ErrorList, field, content string) {
	if content == "" {
		return
	}
	if _, err := unit.DeserializeOptions(strings.NewReader(content)); err != nil {
		c.Add(field, "not a systemd unit file: %v", err)
	}
}

// validateCommands checks a list of commands (spec.commands,
// spec.bootCommands): a shell line, or an argument list with a program.
func validateCommands(c *ErrorList, field string, cmds []Command) {
	for i, cmd := range cmds {
		f := fmt.Sprintf("%s[%d]", field, i)
		if cmd.Argv == nil && strings.TrimSpace(cmd.Shell) == "" {
			c.Add(f, "empty command")
		}
		if cmd.Argv != nil && (len(cmd.Argv) == 0 || cmd.Argv[0] == "") {
			c.Add(f, "an argument list needs a program as its first element")
		}
	}
}

// validateMounts checks spec.mounts: a device, a mount point used once, a
// filesystem type, and one option an entry.
func validateMounts(c *ErrorList, mounts []Mount) {
	seen := map[string]int{}
	for i, m := range mounts {
		f := fmt.Sprintf("spec.mounts[%d]", i)
		if m.Device == "" || strings.ContainsAny(m.Device, " \t\n") {
			c.Add(f+".device", "required, without whitespace (a device path, LABEL=…, UUID=… or server:/export)")
		}
		checkPath(c, f+".path", m.Path)
		if j, dup := seen[m.Path]; dup && m.Path != "" {
			c.Add(f+".path", "%q is already mounted by spec.mounts[%d]", m.Path, j)
		} else {
			seen[m.Path] = i
		}
		if m.Type != "" && !fstypeRE.MatchString(m.Type) {
			c.Add(f+".type", "%q is not a filesystem type", m.Type)
		}
		for j, o := range m.Options {
			if o == "" || strings.ContainsAny(o, ", \t\n") {
				c.Add(fmt.Sprintf("%s.options[%d]", f, j), "%q: one option per entry, without commas or whitespace", o)
			}
		}
	}
}
