package spec_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/spec"
)

const (
	keyAlice = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOcQfB+HkOOjJNE+kDUn8dHs94p8jX2ceyNdSdYS5bh alice@example.com"
	header   = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: vm-1\n"
)

// load writes doc to a temporary spec file (with a data file beside it) and
// loads it.
func load(t *testing.T, doc string) (*spec.Instance, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte("from disk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "instance.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec.Load(p)
}

func TestExamplesLoad(t *testing.T) {
	for _, p := range []string{"../examples/ubuntu-server/instance.yaml", "../examples/dev-vm.yaml"} {
		if _, err := spec.Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestLoadResolvesAndDefaults(t *testing.T) {
	in, err := load(t, header+`spec:
  fqdn: vm-1.example.com
  users:
    - name: alice
      sshAuthorizedKeys: ["`+keyAlice+`"]
    - name: bob
      passwordHash: "$6$salt$abc"
  files:
    - path: /etc/a
      source: {file: data.txt}
    - path: /etc/b
      contentBase64: aGVsbG8=
      mode: 0600
    - path: /etc/c
      content: ""
      mode: "755"
  commands:
    - echo hi
    - [touch, /tmp/x y]
`)
	if err != nil {
		t.Fatal(err)
	}
	s := in.Spec
	if s.Hostname != "vm-1" {
		t.Errorf("hostname = %q, want vm-1 (from fqdn)", s.Hostname)
	}
	if s.InstanceID != spec.DefaultInstanceID("vm-1") || len(s.InstanceID) != 36 {
		t.Errorf("instanceID = %q", s.InstanceID)
	}
	if !*s.Users[0].LockPassword || *s.Users[1].LockPassword {
		t.Errorf("lockPassword defaults: alice %v (want true), bob %v (want false: has a hash)", *s.Users[0].LockPassword, *s.Users[1].LockPassword)
	}
	for i, want := range []string{"from disk\n", "hello", ""} {
		if got := string(s.Files[i].Data()); got != want {
			t.Errorf("files[%d] data = %q, want %q", i, got, want)
		}
	}
	if *s.Files[1].Mode != 0o600 || *s.Files[2].Mode != 0o755 {
		t.Errorf("modes = %v, %v", s.Files[1].Mode, s.Files[2].Mode)
	}
	if s.Commands[0].Shell != "echo hi" || !reflect.DeepEqual(s.Commands[1].Argv, []string{"touch", "/tmp/x y"}) {
		t.Errorf("commands = %+v", s.Commands)
	}
	if got := s.Commands[1].ShellLine(); got != "touch '/tmp/x y'" {
		t.Errorf("ShellLine = %q", got)
	}
}

func TestDefaultInstanceIDIsStable(t *testing.T) {
	// Changing this value changes every VM's identity: cloud-init would
	// re-run first boot everywhere. It must never change.
	if got := spec.DefaultInstanceID("web-1"); got != "4cb437c5-d791-52e5-ba29-c66e61e5d07e" {
		t.Fatalf("DefaultInstanceID(web-1) = %s", got)
	}
}

func TestJSONSpec(t *testing.T) {
	in, err := load(t, `{"apiVersion":"vminit.dev/v1alpha1","kind":"Instance","metadata":{"name":"j"},
	 "spec":{"files":[{"path":"/etc/x","mode":"0640","content":"x"}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if in.Spec.Files[0].Mode.String() != "0640" {
		t.Errorf("mode = %v", in.Spec.Files[0].Mode)
	}
}

// TestBadSpecs is the table of invalid specs: each gives its specific
// error, naming the field, with the line where it was written.
func TestBadSpecs(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string // every entry must appear in the error text
	}{
		{"empty", ``, []string{"document is empty"}},
		{"syntax", "apiVersion: [", []string{"instance.yaml:", "YAML syntax"}},
		{"wrong apiVersion", "apiVersion: v1\nkind: Instance\nmetadata: {name: a}\n", []string{`apiVersion: is "v1"; want "vminit.dev/v1alpha1"`}},
		{"wrong kind", "apiVersion: vminit.dev/v1alpha1\nkind: Pod\nmetadata: {name: a}\n", []string{`kind: is "Pod"`}},
		{"no name", "apiVersion: vminit.dev/v1alpha1\nkind: Instance\n", []string{"metadata.name: required"}},
		{"bad name", "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: Web_1}\n", []string{`metadata.name: "Web_1" is not a valid name`}},
		{"unknown field with line", header + "spec:\n  hostnme: x\n", []string{`instance.yaml:6: spec.hostnme: unknown field (did you mean "hostname"?)`}},
		{"misspelled nested", header + "spec:\n  users:\n    - name: a\n      sshKeys: []\n", []string{`:8: spec.users[0].sshKeys: unknown field (did you mean "sshAuthorizedKeys"?)`}},
		{"field twice", header + "spec:\n  hostname: a\n  hostname: b\n", []string{"spec.hostname: field given twice"}},
		{"wrong type", header + "spec:\n  users: {name: a}\n", []string{"spec.users: want a list, got a mapping"}},
		{"bad hostname", header + "spec:\n  hostname: -bad\n", []string{`spec.hostname: "-bad" is not a valid host name`}},
		{"fqdn mismatch", header + "spec:\n  hostname: a\n  fqdn: b.example.com\n", []string{`spec.fqdn: "b.example.com" does not start with the hostname "a"`}},
		{"bad ssh key", header + "spec:\n  users:\n    - name: a\n      sshAuthorizedKeys: [\"" + keyAlice + "\", \"ssh-rsa AAAA garbage\"]\n", []string{"spec.users[0].sshAuthorizedKeys[1]: not an SSH public key"}},
		{"two keys in one entry", header + "spec:\n  sshAuthorizedKeys:\n    - |\n      " + keyAlice + "\n      " + keyAlice + "\n", []string{"spec.sshAuthorizedKeys[0]: one key per entry"}},
		{"plain password", header + "spec:\n  users:\n    - name: a\n      password: hunter2\n", []string{"spec.users[0].password: plain-text passwords are refused", "mkpasswd"}},
		{"bad hash", header + "spec:\n  users:\n    - name: a\n      passwordHash: hunter2\n", []string{"spec.users[0].passwordHash: not a crypt(3) hash"}},
		{"duplicate user", header + "spec:\n  users:\n    - name: a\n    - name: a\n", []string{`spec.users[1].name: user "a" is already defined at spec.users[0]`}},
		{"bad user name", header + "spec:\n  users:\n    - name: Alice\n", []string{`spec.users[0].name: "Alice" is not a valid user name`}},
		{"no default user without users", header + "spec:\n  cloudInit: {noDefaultUser: true}\n", []string{"spec.cloudInit.noDefaultUser: needs spec.users"}},
		{"no default user for the keys", header + "spec:\n  sshAuthorizedKeys: [\"" + keyAlice + "\"]\n  users: [{name: a}]\n  cloudInit: {noDefaultUser: true}\n", []string{"spec.sshAuthorizedKeys: go to the image's default user, which spec.cloudInit.noDefaultUser leaves out"}},
		{"no default user on Ignition", header + "spec:\n  agent: ignition\n  users: [{name: a}]\n  cloudInit: {noDefaultUser: true}\n", []string{"spec.cloudInit.noDefaultUser: is for cloud-init guests"}},
		{"relative file", header + "spec:\n  files:\n    - path: etc/x\n", []string{`spec.files[0].path: "etc/x" is not absolute`}},
		{"unclean file", header + "spec:\n  files:\n    - path: /etc//x/\n", []string{`spec.files[0].path: "/etc//x/" is not clean; write "/etc/x"`}},
		{"duplicate file", header + "spec:\n  files:\n    - path: /etc/x\n    - path: /etc/x\n", []string{`spec.files[1].path: /etc/x is already written by spec.files[0].path`}},
		{"bad mode", header + "spec:\n  files:\n    - path: /etc/x\n      mode: \"0999\"\n", []string{`spec.files[0].mode: mode "0999": want octal digits`}},
		{"two contents", header + "spec:\n  files:\n    - path: /etc/x\n      content: a\n      contentBase64: YQ==\n", []string{"spec.files[0]: set only one of content, contentBase64 and source"}},
		{"bad base64", header + "spec:\n  files:\n    - path: /etc/x\n      contentBase64: '!!'\n", []string{"spec.files[0].contentBase64: not valid base64"}},
		{"missing source", header + "spec:\n  files:\n    - path: /etc/x\n      source: {file: nope.txt}\n", []string{"spec.files[0].source.file: cannot read", "nope.txt"}},
		{"bad owner", header + "spec:\n  files:\n    - path: /etc/x\n      owner: 'a b'\n", []string{`spec.files[0].owner: "a b"`}},
		{"bad unit", header + "spec:\n  units:\n    - name: app\n      content: x\n", []string{`spec.units[0].name: "app" is not a systemd unit name`}},
		{"empty unit", header + "spec:\n  units:\n    - name: app.service\n", []string{"spec.units[0]: nothing to do"}},
		{"bad dropin", header + "spec:\n  units:\n    - name: a.service\n      dropins: [{name: x, content: y}]\n", []string{`spec.units[0].dropins[0].name: "x": a drop-in name ends in .conf`}},
		{"empty command", header + "spec:\n  commands: ['', []]\n", []string{"spec.commands[0]: empty command", "spec.commands[1]: an argument list needs a program"}},
		{"bad command type", header + "spec:\n  commands: [{a: b}]\n", []string{"spec.commands[0]: want a shell string or a list of arguments"}},
		{"bad mount", header + "spec:\n  mounts:\n    - device: ''\n      path: data\n      options: ['a,b']\n", []string{"spec.mounts[0].device: required", `spec.mounts[0].path: "data" is not absolute`, "spec.mounts[0].options[0]"}},
		{"bad timezone", header + "spec:\n  timezone: 'Europe/../etc'\n", []string{"spec.timezone:"}},
		{"bad package", header + "spec:\n  packages: ['a b']\n", []string{`spec.packages[0]: "a b" is not a package name`}},
		{"reserved metadata", header + "spec:\n  cloudInit:\n    metaData: {instance-id: x}\n", []string{"spec.cloudInit.metaData.instance-id: generated from the spec: set spec.instanceID instead"}},
		{"numeric owner", header + "spec:\n  files:\n    - path: /etc/x\n      owner: '1000:1000'\n", []string{"spec.files[0].owner", "numeric IDs cannot work"}},
		{"configdrive metadata key", header + "spec:\n  cloudInit:\n    metaData: {public_keys: {}}\n", []string{"spec.cloudInit.metaData.public_keys: generated from the spec: set spec.sshAuthorizedKeys instead"}},
		{"userDataOnly with generated fields", header + "spec:\n  fqdn: a.example.com\n  timezone: UTC\n  commands: [x]\n  cloudInit:\n    userDataOnly: true\n    userData: \"#!/bin/sh\\n\"\n", []string{
			"spec.fqdn: goes into the generated #cloud-config, which spec.cloudInit.userDataOnly leaves out", "spec.timezone: goes into", "spec.commands: goes into"}},
		{"userDataOnly for Ignition", header + "spec:\n  agent: ignition\n  cloudInit:\n    userDataOnly: true\n", []string{"spec.cloudInit.userDataOnly: is for cloud-init guests"}},
		{"bad cloud-config", header + "spec:\n  cloudInit:\n    userData: \"#cloud-config\\n- a\\n\"\n", []string{"spec.cloudInit.userData: #cloud-config must be a mapping"}},
		{"bad mac", header + "spec:\n  network:\n    ethernets:\n      e0:\n        match: {macAddress: 'zz'}\n", []string{`spec.network.ethernets.e0.match.macAddress: "zz" is not a MAC address`}},
		{"dotted or dashed mac", header + "spec:\n  network:\n    ethernets:\n      e0:\n        match: {macAddress: '5254.0012.3456'}\n      e1:\n        match: {macAddress: '52-54-00-12-34-57'}\n        macAddress: '0200.0000.0001'\n", []string{
			`spec.network.ethernets.e0.match.macAddress: "5254.0012.3456" is not a MAC address in the colon form`,
			`spec.network.ethernets.e1.match.macAddress: "52-54-00-12-34-57" is not a MAC address`,
			`spec.network.ethernets.e1.macAddress: "0200.0000.0001" is not a MAC address`}},
		{"bad cidr", header + "spec:\n  network:\n    ethernets:\n      eth0:\n        addresses: [10.0.0.1]\n", []string{`spec.network.ethernets.eth0.addresses[0]: "10.0.0.1" is not an address in CIDR form`}},
		{"gateway family", header + "spec:\n  network:\n    ethernets:\n      eth0:\n        gateway4: '2001:db8::1'\n", []string{`spec.network.ethernets.eth0.gateway4: "2001:db8::1" is not an IPv4 address`}},
		{"route family", header + "spec:\n  network:\n    ethernets:\n      eth0:\n        routes: [{to: 10.0.0.0/8, via: '2001:db8::1'}]\n", []string{"spec.network.ethernets.eth0.routes[0].via: 2001:db8::1 and 10.0.0.0/8 are of different address families"}},
		{"bad mtu", header + "spec:\n  network:\n    ethernets:\n      eth0:\n        mtu: 10\n", []string{"spec.network.ethernets.eth0.mtu: 10 is out of range"}},
		{"unknown bond member", header + "spec:\n  network:\n    bonds:\n      bond0:\n        interfaces: [eth9]\n", []string{`spec.network.bonds.bond0.interfaces[0]: "eth9" is not defined under spec.network.ethernets`}},
		{"bad vlan", header + "spec:\n  network:\n    vlans:\n      v1:\n        id: 5000\n        link: nope\n", []string{"spec.network.vlans.v1.id: 5000 is not a VLAN ID", `spec.network.vlans.v1.link: "nope" is not an ethernet, bond or bridge`}},
		{"bad bridges", header + "spec:\n  network:\n    ethernets:\n      a: {}\n      b: {dhcp4: true}\n      c: {}\n    bonds:\n      bond0: {interfaces: [c]}\n    bridges:\n      br0: {interfaces: [a, b, nope, c], parameters: {forwardDelay: 0, priority: 70000}}\n      br1: {interfaces: [a]}\n    vlans:\n      a.5: {id: 5, link: a}\n", []string{
			`spec.network.bridges.br0.interfaces[1]: "b" has its own addresses or DHCP; configure them on the bridge`,
			`spec.network.bridges.br0.interfaces[2]: "nope" is not an ethernet, bond or VLAN defined in spec.network`,
			`spec.network.bridges.br0.interfaces[3]: "c" is a member of bond "bond0"; add the bond to the bridge instead`,
			"spec.network.bridges.br0.parameters.forwardDelay: 0 is not a forward delay in seconds (2–30)",
			"spec.network.bridges.br0.parameters.priority: 70000 is not a bridge priority (0–65535)",
			`spec.network.bridges.br1.interfaces[0]: "a" is already a port of bridge "br0"`,
			`spec.network.vlans.a.5.link: "a" is a port of bridge "br0"; put the VLAN on the bridge instead`}},
		{"setName without match", header + "spec:\n  network:\n    ethernets:\n      eth0:\n        setName: lan\n", []string{"spec.network.ethernets.eth0.setName: needs match"}},
		{"long id without match", header + "spec:\n  network:\n    ethernets:\n      averyveryverylongname:\n        dhcp4: true\n", []string{"spec.network.ethernets.averyveryverylongname: without match, the ID is the interface name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := load(t, tc.doc)
			if err == nil {
				t.Fatalf("loaded without error: %+v", in)
			}
			if in != nil {
				t.Errorf("Load returned an instance together with an error")
			}
			if !errors.Is(err, spec.ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			for _, fe := range spec.AsErrors(err) {
				if !strings.HasSuffix(fe.File, "instance.yaml") {
					t.Errorf("error %q does not name the file", fe)
				}
			}
		})
	}
}

// TestEveryProblemListed checks that decode errors, unreadable sources and
// invalid values come back together, each with its line, in line order.
func TestEveryProblemListed(t *testing.T) {
	_, err := load(t, header+`spec:
  hostname: Bad_Host
  users:
    - name: a
      sshKeys: [x]
      password: p
  files:
    - path: rel
      mode: "9"
    - path: /x
      source: {file: missing}
  network:
    ethernets:
      eth0:
        mtu: abc
`)
	es := spec.AsErrors(err)
	wantFields := []string{"spec.hostname", "spec.users[0].sshKeys", "spec.users[0].password", "spec.files[0].path",
		"spec.files[0].mode", "spec.files[1].source.file", "spec.network.ethernets.eth0.mtu"}
	wantLines := []int{6, 9, 10, 12, 13, 15, 19}
	if len(es) != len(wantFields) {
		t.Fatalf("got %d errors, want %d:\n%v", len(es), len(wantFields), err)
	}
	for i, e := range es {
		if e.Field != wantFields[i] || e.Line != wantLines[i] {
			t.Errorf("error %d = %s (line %d), want %s (line %d)", i, e.Field, e.Line, wantFields[i], wantLines[i])
		}
	}
}

func TestCloudConfigDetection(t *testing.T) {
	// cloud-init picks the part type by the longest prefix, after leading
	// whitespace, ignoring case: an archive is not a #cloud-config mapping.
	if _, err := load(t, header+"spec:\n  cloudInit:\n    userData: \"#cloud-config-archive\\n- {content: x}\\n\"\n"); err != nil {
		t.Errorf("#cloud-config-archive refused: %v", err)
	}
	if _, err := load(t, header+"spec:\n  cloudInit:\n    userData: \"\\n  #Cloud-Config\\n- a\\n\"\n"); err == nil {
		t.Error("an indented, capitalised #cloud-config list was accepted")
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]spec.Mode{"0644": 0o644, "644": 0o644, "0o755": 0o755, "4755": 0o4755, "0": 0} {
		if got, err := spec.ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "0999", "17777", "0x1ff", "-1"} {
		if _, err := spec.ParseMode(in); err == nil {
			t.Errorf("ParseMode(%q) succeeded", in)
		}
	}
}

// TestRoundTrip checks that a loaded spec marshals back to a document that
// loads to the same instance.
func TestRoundTrip(t *testing.T) {
	in, err := spec.Load("../examples/ubuntu-server/instance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	in2, _, err := spec.Decode(out)
	if err != nil {
		t.Fatalf("re-decoding:\n%s\n%v", out, err)
	}
	in2.Resolve("../examples/ubuntu-server")
	in2.Default()
	if !reflect.DeepEqual(in, in2) {
		t.Errorf("round trip differs:\n%s", out)
	}
}

// Parse reports the problems of every stage together, each with its line,
// and refuses source.file when there is no directory to read from.
func TestParseAllStages(t *testing.T) {
	doc := `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: web}
spec:
  hostnmae: web
  files:
    - path: /etc/motd
      source: {file: /etc/shadow}
    - path: relative
      contentBase64: "!!"
`
	_, err := spec.Parse([]byte(doc), "")
	es := spec.AsErrors(err)
	want := map[string]int{
		"spec.hostnmae":               5,
		"spec.files[0].source.file":   8,
		"spec.files[1].path":          9,
		"spec.files[1].contentBase64": 10,
	}
	got := map[string]int{}
	for _, e := range es {
		got[e.Field] = e.Line
	}
	for f, line := range want {
		if l, ok := got[f]; !ok || l != line {
			t.Errorf("%s: line %d (reported: %v), want line %d", f, l, ok, line)
		}
	}
	if t.Failed() {
		t.Logf("errors:\n%v", err)
	}
}
