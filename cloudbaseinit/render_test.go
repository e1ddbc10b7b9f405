package cloudbaseinit_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudbaseinit"
	"github.com/vminit/vminit/internal/testing/cbitest"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

const head = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: win-4}\nspec:\n  agent: cloudbase-init\n"

// TestErrorsNameTheField: what cloudbase-init cannot do is an error naming
// the field, every one at once.
func TestErrorsNameTheField(t *testing.T) {
	inst := load(t, head+`  commands: [[icacls, "C:\\Program Files", /grant, "ops:F"], "echo a\necho b"]
  users: [{name: ops, password: pw, lockPassword: true}, {name: app, lockPassword: false}]
  files: [{path: /x, owner: "ops:ops"}]
  storage: {growRoot: false, swap: {path: /swapfile, size: 1GiB}}
  cloudInit: {metaData: {meta: {a: b}}}
`)
	_, err := cloudbaseinit.UserData(inst)
	for _, want := range []string{
		`spec.commands[0][1]: "C:\\Program Files" needs quoting for cmd.exe`,
		"spec.commands[1]: cloudbase-init runs spec.commands as one cmd.exe script, a line a command",
		"spec.users[0].lockPassword: cloudbase-init locks no password",
		"spec.users[1].lockPassword: cloudbase-init locks no password",
		"spec.files[0].owner: not for a cloudbase-init guest",
		"spec.storage.swap: not for a cloudbase-init guest",
		"spec.storage.growRoot: false is not for a cloudbase-init guest",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in: %v", want, err)
		}
	}
	admin := load(t, head+"  users: [{name: ops, groups: [administrators], password: pw}]\n  cloudInit: {metaData: {meta: {a: b}}}\n")
	if _, err := cloudbaseinit.ConfigDriveMetaData(admin); err == nil || !strings.Contains(err.Error(), `spec.cloudInit.metaData.meta: generated for cloudbase-init from spec.users (admin_username "ops"`) {
		t.Errorf("meta beside an admin: %v", err)
	}
}

// TestWarnings: a host name Windows truncates, and a key cloudbase-init
// cannot encrypt the password it posts with, are warnings naming the
// field.
func TestWarnings(t *testing.T) {
	inst := load(t, head+"  hostname: a-very-long-windows-name\n  sshAuthorizedKeys: [\""+cbitest.TestKey+"\"]\n  metadataServer: {addresses: [192.0.2.1]}\n")
	ws := cloudbaseinit.Warnings(inst).Error()
	for _, want := range []string{
		`spec.hostname: "a-very-long-windows-name" is longer than 15 characters, the Windows computer (NetBIOS) name's limit: cloudbase-init truncates it to "a-very-long-win"`,
		"spec.sshAuthorizedKeys[0]: not ssh-rsa: over the OpenStack dialect",
	} {
		if !strings.Contains(ws, want) {
			t.Errorf("want %q in: %s", want, ws)
		}
	}
	// Without a metadata server, the key is only a seed's: no warning.
	inst.Spec.MetadataServer = nil
	if ws := cloudbaseinit.Warnings(inst).Error(); strings.Contains(ws, "ssh-rsa") {
		t.Errorf("warned for a seed: %s", ws)
	}
}

// TestSameBytes: the same spec gives the same bytes.
func TestSameBytes(t *testing.T) {
	inst := load(t, cbitest.WinSpec(""))
	a, err := seed.Build(inst, seed.ConfigDrive, seed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := seed.Build(load(t, cbitest.WinSpec("")), seed.ConfigDrive, seed.Options{})
	for i := range a.Files {
		if string(a.Files[i].Data) != string(b.Files[i].Data) {
			t.Errorf("%s differs", a.Files[i].Path)
		}
	}
}

// TestTimezoneRefused: a spec.timezone cloudbase-init cannot set (not in
// CLDR's IANA-to-Windows mapping it looks names up in) is an error naming
// the field, at its line, with the mapped name of the same zone when there
// is one; a #cloud-config of the user's is held to the same rule. The
// other agents keep theirs (any IANA-shaped name).
func TestTimezoneRefused(t *testing.T) {
	for _, tc := range []struct{ zone, want string }{
		{"Asia/Kolkata", `spec.timezone: "Asia/Kolkata" is not a zone cloudbase-init can set: it maps IANA names to Windows time zones through Unicode CLDR's windowsZones (tzlocal's tz_win), which lacks this name, so its set_timezone raises "The given timezone name is unrecognised" and the guest keeps the image's zone; write "Asia/Calcutta", the name CLDR maps for the same zone`},
		{"Europe/Kyiv", `write "Europe/Kiev"`},
		{"Asia/Istanbul", `write "Europe/Istanbul"`},
		{"europe/berlin", `write "Europe/Berlin"`},
		{"America/Ciudad_Juarez", "the guest keeps the image's zone; write a zone CLDR maps (docs/windows.md)"},
	} {
		doc := head + "  hostname: w\n  timezone: " + tc.zone + "\n"
		_, err := cloudbaseinit.UserData(load(t, doc))
		es := spec.AsErrors(err)
		if len(es) != 1 || !strings.Contains(es[0].Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.zone, err, tc.want)
			continue
		}
		if _, pos, _ := spec.Decode([]byte(doc)); pos.Line(es[0].Field) != 7 {
			t.Errorf("%s: field %q is at line %d of the spec; want 7", tc.zone, es[0].Field, pos.Line(es[0].Field))
		}
		inst := load(t, "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: lin}\nspec:\n  timezone: "+tc.zone+"\n")
		if _, err := seed.Build(inst, seed.NoCloud, seed.Options{}); err != nil {
			t.Errorf("%s for cloud-init: %v", tc.zone, err)
		}
	}
	for _, zone := range []string{"Asia/Calcutta", "Europe/Berlin", "UTC", "Etc/GMT+5", "US/Eastern"} {
		if _, err := cloudbaseinit.UserData(load(t, head+"  timezone: "+zone+"\n")); err != nil {
			t.Errorf("%s: %v", zone, err)
		}
	}
	inst := load(t, head)
	inst.Spec.CloudInit.UserData = "#cloud-config\nset_timezone: Asia/Kolkata\n"
	inst.Spec.CloudInit.UserDataOnly = true
	if _, err := cloudbaseinit.UserData(inst); err == nil || !strings.Contains(err.Error(), `spec.cloudInit.userData: #cloud-config line 2: set_timezone: "Asia/Kolkata" is not a zone cloudbase-init can set`) {
		t.Errorf("user data: %v", err)
	}
}

// Keys of the administrators' tests: the spec's (which cloudbase-init
// gives its admin), two administrators' (one with a comment of cmd.exe's
// special characters), a plain user's.
const (
	specKey   = cbitest.TestKey
	adminKey  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEIqg3vk2MubWg49bvnihxXYP7Yh+/Xbz+aQekO/XaoJ ops & co | <adm> ^ %PATH% \"q\""
	adminKey2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDy+rKtyv3YK6owlyeZsHhlWiNS6P1cRwuwusGLTtdwY b@example.com"
	userKey   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILJ4JpffhJuA7xeICskUT/GdrgTd+whaHHo/pY4kEanZ c@example.com"
)

// adminsSpec has every kind of key: the spec's, an administrator's by
// groups (with the spec's key again) and by primaryGroup, a plain user's.
const adminsSpec = head + `  sshAuthorizedKeys: ["` + specKey + `"]
  users:
    - {name: ops, groups: [administrators], password: pw, sshAuthorizedKeys: ['` + adminKey + `', "` + specKey + `"]}
    - {name: dev, primaryGroup: administrators, sshAuthorizedKeys: ["` + adminKey2 + `"]}
    - {name: app, groups: [users], sshAuthorizedKeys: ["` + userKey + `"]}
  commands: ["echo hi"]
`

// adminKeysFile is what adminsSpec's administrators' keys become, each
// once, the spec's first.
var adminKeysFile = cbitest.AdminKeysFile(specKey, adminKey, adminKey2)

// TestAdminKeys: the keys of the spec's administrators (spec.sshAuthorizedKeys,
// which cloudbase-init gives its admin, and spec.users in group
// administrators), each once, reach a staging file by write_files and
// sshd's administrators_authorized_keys by runcmd lines after the spec's
// commands, which hold no key; a plain user's keys do not; the same spec
// gives the same bytes.
func TestAdminKeys(t *testing.T) {
	gen, err := cloudbaseinit.CloudConfig(load(t, adminsSpec))
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := cloudbaseinit.CloudConfig(load(t, adminsSpec)); !bytes.Equal(gen, again) {
		t.Errorf("the same spec gave different bytes:\n%s\n%s", gen, again)
	}
	var doc struct {
		WriteFiles []struct{ Path, Content string } `yaml:"write_files"`
		Runcmd     []string
	}
	if err := yaml.Unmarshal(gen, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.WriteFiles) != 1 || doc.WriteFiles[0].Path != cbitest.AdminKeysStaging {
		t.Fatalf("write_files %+v; want the staging file only", doc.WriteFiles)
	}
	if got, _ := base64.StdEncoding.DecodeString(doc.WriteFiles[0].Content); string(got) != adminKeysFile {
		t.Errorf("staging file %q\nwant %q", got, adminKeysFile)
	}
	if got := strings.Join(doc.Runcmd, "\n") + "\n"; got != "echo hi\n"+cbitest.AdminKeysCommands {
		t.Errorf("runcmd:\n%s\nwant:\n%s", got, "echo hi\n"+cbitest.AdminKeysCommands)
	}
	for _, k := range []string{specKey, adminKey, adminKey2, userKey} {
		blob := strings.Fields(k)[1]
		for _, line := range doc.Runcmd {
			if strings.Contains(line, blob) || strings.Contains(line, "example.com") || strings.Contains(line, "%PATH%") {
				t.Errorf("a key on a command line: %s", line)
			}
		}
	}

	// A spec file of the staging path would be overwritten: an error.
	clash := load(t, adminsSpec+"  files: [{path: /ProgramData/vminit/administrators_authorized_keys}]\n")
	if _, err := cloudbaseinit.CloudConfig(clash); err == nil || !strings.Contains(err.Error(), "spec.files[0].path: /ProgramData/vminit/administrators_authorized_keys is where vminit stages the administrators' SSH keys") {
		t.Errorf("a file at the staging path: %v", err)
	}

	// No administrator's key, no staging file and no command: a plain
	// user's keys, an administrator without keys.
	for _, doc := range []string{
		head + "  users: [{name: app, sshAuthorizedKeys: [\"" + userKey + "\"]}, {name: ops, groups: [administrators], password: pw}]\n",
		head + "  users: [{name: app, groups: [users], sshAuthorizedKeys: [\"" + userKey + "\"]}]\n  commands: [\"echo hi\"]\n",
	} {
		gen, err := cloudbaseinit.CloudConfig(load(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		if s := string(gen); strings.Contains(s, "write_files") || strings.Contains(s, "administrators_authorized_keys") || strings.Contains(s, "icacls") {
			t.Errorf("no administrator's key, yet:\n%s", s)
		}
	}
}

// TestAdminKeysWhereSSHDReads: the file the runcmd lines append to and
// give their ACL is the one Windows OpenSSH's own default sshd_config
// (testdata/openssh, Microsoft's) reads an administrator's keys from,
// while a plain user's stay in the profile, where cloudbase-init writes
// them.
func TestAdminKeysWhereSSHDReads(t *testing.T) {
	conf, err := os.ReadFile("testdata/openssh/sshd_config")
	if err != nil {
		t.Fatal(err)
	}
	var global, admins string
	match := ""
	for _, line := range strings.Split(string(conf), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case f[0] == "Match":
			match = strings.Join(f[1:], " ")
		case f[0] == "AuthorizedKeysFile" && match == "":
			global = strings.Join(f[1:], " ")
		case f[0] == "AuthorizedKeysFile" && match == "Group administrators":
			admins = strings.Join(f[1:], " ")
		}
	}
	if global != ".ssh/authorized_keys" || admins == "" {
		t.Fatalf("sshd_config: AuthorizedKeysFile %q, for administrators %q", global, admins)
	}
	// sshd's __PROGRAMDATA__ is cmd.exe's %PROGRAMDATA%.
	path := `"` + strings.ReplaceAll(strings.Replace(admins, "__PROGRAMDATA__", "%PROGRAMDATA%", 1), "/", `\`) + `"`
	gen, err := cloudbaseinit.CloudConfig(load(t, adminsSpec))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">> " + path + "\n", "icacls " + path + " /setowner", "icacls " + path + " /inheritance:r"} {
		if !strings.Contains(string(gen), want) {
			t.Errorf("no %q in:\n%s", want, gen)
		}
	}
}
