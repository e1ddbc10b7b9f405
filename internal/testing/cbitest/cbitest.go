// Package cbitest runs cloudbase-init 1.1.9, the first-boot agent of
// Windows cloud images, on Linux as the oracle of vminit's Windows output:
// its own ConfigDrive (ISO and VFAT), NoCloud, OpenStack HTTP and EC2
// metadata services read a seed image or a metadata server, and its own
// user-data plugin dispatches the user data to its executors. Only what
// touches Windows is stubbed (oracle.py says what and how).
//
// No package registry here serves cloudbase-init, so its upstream source
// is kept beside the checkout in shared/oracles/cloudbase-init-1.1.9 (with
// the Debian packages it needs: python3-oslo.config, python3-oslo.log,
// python3-netaddr, python3-requests, python3-yaml, python3-jinja2,
// python3-tzlocal (its time zone mapping); mtools
// and bsdtar for the drives). Without it a test skips, or fails under
// VMINIT_REQUIRE_TOOLS=1 (testtools.Missing).
package cbitest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/cloudbaseinit"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

//go:embed oracle.py
var oracle []byte

// OracleDir is the oracle's directory below the directory that holds the
// checkout (shared/ beside it, as in CI); VMINIT_CLOUDBASE_INIT overrides
// the whole path.
const OracleDir = "shared/oracles/cloudbase-init-1.1.9"

// Modes: the metadata service cloudbase-init reads with.
const (
	ConfigDriveISO  = "configdrive-iso"
	ConfigDriveVFAT = "configdrive-vfat"
	NoCloudISO      = "nocloud-iso"
	NoCloudVFAT     = "nocloud-vfat"
	OpenStack       = "openstack"
	EC2             = "ec2"
)

// Execution is one script cloudbase-init handed to an executor.
type Execution struct {
	// Executor is the execcmd class: Shell (cmd.exe), PowershellSysnative,
	// Powershell, Bash, Python.
	Executor string
	Script   string
}

// Link, Network and Service are cloudbase-init's network model
// (models/network.py) as get_network_details_v2 returns it.
type Link struct {
	ID, Name, Type string
	MACAddress     string `json:"mac_address"`
	MTU            *int
	Bond           *struct {
		Members     []string
		Type        string
		LBAlgorithm *string `json:"lb_algorithm"`
	}
	VLANID   *int    `json:"vlan_id"`
	VLANLink *string `json:"vlan_link"`
}

type Network struct {
	Link           string
	AddressCIDR    string   `json:"address_cidr"`
	DNSNameservers []string `json:"dns_nameservers"`
	Routes         []struct {
		NetworkCIDR string `json:"network_cidr"`
		Gateway     string
	}
}

type Service struct {
	Addresses []string
	Search    []string
}

// Result is what cloudbase-init's service returned and its user-data
// plugin did.
type Result struct {
	Loaded        bool
	InstanceID    string   `json:"instance_id"`
	HostName      string   `json:"host_name"`
	PublicKeys    []string `json:"public_keys"`
	AdminUsername *string  `json:"admin_username"`
	AdminPassword *string  `json:"admin_password"`
	// UserData is get_decoded_user_data's bytes.
	UserData []byte `json:"user_data"`
	Network  *struct {
		Links    []Link
		Networks []Network
		Services []Service
	}
	CanPostPassword bool `json:"can_post_password"`
	IsPasswordSet   bool `json:"is_password_set"`
	// PasswordPosted is what SetUserPasswordPlugin posted to the
	// OpenStack password endpoint (base64 of the password encrypted with
	// the first SSH key, RSA PKCS#1 v1.5), as the server gives it back.
	PasswordPosted string `json:"password_posted"`
	// PostPasswordAgain is the HTTP status of a second POST.
	PostPasswordAgain int `json:"post_password_again"`
	// PluginErrors are the plugins that failed (cloudbase-init logs the
	// error and runs the next), by class name.
	PluginErrors map[string]string `json:"plugin_errors"`
	// AuthorizedKeys are the authorized_keys files cloudbase-init wrote,
	// by user.
	AuthorizedKeys map[string]string `json:"authorized_keys"`
	// Executed are the scripts run, in order; Calls the OS utilities'
	// account, group, time zone and NTP calls, each [name, args…]
	// (set_timezone's Windows zone as [Timezone.set, zone]).
	Executed []Execution
	Calls    [][]any
	// ErrorsLogged are the errors cloudbase-init logged, each with its
	// exception: a cloud-config module that failed (it logs, and runs
	// the next).
	ErrorsLogged []string `json:"errors_logged"`
	// Files are what write_files wrote, by the guest's path.
	Files map[string][]byte
}

// Require returns the oracle's directory, or stops the test.
func Require(t testing.TB) string {
	t.Helper()
	testtools.RequireFile(t, "/usr/bin/python3")
	dir := os.Getenv("VMINIT_CLOUDBASE_INIT")
	if dir == "" {
		dir = find()
	}
	if dir == "" {
		testtools.Missing(t, "cloudbase-init's source ("+OracleDir+" beside the checkout, or VMINIT_CLOUDBASE_INIT) not found")
	}
	out, err := exec.Command("/usr/bin/python3", "-c", "import oslo_config, oslo_log, netaddr, requests, yaml, jinja2, tzlocal.windows_tz").CombinedOutput()
	if err != nil {
		testtools.Missing(t, "cloudbase-init's Python dependencies (python3-oslo.config, python3-oslo.log, python3-netaddr, python3-requests, python3-yaml, python3-jinja2, python3-tzlocal): "+string(out))
	}
	testtools.Require(t, "bsdtar")
	testtools.Require(t, "mcopy")
	return dir
}

// find looks for OracleDir beside each parent of the working directory.
func find() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(filepath.Dir(d), OracleDir)
		if st, err := os.Stat(filepath.Join(p, "cloudbaseinit")); err == nil && st.IsDir() {
			return p
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// Job is one read: the metadata service of Mode on Arg (an image for the
// drive modes, a base URL for OpenStack and EC2).
type Job struct{ Mode, Arg string }

// Read runs cloudbase-init's metadata service of mode on arg, then its
// user-data plugin, and returns what they gave.
func Read(t testing.TB, mode, arg string) *Result {
	t.Helper()
	return ReadAll(t, Job{mode, arg})[0]
}

// ReadAll is Read for each job, in one run of Python (half a second
// saved a job).
func ReadAll(t testing.TB, jobs ...Job) []*Result {
	t.Helper()
	dir := Require(t)
	tmp := t.TempDir()
	script := filepath.Join(tmp, "oracle.py")
	if err := os.WriteFile(script, oracle, 0o600); err != nil {
		t.Fatal(err)
	}
	list := make([][2]string, len(jobs))
	for i, j := range jobs {
		list[i] = [2]string{j.Mode, j.Arg}
	}
	jobsFile := filepath.Join(tmp, "jobs.json")
	if b, err := json.Marshal(list); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(jobsFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", script, dir, jobsFile)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("cloudbase-init (%v): %v\n%s", jobs, err, stderr)
	}
	var rs []*Result
	if err := json.Unmarshal(out, &rs); err != nil || len(rs) != len(jobs) {
		t.Fatalf("cloudbase-init's output (%d results for %d jobs): %v\n%s", len(rs), len(jobs), err, out)
	}
	for i, r := range rs {
		if !r.Loaded {
			t.Fatalf("cloudbase-init's %s service found nothing at %s", jobs[i].Mode, jobs[i].Arg)
		}
	}
	return rs
}

// SeedImage writes s as an image of format f in a temporary directory,
// as `vminit build` writes it, and returns its path.
func SeedImage(t testing.TB, s *seed.Seed, f media.Format) string {
	t.Helper()
	var b bytes.Buffer
	if err := media.Write(&b, s, f, media.Options{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "seed."+string(f))
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ReadInstance renders inst as `vminit build` does, writes its seed as
// an image of format f and reads it with cloudbase-init's service of
// mode.
func ReadInstance(t testing.TB, inst *spec.Instance, f media.Format, mode string) *Result {
	t.Helper()
	res := render.Instance(inst, render.Target{})
	if !res.OK() {
		t.Fatal(res.Errors)
	}
	return Read(t, mode, SeedImage(t, res.Seed, f))
}

// TestKey is WinSpec's SSH key.
const TestKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKTghUogTUKzPuyIe/d62yvx2/oDHdnzPu/VN5IdP12e ops@example.com"

// WinSpec is a Windows instance using every field cloudbase-init takes,
// with extra appended to its spec (indented by two spaces); CheckWin
// holds what cloudbase-init got from it to what it says.
func WinSpec(extra string) string {
	return winSpec + extra
}

const winSpec = `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: win-1}
spec:
  agent: cloudbase-init
  sshAuthorizedKeys: ["` + TestKey + `"]
  timezone: Europe/Berlin
  ntp: {servers: [192.0.2.123], pools: [pool.ntp.org]}
  users:
    - {name: ops, gecos: Operator, groups: [administrators], password: "S3cret-Pass!"}
    - {name: app, primaryGroup: appusers, sshAuthorizedKeys: ["` + TestKey + `"]}
  files:
    - {path: /ProgramData/app/config.json, content: '{"a": 1}'}
    - {path: /ProgramData/app/blob.bin, contentBase64: AAEC/w==}
  commands:
    - "echo hello > C:\\first-boot.txt"
    - [net, start, sshd]
  network:
    ethernets:
      nic0:
        match: {macAddress: "52:54:00:12:34:01"}
        setName: nic0
        addresses: [192.0.2.10/24]
        gateway4: 192.0.2.1
        nameservers: {addresses: [192.0.2.53]}
  storage: {growRoot: true}
  cloudInit:
    userData: |
      #ps1_sysnative
      Write-Output "hello from PowerShell"
`

// AdminKeysStaging is where cloudbase-init's write_files stages the keys
// of a spec's administrators, AdminKeysFile their bytes, and
// AdminKeysCommands the lines its runcmd hands cmd.exe after the spec's
// commands: appended to Windows OpenSSH's administrators_authorized_keys,
// which is then owned by Administrators and open to Administrators and
// SYSTEM only (named by SID), only where sshd has made its directory.
const (
	AdminKeysStaging  = "/ProgramData/vminit/administrators_authorized_keys"
	AdminKeysCommands = `if exist "%PROGRAMDATA%\ssh\" type "\ProgramData\vminit\administrators_authorized_keys" >> "%PROGRAMDATA%\ssh\administrators_authorized_keys"
if exist "%PROGRAMDATA%\ssh\" icacls "%PROGRAMDATA%\ssh\administrators_authorized_keys" /setowner *S-1-5-32-544
if exist "%PROGRAMDATA%\ssh\" icacls "%PROGRAMDATA%\ssh\administrators_authorized_keys" /inheritance:r /grant *S-1-5-32-544:F /grant *S-1-5-18:F
`
)

// AdminKeysFile is the staging file of keys: a blank line (ending the
// file's last line if it had no newline), a comment, a key a line.
func AdminKeysFile(keys ...string) string {
	return "\n# vminit: spec.sshAuthorizedKeys and the keys of spec.users in group administrators\n" + strings.Join(keys, "\n") + "\n"
}

// Want says what a metadata service carries beside identity, keys and
// user data.
type Want struct {
	// Admin: the admin user and password (OpenStack's meta_data.json;
	// NoCloud's meta-data and EC2 have none).
	Admin bool
	// Network: the network details (ConfigDrive, NoCloud, OpenStack; EC2
	// has none).
	Network bool
}

// CheckWin compares what cloudbase-init got with what inst (WinSpec)
// says, where want says what the metadata service carries.
func CheckWin(t testing.TB, inst *spec.Instance, got *Result, userData []byte, want Want) {
	admin := want.Admin
	t.Helper()
	s := &inst.Spec
	if got.InstanceID != s.InstanceID || got.HostName != "win-1" {
		t.Errorf("instance id %q, host name %q; want %q, win-1", got.InstanceID, got.HostName, s.InstanceID)
	}
	keys := slices.Sorted(slices.Values(s.SSHAuthorizedKeys))
	if !slices.Equal(got.PublicKeys, keys) {
		t.Errorf("public keys %q; want %q", got.PublicKeys, keys)
	}
	// The spec's keys go to the admin user: the metadata's, else
	// cloudbase-init's own (its configuration's username, Admin).
	adminUser := "Admin"
	if admin {
		adminUser = "ops"
	}
	if ak := got.AuthorizedKeys[adminUser]; ak != strings.Join(keys, "\n")+"\n" {
		t.Errorf("%s's authorized_keys %q; want the spec's keys (all written: %q)", adminUser, ak, got.AuthorizedKeys)
	}
	switch {
	case admin && (got.AdminUsername == nil || *got.AdminUsername != "ops" || got.AdminPassword == nil || *got.AdminPassword != "S3cret-Pass!"):
		t.Errorf("admin %v %v; want ops and its password", deref(got.AdminUsername), deref(got.AdminPassword))
	case !admin && (got.AdminUsername != nil || got.AdminPassword != nil):
		t.Errorf("admin %v %v; want none", deref(got.AdminUsername), deref(got.AdminPassword))
	}
	if !bytes.Equal(got.UserData, userData) {
		t.Errorf("user data:\n%s\nwant:\n%s", got.UserData, userData)
	}
	if n := got.Network; !want.Network {
		if n != nil {
			t.Errorf("network %+v; want none", n)
		}
	} else if !strings.Contains(fmt.Sprint(got.Calls), "[set_static_network_config nic0 192.0.2.10 24 192.0.2.1 [192.0.2.53]]") {
		t.Errorf("NetworkConfigPlugin set no static address on nic0: %v", got.Calls)
	} else if n == nil || len(n.Links) != 1 || len(n.Networks) != 1 {
		t.Errorf("network %+v", n)
	} else {
		l, nw := n.Links[0], n.Networks[0]
		if l.MACAddress != "52:54:00:12:34:01" || nw.AddressCIDR != "192.0.2.10/24" || nw.Link != l.Name ||
			len(nw.Routes) != 1 || nw.Routes[0].NetworkCIDR != "0.0.0.0/0" || nw.Routes[0].Gateway != "192.0.2.1" {
			t.Errorf("network %+v %+v", l, nw)
		}
		dns := slices.Concat(nw.DNSNameservers)
		for _, sv := range n.Services {
			dns = append(dns, sv.Addresses...)
		}
		if !slices.Contains(dns, "192.0.2.53") {
			t.Errorf("name servers %q", dns)
		}
	}
	wantRun := []Execution{
		{Executor: cloudbaseinit.ExecCmd, Script: "rem cmd\necho hello > C:\\first-boot.txt\nnet start sshd\n" + AdminKeysCommands},
		{Executor: cloudbaseinit.ExecPowerShell, Script: s.CloudInit.UserData},
	}
	if !slices.Equal(got.Executed, wantRun) {
		t.Errorf("executed %q\nwant %q", got.Executed, wantRun)
	}
	if len(got.ErrorsLogged) > 0 {
		t.Errorf("cloudbase-init logged errors: %q", got.ErrorsLogged)
	}
	calls := fmt.Sprint(got.Calls)
	// ops gets its password: created with it by the users module, or,
	// made by CreateUser as the metadata's admin, set to admin_pass.
	if !strings.Contains(calls, "[create_user ops S3cret-Pass!]") && !strings.Contains(calls, "[set_user_password ops S3cret-Pass!]") {
		t.Errorf("ops never got its password: %s", calls)
	}
	for _, c := range []string{
		"[set_host_name win-1]", "[set_timezone Europe/Berlin] [Timezone.set W. Europe Standard Time]", "[set_ntp_client_config [192.0.2.123 pool.ntp.org]]", "[create_group administrators]", "[create_group appusers]",
		"[add_user_to_local_group ops administrators]",
		"[add_user_to_local_group app appusers]", "[create_user app random-password]",
	} {
		if !strings.Contains(calls, c) {
			t.Errorf("no call %s in %s", c, calls)
		}
	}
	if f := got.Files["/ProgramData/app/config.json"]; string(f) != `{"a": 1}` {
		t.Errorf("config.json %q (files %q)", f, got.Files)
	}
	if f := got.Files["/ProgramData/app/blob.bin"]; !bytes.Equal(f, []byte{0, 1, 2, 0xff}) {
		t.Errorf("blob.bin %q", f)
	}
	// The spec's keys go to an administrator (ops, or cloudbase-init's
	// Admin): Windows OpenSSH reads them from administrators_authorized_keys.
	if f, want := got.Files[AdminKeysStaging], AdminKeysFile(keys...); string(f) != want {
		t.Errorf("administrators' keys staged %q; want %q", f, want)
	}
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}
