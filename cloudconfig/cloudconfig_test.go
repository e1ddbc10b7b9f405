package cloudconfig

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOcQfB+HkOOjJNE+kDUn8dHs94p8jX2ceyNdSdYS5bh alice@example.com"

func gzb64(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// representative is a cloud-config with every key the converter carries
// over, in the forms cloud-init accepts.
var representative = `#cloud-config
hostname: node-1
fqdn: node-1.example.com
timezone: UTC
ssh_authorized_keys: ["` + key + `"]
ssh_pwauth: false
users:
  - default
  - name: alice
    gecos: Alice
    groups: wheel, adm
    shell: /bin/bash
    sudo: ALL=(ALL) NOPASSWD:ALL
    lock_passwd: false
    hashed_passwd: "$6$salt$abcdefghijklmnopqrstuv"
    ssh_authorized_keys: ["` + key + `"]
write_files:
  - path: /etc/plain
    content: hello
  - path: /etc/b64
    encoding: b64
    content: ` + base64.StdEncoding.EncodeToString([]byte("from base64\n")) + `
  - path: /etc/gz
    encoding: gz+b64
    content: ` + gzb64("from gzip\n") + `
    permissions: '0600'
  - path: /etc/decimal-mode
    content: x
    permissions: 420
  - path: /etc/append-me
    content: more
    append: true
  - path: /home/alice/owned
    content: mine
    owner: alice:alice
    defer: true
runcmd:
  - [touch, /var/tmp/ran]
  - echo done > /var/tmp/done
bootcmd:
  - echo boot
mounts:
  - [LABEL=data, /srv/data, xfs]
  - [/dev/vdc, none]
`

func TestRepresentative(t *testing.T) {
	inst, warnings, err := ToSpec([]byte(representative), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := inst.Spec
	if s.Hostname != "node-1" || s.FQDN != "node-1.example.com" || inst.Metadata.Name != "node-1" || len(s.SSHAuthorizedKeys) != 1 {
		t.Errorf("identity: %+v", s)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "users[0]") {
		t.Errorf("warnings = %q, want one for the default user", warnings)
	}
	u := s.Users[0]
	if u.Name != "alice" || strings.Join(u.Groups, ",") != "wheel,adm" || *u.LockPassword || u.PasswordHash == "" || u.Sudo == "" {
		t.Errorf("user = %+v", u)
	}
	want := map[string]struct {
		data string
		mode string
	}{
		// Without permissions a file has spec.Default's mode, 0644, as
		// cloud-init's write_files gives it.
		"/etc/plain": {"hello", "0644"}, "/etc/b64": {"from base64\n", "0644"}, "/etc/gz": {"from gzip\n", "0600"},
		"/etc/decimal-mode": {"x", "0644"}, "/etc/append-me": {"more", "0644"}, "/home/alice/owned": {"mine", "0644"},
	}
	for _, f := range s.Files {
		w, ok := want[f.Path]
		if !ok {
			continue
		}
		mode := "<nil>"
		if f.Mode != nil {
			mode = f.Mode.String()
		}
		if string(f.Data()) != w.data || mode != w.mode {
			t.Errorf("%s: %q mode %s, want %q mode %s", f.Path, f.Data(), mode, w.data, w.mode)
		}
	}
	if len(s.Commands) != 2 || s.Commands[0].Argv == nil || len(s.BootCommands) != 1 || len(s.Mounts) != 1 || s.Mounts[0].Type != "xfs" {
		t.Errorf("commands %+v boot %+v mounts %+v", s.Commands, s.BootCommands, s.Mounts)
	}

	// The real Ignition validates and applies the converted config.
	res, err := ignition.Render(inst, ignition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	validate := testtools.Require(t, "ignition-validate")
	p := filepath.Join(t.TempDir(), "c.ign")
	os.WriteFile(p, res.Config, 0o644)
	if out, err := exec.Command(validate, p).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("ignition-validate: %v %s", err, out)
	}
	root := ignitiontest.Apply(t, res.Config)
	for path, want := range map[string]string{
		"etc/b64": "from base64\n", "etc/gz": "from gzip\n", "home/alice/owned": "mine", "etc/hostname": "node-1\n",
		"etc/ssh/sshd_config.d/40-vminit-ssh-pwauth.conf": "# From cloud-config ssh_pwauth.\nPasswordAuthentication no\n",
	} {
		if got, err := os.ReadFile(filepath.Join(root, path)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	if st, err := os.Stat(filepath.Join(root, "etc/gz")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("etc/gz mode: %v %v", st, err)
	}
	if sh, _ := os.ReadFile(filepath.Join(root, "etc/shadow")); !strings.Contains(string(sh), "alice:$6$salt$") {
		t.Errorf("alice's hash not in shadow:\n%s", sh)
	}
}

// TestUnsupportedKeysNamed checks that nothing is dropped silently: every
// key that cannot be carried over is an error naming it, or a warning with
// AllowPartial.
func TestUnsupportedKeysNamed(t *testing.T) {
	doc := `#cloud-config
apt: {preserve_sources_list: true}
snap: {commands: [x]}
users:
  - name: bob
    expiredate: "2030-01-01"
    plain_text_passwd: hunter2
write_files:
  - path: /etc/x
    source: {uri: "http://example.com/x"}
  - path: /etc/y
    encoding: zip
`
	_, _, err := ToSpec([]byte(doc), Options{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"apt:", "snap:", "users[0].expiredate", "users[0].plain_text_passwd: plain-text passwords are refused", "write_files[0].source", "write_files[1].encoding: unknown encoding"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not name %q:\n%v", w, err)
		}
	}
	_, warnings, err := ToSpec([]byte(strings.Replace(doc, "    plain_text_passwd: hunter2\n", "", 1)), Options{AllowPartial: true})
	if err == nil || !strings.Contains(err.Error(), "write_files[1].encoding") {
		t.Errorf("a bad encoding is an error even with AllowPartial: %v", err)
	}
	if len(warnings) < 4 {
		t.Errorf("warnings = %q", warnings)
	}
}

func TestNotCloudConfig(t *testing.T) {
	for _, doc := range []string{"#cloud-config-archive\n- x\n", "Content-Type: multipart/mixed\n", "#cloud-config\n: [\n", "#include\nhttp://x\n"} {
		if _, _, err := ToSpec([]byte(doc), Options{}); err == nil {
			t.Errorf("%q converted for Ignition", doc)
		}
	}
	// For a spec, user data of another kind is kept as it is.
	inst, warnings, err := ToSpec([]byte("#include\nhttp://x\n"), Options{For: ForSpec})
	if err != nil || inst.Spec.CloudInit.UserData != "#include\nhttp://x\n" || len(warnings) != 1 {
		t.Errorf("ForSpec: %v %q %v", err, inst.Spec.CloudInit.UserData, warnings)
	}
}

// TestScript: a #! script becomes a file and the first-boot command that
// runs it, for both targets.
func TestScript(t *testing.T) {
	script := "#!/bin/bash\nset -e\necho hi > /tmp/x\n"
	for _, target := range []Target{ForIgnition, ForSpec} {
		inst, _, err := ToSpec([]byte(script), Options{For: target})
		if err != nil {
			t.Fatal(err)
		}
		f := inst.Spec.Files
		if len(f) != 1 || f[0].Path != ScriptPath || *f[0].Content != script || *f[0].Mode != 0o700 {
			t.Errorf("files = %+v", f)
		}
		if c := inst.Spec.Commands; len(c) != 1 || len(c[0].Argv) != 1 || c[0].Argv[0] != ScriptPath {
			t.Errorf("commands = %+v", c)
		}
	}
}

// TestForSpecKeepsEverything: keys the spec cannot say whole stay
// cloud-config in spec.cloudInit.userData, and the seed's user-data, read
// by cloud-init, has every key of the original with its value.
func TestForSpecKeepsEverything(t *testing.T) {
	doc := `#cloud-config
apt: {preserve_sources_list: true}
packages: [git]
users:
  - name: bob
    expiredate: "2030-01-01"
write_files:
  - path: /etc/motd
    content: hi
runcmd: [echo hi]
`
	inst, _, err := ToSpec([]byte(doc), Options{For: ForSpec})
	if err != nil {
		t.Fatal(err)
	}
	if len(inst.Spec.Packages) != 1 || len(inst.Spec.Files) != 1 || len(inst.Spec.Users) != 0 {
		t.Errorf("converted: %+v", inst.Spec)
	}
	for _, k := range []string{"apt:", "users:", "expiredate"} {
		if !strings.Contains(inst.Spec.CloudInit.UserData, k) {
			t.Errorf("kept user-data lacks %q:\n%s", k, inst.Spec.CloudInit.UserData)
		}
	}
	ud, err := cloudinit.UserData(inst)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	cloudinittest.Run(t, "import json, sys\nfrom cloudinit import util\nprint(json.dumps(util.load_yaml(json.load(sys.stdin))))", string(ud), &got)
	if fmt.Sprint(got["apt"]) != "map[preserve_sources_list:true]" || fmt.Sprint(got["packages"]) != "[git]" || fmt.Sprint(got["runcmd"]) != "[echo hi]" {
		t.Errorf("cloud-init reads %v", got)
	}
	if u, _ := got["users"].([]any); len(u) != 1 {
		t.Errorf("users %v", got["users"])
	}
}

// TestDecodedSizeLimit: gz+b64 content that decompresses past MaxSize is
// an error naming the key, not a truncated file.
func TestDecodedSizeLimit(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(make([]byte, MaxSize+1))
	zw.Close()
	doc := "#cloud-config\nwrite_files:\n  - path: /big\n    encoding: gz+b64\n    content: " + base64.StdEncoding.EncodeToString(buf.Bytes()) + "\n"
	_, _, err := ToSpec([]byte(doc), Options{})
	if err == nil || !strings.Contains(err.Error(), "write_files[0].content") {
		t.Errorf("err = %v", err)
	}
}

// FuzzCloudConfig feeds arbitrary documents to the converter: it must not
// panic, and whatever it accepts must render to a valid Ignition config.
func FuzzCloudConfig(f *testing.F) {
	f.Add([]byte(representative))
	f.Add([]byte("#cloud-config\nusers: [a, {name: b, groups: [c]}]\n"))
	f.Add([]byte("#cloud-config\nwrite_files: [{path: /a, permissions: 0755, encoding: b64, content: YQ==}]\n"))
	f.Add([]byte("#cloud-config\nmounts: [[a, /b], [c]]\nruncmd: [[a, b], c, {d: e}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		inst, _, err := ToSpec(data, Options{AllowPartial: true})
		if err != nil {
			return
		}
		if _, err := ignition.Render(inst, ignition.Options{AllowPartial: true}); err != nil {
			t.Fatalf("an accepted cloud-config does not render: %v\n%s", err, data)
		}
	})
}
