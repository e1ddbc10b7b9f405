package cloudbaseinit_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/cloudbaseinit"
	"github.com/vminit/vminit/internal/testing/cbitest"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// The tests here hold vminit's Windows output to cloudbase-init 1.1.9's
// own code (cbitest): its ConfigDrive and NoCloud services read the seed
// images vminit builds, and its user-data plugin runs what they carry.

const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKTghUogTUKzPuyIe/d62yvx2/oDHdnzPu/VN5IdP12e ops@example.com"

const winSpec = `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: win-1}
spec:
  agent: cloudbase-init
  sshAuthorizedKeys: ["` + testKey + `"]
  timezone: Europe/Berlin
  users:
    - {name: ops, gecos: Operator, groups: [administrators], password: "S3cret-Pass!"}
    - {name: app, primaryGroup: appusers, sshAuthorizedKeys: ["` + testKey + `"]}
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

func load(t testing.TB, doc string) *spec.Instance {
	t.Helper()
	inst, err := spec.Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// image builds inst's seed for ds as f (what `vminit build` writes).
func image(t testing.TB, inst *spec.Instance, ds seed.Datasource, f media.Format) (string, *seed.Seed) {
	t.Helper()
	s, err := seed.Build(inst, ds, seed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := media.Write(&b, s, f, media.Options{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "seed."+string(f))
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, s
}

// TestOracleSeeds: every seed image cloudbase-init reads (ConfigDrive and
// NoCloud, ISO9660 and VFAT) gives its services the spec's identity,
// keys, admin, network and user data, and its user-data plugin writes the
// files, sets the time zone and accounts and runs the commands and the
// user's PowerShell with the executors the spec means.
func TestOracleSeeds(t *testing.T) {
	cbitest.Require(t)
	inst := load(t, winSpec)
	for _, tc := range []struct {
		ds   seed.Datasource
		f    media.Format
		mode string
	}{
		{seed.ConfigDrive, media.ISO9660, cbitest.ConfigDriveISO},
		{seed.ConfigDrive, media.VFAT, cbitest.ConfigDriveVFAT},
		{seed.NoCloud, media.ISO9660, cbitest.NoCloudISO},
		{seed.NoCloud, media.VFAT, cbitest.NoCloudVFAT},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			img, s := image(t, inst, tc.ds, tc.f)
			got := cbitest.Read(t, tc.mode, img)
			ud, _ := s.Lookup(tc.ds.UserDataPath())
			CheckResult(t, inst, got, ud, tc.ds == seed.ConfigDrive)
		})
	}
}

// CheckResult compares what cloudbase-init got with what inst (winSpec)
// says; admin says whether the metadata carries the admin user (OpenStack's
// meta_data.json does, NoCloud's and EC2's do not).
func CheckResult(t *testing.T, inst *spec.Instance, got *cbitest.Result, userData []byte, admin bool) {
	t.Helper()
	s := &inst.Spec
	if got.InstanceID != s.InstanceID || got.HostName != "win-1" {
		t.Errorf("instance id %q, host name %q; want %q, win-1", got.InstanceID, got.HostName, s.InstanceID)
	}
	if !slices.Equal(got.PublicKeys, []string{testKey}) {
		t.Errorf("public keys %q", got.PublicKeys)
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
	if n := got.Network; n == nil || len(n.Links) != 1 || len(n.Networks) != 1 {
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
	want := []cbitest.Execution{
		{Executor: cloudbaseinit.ExecCmd, Script: "rem cmd\necho hello > C:\\first-boot.txt\nnet start sshd\n"},
		{Executor: cloudbaseinit.ExecPowerShell, Script: s.CloudInit.UserData},
	}
	if !slices.Equal(got.Executed, want) {
		t.Errorf("executed %q\nwant %q", got.Executed, want)
	}
	calls := fmt.Sprint(got.Calls)
	for _, c := range []string{
		"[set_timezone Europe/Berlin]", "[create_group administrators]", "[create_group appusers]",
		"[create_user ops S3cret-Pass!]", "[add_user_to_local_group ops administrators]",
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
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}
