package ignition

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// config is the parts of a rendered config the tests look into.
type rendered struct {
	Passwd struct {
		Users []struct {
			Name         string
			PasswordHash *string
			Groups       []string
			System       *bool
			NoCreateHome *bool
			SSHKeys      []string `json:"sshAuthorizedKeys"`
		}
		Groups []struct{ Name string }
	}
	Storage struct {
		Files []struct {
			Path     string
			Mode     int
			Contents struct{ Source, Compression string }
			Append   []struct{ Source, Compression string }
		}
		Directories []struct {
			Path string
			Mode int
			User struct{ Name string }
		}
	}
	Systemd struct {
		Units []struct {
			Name     string
			Contents string
			Enabled  *bool
		}
	}
}

func parse(t *testing.T, raw []byte) *rendered {
	t.Helper()
	var c rendered
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// fileData returns a file's content from a rendered config.
func fileData(t *testing.T, raw []byte, p string) []byte {
	t.Helper()
	for _, f := range parse(t, raw).Storage.Files {
		if f.Path == p {
			c := f.Contents
			if len(f.Append) == 1 {
				c = f.Append[0]
			}
			return []byte(decodeDataURL(t, c.Source, c.Compression))
		}
	}
	t.Fatalf("%s is not in the config", p)
	return nil
}

func TestPackages(t *testing.T) {
	inst := specFrom(t, "spec:\n  packages: [git]\n")
	_, err := Render(inst, Options{})
	if err == nil || !strings.Contains(err.Error(), "spec.packages: Ignition cannot install packages; layer them with rpm-ostree") {
		t.Errorf("packages: %v", err)
	}
	res, err := Render(inst, Options{AllowPartial: true})
	if err != nil || len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "spec.packages: ") {
		t.Errorf("packages with AllowPartial: %v %v", res, err)
	}
}

// TestNTP: Ignition configures no time service, so spec.ntp is an
// error naming the field (a warning with AllowPartial).
func TestNTP(t *testing.T) {
	inst := specFrom(t, "spec:\n  ntp: {pools: [pool.ntp.org]}\n")
	if _, err := Render(inst, Options{}); err == nil || !strings.Contains(err.Error(), "spec.ntp: Ignition configures no time service") {
		t.Errorf("ntp: %v", err)
	}
	if res, err := Render(inst, Options{AllowPartial: true}); err != nil || len(res.Warnings) != 1 {
		t.Errorf("ntp with AllowPartial: %v %v", res, err)
	}
}

// TestMetaDataNotIgnored: meta-data is no part of a config, and the
// drives that carry one carry it (delivery.Seed: KubeVirt's Ignition
// config drive, whose instance_id and instance_type Afterburn reads), so
// it alone is no warning.
func TestMetaDataNotIgnored(t *testing.T) {
	inst := specFrom(t, "spec:\n  cloudInit:\n    metaData: {instance_type: u1.small}\n")
	if res, err := Render(inst, Options{Strict: true}); err != nil || len(res.Warnings) != 0 {
		t.Errorf("metaData: %v %v", res, err)
	}
}

func TestCloudInitIgnored(t *testing.T) {
	inst := specFrom(t, "spec:\n  cloudInit:\n    userData: \"#cloud-config\\nruncmd: [ls]\\n\"\n    metaData: {region: x}\n")
	res, err := Render(inst, Options{})
	if err != nil || len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "spec.cloudInit: cloud-init data has no meaning to Ignition") {
		t.Errorf("cloudInit: %v %v", res, err)
	}
	if _, err := Render(inst, Options{Strict: true}); err == nil || !strings.Contains(err.Error(), "spec.cloudInit") {
		t.Errorf("cloudInit with Strict: %v", err)
	}
}

// TestGroups: groups missing from the images' /etc/group are created, as
// cloud-init creates them; system groups kept elsewhere cannot be joined by
// Ignition and are refused (dropped with AllowPartial).
func TestGroups(t *testing.T) {
	inst := specFrom(t, "spec:\n  users:\n    - {name: alice, primaryGroup: devs, groups: [wheel, docker, devs, ops]}\n")
	_, err := Render(inst, Options{})
	if err == nil || !strings.Contains(err.Error(), `spec.users[0].groups[1]: supplementary group "docker" lives outside /etc/group on fcos images`) {
		t.Errorf("docker on fcos: %v", err)
	}
	res, err := Render(inst, Options{AllowPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	c := parse(t, res.Config)
	var created []string
	for _, g := range c.Passwd.Groups {
		created = append(created, g.Name)
	}
	if strings.Join(created, ",") != "devs,ops" || strings.Join(c.Passwd.Users[0].Groups, ",") != "wheel,devs,ops" {
		t.Errorf("groups created %v, user's %v", created, c.Passwd.Users[0].Groups)
	}
	// Flatcar keeps docker in /etc/group.
	res, err = Render(inst, Options{Variant: Flatcar})
	if err != nil || !strings.Contains(string(res.Config), `"groups":["wheel","docker","devs","ops"]`) {
		t.Errorf("docker on flatcar: %v", err)
	}
}

func TestPasswords(t *testing.T) {
	const hash = "$6$saltsalt$8iYtNHxjWRl.NF6oNZ5tF.iKFlQREaXBLlSmZKP6dy9l5z3vsooWNW0/GZ6Nej73/TFug6pIPSqbJoCT6dfnj."
	inst := specFrom(t, `spec:
  users:
    - {name: locked}
    - {name: open, lockPassword: false}
    - {name: hashed, passwordHash: "`+hash+`"}
    - {name: lockedhash, passwordHash: "`+hash+`", lockPassword: true}
    - {name: sys, system: true}
`)
	res, err := Render(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"locked": "!", "open": "<none>", "hashed": hash, "lockedhash": "!" + hash, "sys": "!"}
	for _, u := range parse(t, res.Config).Passwd.Users {
		got := "<none>"
		if u.PasswordHash != nil {
			got = *u.PasswordHash
		}
		if got != want[u.Name] {
			t.Errorf("%s: passwordHash %q, want %q", u.Name, got, want[u.Name])
		}
		if sys := u.Name == "sys"; sys != (u.System != nil && *u.System) || sys != (u.NoCreateHome != nil && *u.NoCreateHome) {
			t.Errorf("%s: system %v noCreateHome %v", u.Name, u.System, u.NoCreateHome)
		}
	}
}

func TestDefaultUserKeys(t *testing.T) {
	const k1 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIBdnIeQkVVFSAROQDSX0rDjqGVQFBRRIu++HM7Atjgs ops@example.com"
	const k2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOcQfB+HkOOjJNE+kDUn8dHs94p8jX2ceyNdSdYS5bh alice@example.com"
	// core listed in users: one entry, with both sets of keys, once each.
	inst := specFrom(t, "spec:\n  sshAuthorizedKeys: [\""+k1+"\"]\n  users:\n    - {name: core, sshAuthorizedKeys: [\""+k1+"\", \""+k2+"\"]}\n")
	res, err := Render(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	users := parse(t, res.Config).Passwd.Users
	if len(users) != 1 || users[0].Name != "core" || strings.Join(users[0].SSHKeys, "|") != k1+"|"+k2 {
		t.Errorf("users %+v", users)
	}
}

func TestConflicts(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"spec:\n  files: [{path: /etc/hostname, content: x}]\n", "spec.files[0].path: /etc/hostname is already written by spec.hostname"},
		{"spec:\n  timezone: UTC\n  files: [{path: /etc/localtime, content: x}]\n", "spec.files[0].path: /etc/localtime is already written by spec.timezone"},
		{"spec:\n  users: [{name: alice, sudo: ALL}]\n  files: [{path: /etc/sudoers.d/vminit-alice, content: x}]\n", "spec.files[0].path: /etc/sudoers.d/vminit-alice is already written by spec.users[0].sudo"},
		{"spec:\n  units: [{name: a.service, content: \"[Service]\\nExecStart=/bin/true\\n\"}]\n  files: [{path: /etc/systemd/system/a.service, content: x}]\n", "spec.files[0].path: /etc/systemd/system/a.service is already written by spec.units[0].name"},
		{"spec:\n  mounts: [{device: /dev/vdb, path: /srv}]\n  units: [{name: srv.mount, content: \"[Mount]\\nWhat=/dev/vdc\\nWhere=/srv\\n\"}]\n", "spec.units[0].name: /etc/systemd/system/srv.mount is already written by spec.mounts[0]"},
		{"spec:\n  commands: [ls]\n  units: [{name: vminit-first-boot.service, content: \"[Service]\\nExecStart=/bin/true\\n\"}]\n", "spec.units[0].name: /etc/systemd/system/vminit-first-boot.service is already written by spec.commands"},
		{"spec:\n  units: [{name: a.service, dropins: [{name: x.conf, content: \"\"}]}]\n  files: [{path: /etc/systemd/system/a.service.d/x.conf, content: x}]\n", "spec.files[0].path: /etc/systemd/system/a.service.d/x.conf is already written by spec.units[0].dropins[0].name"},
	} {
		_, err := Render(specFrom(t, c.doc), Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

func TestHomeDirectoriesOwned(t *testing.T) {
	inst := specFrom(t, `spec:
  users: [{name: alice}, {name: svc, system: true}]
  files:
    - {path: /home/alice/.ssh/config, owner: alice, content: x}
    - {path: /home/alice/.config/a/b.conf, owner: "alice:alice", content: x}
    - {path: /home/alice/top, owner: alice, content: x}
    - {path: /home/bob/x/y, owner: alice, content: x}
    - {path: /srv/svc/x/y, owner: svc, content: x}
`)
	res, err := Render(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range parse(t, res.Config).Storage.Directories {
		got = append(got, fmt.Sprintf("%s %s %o", d.Path, d.User.Name, d.Mode))
	}
	want := "/home/alice/.ssh alice 700|/home/alice/.config alice 755|/home/alice/.config/a alice 755"
	if strings.Join(got, "|") != want {
		t.Errorf("directories\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}

// TestCommandScripts runs the generated scripts with /bin/sh: commands in
// order, in one shell (cd carries over), argument lists quoted; a failure
// is named, the next commands still run (as in cloud-init's runcmd), and
// the script exits non-zero.
func TestCommandScripts(t *testing.T) {
	dir := t.TempDir()
	inst := specFrom(t, `spec:
  commands:
    - [sh, -c, "echo \"one's\" >> `+dir+`/log"]
    - |
      mkdir -p `+dir+`/sub
      cd `+dir+`/sub
    - echo "two in $(basename "$PWD")" >> ../log
    - "false"
    - echo after >> ../log
    - (exit 3)
    - echo last >> ../log
  bootCommands:
    - echo "boot $INSTANCE_ID" >> `+dir+`/boot.log
`)
	res, err := Render(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(dir, "first-boot.sh")
	os.WriteFile(first, fileData(t, res.Config, FirstBootScript), 0o700)
	var stderr bytes.Buffer
	cmd := exec.Command("/bin/sh", first)
	cmd.Stderr = &stderr
	err = cmd.Run()
	if err == nil {
		t.Error("the script succeeded with failing commands")
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "log")); string(log) != "one's\ntwo in sub\nafter\nlast\n" {
		t.Errorf("log %q", log)
	}
	for _, want := range []string{"vminit: spec.commands[3] failed with exit status 1", "vminit: spec.commands[5] failed with exit status 3"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}

	boot := filepath.Join(dir, "boot.sh")
	os.WriteFile(boot, fileData(t, res.Config, BootScript), 0o700)
	cmd = exec.Command("/bin/sh", boot)
	cmd.Env = append(os.Environ(), "INSTANCE_ID="+inst.Spec.InstanceID)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "boot.log")); string(log) != "boot "+inst.Spec.InstanceID+"\n" {
		t.Errorf("boot.log %q", log)
	}
	var unit string
	for _, u := range parse(t, res.Config).Systemd.Units {
		if u.Name == BootUnit {
			unit = u.Contents
		}
	}
	if !strings.Contains(unit, `Environment="INSTANCE_ID=`+inst.Spec.InstanceID+`"`) {
		t.Errorf("the boot unit does not set INSTANCE_ID:\n%s", unit)
	}
}

// TestUnitsVerify runs systemd-analyze verify on every unit the renderer
// writes itself: the command units and the mount units.
func TestUnitsVerify(t *testing.T) {
	analyze := testtools.Require(t, "systemd-analyze")
	res, err := Render(load(t, "testdata/specs/system.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, u := range parse(t, res.Config).Systemd.Units {
		if u.Name == BootUnit || u.Name == FirstBootUnit || strings.HasSuffix(u.Name, ".mount") {
			p := filepath.Join(dir, u.Name)
			os.WriteFile(p, []byte(u.Contents), 0o644)
			paths = append(paths, p)
		}
	}
	if len(paths) != 4 {
		t.Fatalf("units %v", paths)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestCompression: text stays readable, binary goes base64, and large
// compressible content goes gzip+base64 with the same bytes every time.
func TestCompression(t *testing.T) {
	res, err := Render(load(t, "testdata/specs/files.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range parse(t, res.Config).Storage.Files {
		var want string
		switch f.Path {
		case "/usr/local/bin/app-check":
			want = "data:,"
		case "/etc/app/blob.bin":
			want = "data:;base64,"
		case "/etc/app/hosts.txt":
			want = "data:;base64,H4sI" // gzip's magic
			if f.Contents.Compression != "gzip" {
				t.Errorf("%s: compression %q", f.Path, f.Contents.Compression)
			}
		default:
			continue
		}
		if !strings.HasPrefix(f.Contents.Source, want) {
			t.Errorf("%s: %.30s…, want %s…", f.Path, f.Contents.Source, want)
		}
	}
}

// TestValidatorWarnings: what Ignition's validator warns about in the
// rendered config is a warning naming the spec field (an error with
// Strict).
func TestValidatorWarnings(t *testing.T) {
	inst := specFrom(t, "spec:\n  units:\n    - {name: x.service, enabled: true, content: \"[Service]\\nExecStart=/bin/true\\n\"}\n")
	res, err := Render(inst, Options{})
	if err != nil || len(res.Warnings) != 1 || res.Warnings[0] != `spec.units[0]: unit "x.service" is enabled, but has no install section so enable does nothing` {
		t.Errorf("%v %q", err, res.Warnings)
	}
	if _, err := Render(inst, Options{Strict: true}); err == nil || !strings.Contains(err.Error(), "spec.units[0]: unit \"x.service\" is enabled") {
		t.Errorf("Strict: %v", err)
	}
}

// TestNetworkErrors: what the network files cannot express is an error
// naming the spec field, for the variant whose format cannot.
func TestNetworkErrors(t *testing.T) {
	inst := specFrom(t, `spec:
  network:
    ethernets:
      a: {match: {macAddress: "52:54:00:00:00:0a"}}
      b: {match: {macAddress: "52:54:00:00:00:0b"}}
    bonds:
      bond0: {interfaces: [a, b], parameters: {mode: active-backup, primary: a}, dhcp4: true}
`)
	if _, err := Render(inst, Options{}); err == nil || !strings.HasPrefix(err.Error(), "spec.network.bonds.bond0.parameters.primary: ") {
		t.Errorf("fcos: %v", err)
	}
	if _, err := Render(inst, Options{Variant: Flatcar}); err != nil {
		t.Errorf("flatcar: %v", err)
	}
}

// TestEtcHostsFQDN: with an FQDN, /etc/hosts gets the line cloud-init's
// manage_etc_hosts: localhost adds, appended to the image's file, or to the
// one spec.files writes, unless that one already has it.
func TestEtcHostsFQDN(t *testing.T) {
	const line = "127.0.0.1 web.example.com web\n"
	for _, tc := range []struct{ name, files, want string }{
		{"image's file", "", line},
		{"spec.files", "  files:\n    - path: /etc/hosts\n      content: \"127.0.0.1 localhost\"\n", "127.0.0.1 localhost\n" + line},
		{"already there", "  files:\n    - path: /etc/hosts\n      content: |\n        127.0.0.1   web.example.com web\n", "127.0.0.1   web.example.com web\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst := specFrom(t, "spec:\n  hostname: web\n  fqdn: web.example.com\n"+tc.files)
			if err := inst.Resolve(""); err != nil {
				t.Fatal(err)
			}
			res, err := Render(inst, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(fileData(t, res.Config, "/etc/hosts")); got != tc.want {
				t.Errorf("/etc/hosts %q, want %q", got, tc.want)
			}
		})
	}
	res, err := Render(specFrom(t, "spec:\n  hostname: web\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range parse(t, res.Config).Storage.Files {
		if f.Path == "/etc/hosts" {
			t.Error("/etc/hosts written without an FQDN")
		}
	}
}
