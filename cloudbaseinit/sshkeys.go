package cloudbaseinit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vminit/vminit/spec"
)

// Windows OpenSSH's default sshd_config (Microsoft's, shipped with the
// OpenSSH capability of Windows Server 2019 and Windows 10 and later) ends
//
//	Match Group administrators
//	       AuthorizedKeysFile __PROGRAMDATA__/ssh/administrators_authorized_keys
//
// so sshd never reads an administrator's %USERPROFILE%\.ssh\authorized_keys,
// where cloudbase-init writes every user's keys (its SSH public keys plugin
// and its users module). The administrators' keys are also given to that
// file, in two steps cloudbase-init can take:
//
//   - write_files puts them in a staging file of vminit's
//     (AdminKeysStaging). Never on a command line: a key's comment may hold
//     any of cmd.exe's & | < > ^ %.
//   - runcmd appends it to the file with cmd.exe's type, and then gives the
//     file the ACL sshd requires of it (Microsoft's "OpenSSH key
//     management": owned and writable only by Administrators and SYSTEM,
//     inheritance removed, or sshd ignores it).
//
// Appended, not written: an image may already have keys there. Only if
// %PROGRAMDATA%\ssh exists: sshd makes that directory at its first start,
// with an ACL of its own, and refuses to start when the directory exists
// with another (Win32-OpenSSH's create_prgdata_ssh_folder), so neither step may make it.
// write_files' own append would make it, which is why the staging file.

// AdminKeysStaging is where write_files stages the administrators' keys,
// as a spec path (Windows resolves it on the system drive). It stays after
// the boot: it holds only public keys, and on an image whose sshd has not
// yet made its directory, it is what to append by hand.
const AdminKeysStaging = "/ProgramData/vminit/administrators_authorized_keys"

// adminKeysComment heads the keys vminit appends, so that whoever reads
// the file knows where they came from.
const adminKeysComment = "# vminit: spec.sshAuthorizedKeys and the keys of spec.users in group administrators"

// AdminKeys are the SSH keys of the spec's Windows administrators, each
// once, in the spec's order: spec.sshAuthorizedKeys, which cloudbase-init
// gives to its admin (the metadata's admin_username, which is Admin's,
// else its configuration's username, which its configuration's groups put
// in Administrators), then the keys of each of spec.users in group
// administrators.
func AdminKeys(s *spec.Spec) []string {
	keys := slices.Clone(s.SSHAuthorizedKeys)
	for _, u := range s.Users {
		if isAdmin(u) {
			keys = append(keys, u.SSHAuthorizedKeys...)
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		// One line each, as cloudbase-init strips the metadata's keys
		// (spec validation refuses a key of several lines).
		if k = strings.TrimSpace(k); k != "" && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// adminKeysFile is the staging file's content: a blank line first, which
// ends the file's last key when the image wrote it without a newline
// (sshd skips blank and # lines), then the comment and a key a line.
func adminKeysFile(keys []string) []byte {
	var b strings.Builder
	b.WriteString("\n" + adminKeysComment + "\n")
	for _, k := range keys {
		b.WriteString(k + "\n")
	}
	return []byte(b.String())
}

// adminKeysCommands are the runcmd lines (cmd.exe, one script) that append
// the staging file to sshd's file and set its owner and ACL. The groups are
// named by SID (*S-1-5-32-544 Administrators, *S-1-5-18 SYSTEM): the names
// Microsoft's procedure uses are translated on a localized Windows, the
// SIDs are not. The owner is set too: sshd refuses a file whose owner is
// not Administrators, SYSTEM or the user logging in, and a file cmd.exe
// makes is owned by the account cloudbase-init runs as (its own
// cloudbase-init user, by default), unless Windows' policy gives the
// Administrators group the objects an administrator makes (the default on
// Windows Server, not on Windows 10 and 11).
func adminKeysCommands() []spec.Command {
	const (
		dir    = `"%PROGRAMDATA%\ssh\"`
		target = `"%PROGRAMDATA%\ssh\administrators_authorized_keys"`
		ifDir  = "if exist " + dir + " "
	)
	// Drive-relative, as Python's abspath made write_files' path: both
	// resolve on the drive cloudbase-init runs on, the system drive.
	staging := `"` + strings.ReplaceAll(AdminKeysStaging, "/", `\`) + `"`
	return []spec.Command{
		{Shell: ifDir + "type " + staging + " >> " + target},
		{Shell: ifDir + "icacls " + target + " /setowner *S-1-5-32-544"},
		{Shell: ifDir + "icacls " + target + " /inheritance:r /grant *S-1-5-32-544:F /grant *S-1-5-18:F"},
	}
}

// checkStaging refuses a spec file at the staging path, which the
// administrators' keys would overwrite.
func checkStaging(files []spec.File, errs *spec.ErrorList) {
	for i, f := range files {
		if f.Path == AdminKeysStaging {
			errs.Add(fmt.Sprintf("spec.files[%d].path", i), "%s is where vminit stages the administrators' SSH keys for Windows OpenSSH (docs/windows.md#ssh-keys): choose another path", f.Path)
		}
	}
}
