package cloudbaseinit_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
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
	return cbitest.SeedImage(t, s, f), s
}

// TestOracleSeeds: every seed image cloudbase-init reads (ConfigDrive and
// NoCloud, ISO9660 and VFAT) gives its services the spec's identity,
// keys, admin, network and user data, and its user-data plugin writes the
// files, sets the time zone and accounts and runs the commands and the
// user's PowerShell with the executors the spec means.
func TestOracleSeeds(t *testing.T) {
	cbitest.Require(t)
	inst := load(t, cbitest.WinSpec(""))
	cases := []struct {
		ds   seed.Datasource
		f    media.Format
		mode string
	}{
		{seed.ConfigDrive, media.ISO9660, cbitest.ConfigDriveISO},
		{seed.ConfigDrive, media.VFAT, cbitest.ConfigDriveVFAT},
		{seed.NoCloud, media.ISO9660, cbitest.NoCloudISO},
		{seed.NoCloud, media.VFAT, cbitest.NoCloudVFAT},
	}
	var jobs []cbitest.Job
	var userData [][]byte
	for _, tc := range cases {
		img, s := image(t, inst, tc.ds, tc.f)
		ud, _ := s.Lookup(tc.ds.UserDataPath())
		jobs = append(jobs, cbitest.Job{Mode: tc.mode, Arg: img})
		userData = append(userData, ud)
	}
	for i, got := range cbitest.ReadAll(t, jobs...) {
		t.Run(cases[i].mode, func(t *testing.T) {
			cbitest.CheckWin(t, inst, got, userData[i], cbitest.Want{Admin: cases[i].ds == seed.ConfigDrive, Network: true})
		})
	}
}

// TestOracleDispatch: every user-data format vminit writes for a
// cloudbase-init guest reaches the executor vminit meant (Classify), in
// cloudbase-init's own user-data plugin: given alone, as the whole user
// data, and beside the spec's generated #cloud-config in the multipart
// message UserData makes.
func TestOracleDispatch(t *testing.T) {
	cbitest.Require(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("#ps1\nWrite-Output gzipped\n"))
	zw.Close()
	mime := "Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/x-shellscript\nContent-Disposition: attachment; filename=\"setup.ps1\"\n\nWrite-Output from-mime\n--b--\n"
	cases := []struct {
		name, data, executor, body string
	}{
		{"ps1", "#ps1\nWrite-Output one\n", cloudbaseinit.ExecPowerShell, "Write-Output one"},
		{"ps1_sysnative", "#ps1_sysnative\nWrite-Output two\n", cloudbaseinit.ExecPowerShell, "Write-Output two"},
		{"ps1_x86", "#ps1_x86\nWrite-Output three\n", cloudbaseinit.ExecPowerShellX86, "Write-Output three"},
		{"rem cmd", "rem cmd\necho four\n", cloudbaseinit.ExecCmd, "echo four"},
		{"bash", "#!/bin/bash\necho five\n", cloudbaseinit.ExecBash, "echo five"},
		{"python", "#!/usr/bin/env python\nprint('six')\n", cloudbaseinit.ExecPython, "print('six')"},
		{"ec2 powershell", "<powershell>\nWrite-Output seven\n</powershell>\n", cloudbaseinit.ExecPowerShell, "Write-Output seven"},
		{"ec2 script", "<script>\necho eight\n</script>\n", cloudbaseinit.ExecCmd, "echo eight"},
		{"cloud-config runcmd", "#cloud-config\nruncmd: ['echo nine']\n", cloudbaseinit.ExecCmd, "echo nine"},
		{"gzip", gz.String(), cloudbaseinit.ExecPowerShell, "Write-Output gzipped"},
		{"mime", mime, cloudbaseinit.ExecPowerShell, "Write-Output from-mime"},
	}
	var jobs []cbitest.Job
	for _, tc := range cases {
		f, err := cloudbaseinit.Classify([]byte(tc.data))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if f.Kind == cloudbaseinit.KindScript && f.Executor != tc.executor && f.Executor != cloudbaseinit.ExecEC2 {
			t.Errorf("%s: Classify: %+v; want executor %s", tc.name, f, tc.executor)
		}
		for _, beside := range []bool{false, true} {
			doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: win-2}\nspec:\n  agent: cloudbase-init\n"
			if beside {
				doc += "  commands: ['echo generated']\n"
			}
			inst := load(t, doc)
			inst.Spec.CloudInit.UserData = tc.data
			img, _ := image(t, inst, seed.NoCloud, media.VFAT)
			jobs = append(jobs, cbitest.Job{Mode: cbitest.NoCloudVFAT, Arg: img})
		}
	}
	got := cbitest.ReadAll(t, jobs...)
	for i, tc := range cases {
		for k, beside := range []bool{false, true} {
			runs := got[2*i+k].Executed
			if beside {
				if len(runs) == 0 || runs[0].Script != "rem cmd\necho generated\n" {
					t.Errorf("%s beside the spec: executed %q; want the spec's runcmd first", tc.name, runs)
					continue
				}
				runs = runs[1:]
			}
			if len(runs) != 1 || runs[0].Executor != tc.executor || !strings.Contains(runs[0].Script, tc.body) {
				t.Errorf("%s (beside the spec: %v): executed %q; want %s running %q", tc.name, beside, runs, tc.executor, tc.body)
			}
		}
	}
}

// TestUserDataRefused: what cloudbase-init would skip is an error naming
// the field and the part.
func TestUserDataRefused(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{"Hi.\n", "does not recognise this user data"},
		{"#cloud-config\npackages: [git]\n", "line 2: packages: cloudbase-init has no module for it"},
		{"#include https://example.com/x\n", "does not recognise this user data"},
		{"Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/x-include-url\n\nhttps://example.com/\n--b--\n", "part 1: Content-Type text/x-include-url: cloudbase-init has no plugin"},
		{"Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/x-shellscript\n\nWrite-Output 1\n--b--\n", "part 1: text/x-shellscript without a file name"},
	} {
		inst := load(t, "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: win-3}\nspec:\n  agent: cloudbase-init\n")
		inst.Spec.CloudInit.UserData = tc.data
		_, err := seed.Build(inst, seed.NoCloud, seed.Options{})
		if err == nil || !strings.Contains(err.Error(), "spec.cloudInit.userData") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want spec.cloudInit.userData: …%s", tc.data, err, tc.want)
		}
	}
}

// TestOracleBondVLAN: a bond and a VLAN on it reach cloudbase-init's
// NetworkConfig plugin as a NIC team of the two NICs and a team NIC with
// the VLAN id, each with its static address: from a config drive's
// network_data.json and from NoCloud's network-config.
func TestOracleBondVLAN(t *testing.T) {
	inst := load(t, head+`  network:
    ethernets:
      nic0: {match: {macAddress: "52:54:00:12:34:01"}, setName: nic0}
      nic1: {match: {macAddress: "52:54:00:12:34:02"}, setName: nic1}
    bonds:
      bond0: {interfaces: [nic0, nic1], parameters: {mode: active-backup}, addresses: [192.0.2.10/24], gateway4: 192.0.2.1}
    vlans:
      bond0.20: {id: 20, link: bond0, addresses: [198.51.100.10/24]}
`)
	var jobs []cbitest.Job
	for _, c := range []struct {
		ds   seed.Datasource
		f    media.Format
		mode string
	}{{seed.ConfigDrive, media.ISO9660, cbitest.ConfigDriveISO}, {seed.NoCloud, media.VFAT, cbitest.NoCloudVFAT}} {
		img, _ := image(t, inst, c.ds, c.f)
		jobs = append(jobs, cbitest.Job{Mode: c.mode, Arg: img})
	}
	for i, got := range cbitest.ReadAll(t, jobs...) {
		calls := fmt.Sprint(got.Calls)
		for _, want := range []string{
			"[get_network_adapter_name_by_mac_address 52:54:00:12:34:01] [rename_network_adapter nic0]",
			"[get_network_adapter_name_by_mac_address 52:54:00:12:34:02] [rename_network_adapter nic1]",
			"[create_network_team bond_bond0 active-backup [nic0 nic1] bond0]",
			"[add_network_team_nic bond_bond0 bond0.20 20]",
			"[set_static_network_config bond0 192.0.2.10 24 192.0.2.1 []]",
			"[set_static_network_config bond0.20 198.51.100.10 24 []]",
		} {
			if !strings.Contains(calls, want) {
				t.Errorf("%s: no %q in cloudbase-init's calls %s\n(links %+v)", jobs[i].Mode, want, calls, got.Network)
			}
		}
	}
}

// TestOracleTimezone: a zone in CLDR's mapping reaches cloudbase-init's
// own set_timezone and becomes its Windows zone; one not there (a valid
// IANA name: Asia/Kolkata, whose old name Asia/Calcutta CLDR keeps)
// makes that same code raise, so vminit refuses it before, and a seed
// written by hand with it shows cloudbase-init failing.
func TestOracleTimezone(t *testing.T) {
	cbitest.Require(t)
	doc := head + "  timezone: %s\n"
	if _, err := seed.Build(load(t, fmt.Sprintf(doc, "Asia/Kolkata")), seed.NoCloud, seed.Options{}); err == nil || !strings.Contains(err.Error(), `spec.timezone: "Asia/Kolkata" is not a zone cloudbase-init can set`) {
		t.Fatalf("vminit built Asia/Kolkata for cloudbase-init: %v", err)
	}
	s, err := seed.Build(load(t, fmt.Sprintf(doc, "Asia/Calcutta")), seed.NoCloud, seed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mapped := cbitest.SeedImage(t, s, media.VFAT)
	// By hand: the same seed with the name vminit refuses.
	ud := seed.NoCloud.UserDataPath()
	for i, f := range s.Files {
		if f.Path == ud {
			s.Files[i].Data = bytes.ReplaceAll(f.Data, []byte("timezone: Asia/Calcutta"), []byte("timezone: Asia/Kolkata"))
		}
	}
	unmapped := cbitest.SeedImage(t, s, media.VFAT)
	got := cbitest.ReadAll(t, cbitest.Job{Mode: cbitest.NoCloudVFAT, Arg: mapped}, cbitest.Job{Mode: cbitest.NoCloudVFAT, Arg: unmapped})
	if calls := fmt.Sprint(got[0].Calls); !strings.Contains(calls, "[set_timezone Asia/Calcutta] [Timezone.set India Standard Time]") || len(got[0].ErrorsLogged) > 0 {
		t.Errorf("Asia/Calcutta: calls %s, errors %q; want India Standard Time set", calls, got[0].ErrorsLogged)
	}
	if calls, errs := fmt.Sprint(got[1].Calls), fmt.Sprint(got[1].ErrorsLogged); !strings.Contains(calls, "[set_timezone Asia/Kolkata]") || strings.Contains(calls, "Timezone.set") ||
		!strings.Contains(errs, "CloudbaseInitException: The given timezone name is unrecognised: 'Asia/Kolkata'") {
		t.Errorf("Asia/Kolkata: calls %s, errors %s; want set_timezone to raise", calls, errs)
	}
}

// TestOracleAdminKeys: cloudbase-init's own write_files writes the
// administrators' keys to the staging file, byte for byte, and its runcmd
// hands cmd.exe the lines that append it to Windows OpenSSH's
// administrators_authorized_keys and set its ACL (recorded, not run: there
// is no Windows here), after the spec's commands; its users module still
// writes every user's own keys to the profile. A spec with no
// administrator's key gives neither.
func TestOracleAdminKeys(t *testing.T) {
	cbitest.Require(t)
	inst := load(t, adminsSpec)
	none := load(t, head+"  users: [{name: app, sshAuthorizedKeys: [\""+userKey+"\"]}, {name: ops, groups: [administrators], password: pw}]\n")
	cd, _ := image(t, inst, seed.ConfigDrive, media.ISO9660)
	nc, _ := image(t, inst, seed.NoCloud, media.VFAT)
	no, _ := image(t, none, seed.NoCloud, media.VFAT)
	got := cbitest.ReadAll(t, cbitest.Job{Mode: cbitest.ConfigDriveISO, Arg: cd}, cbitest.Job{Mode: cbitest.NoCloudVFAT, Arg: nc}, cbitest.Job{Mode: cbitest.NoCloudVFAT, Arg: no})
	for i, r := range got[:2] {
		if f := r.Files[cbitest.AdminKeysStaging]; string(f) != adminKeysFile {
			t.Errorf("job %d: staging file %q\nwant %q", i, f, adminKeysFile)
		}
		want := []cbitest.Execution{{Executor: cloudbaseinit.ExecCmd, Script: "rem cmd\necho hi\n" + cbitest.AdminKeysCommands}}
		if !slices.Equal(r.Executed, want) {
			t.Errorf("job %d: executed %q\nwant %q", i, r.Executed, want)
		}
		if ak := r.AuthorizedKeys; ak["ops"] != adminKey+"\n"+specKey+"\n" || ak["app"] != userKey+"\n" {
			t.Errorf("job %d: profiles' authorized_keys %q", i, ak)
		}
		if len(r.ErrorsLogged) > 0 {
			t.Errorf("job %d: cloudbase-init logged %q", i, r.ErrorsLogged)
		}
	}
	if r := got[2]; len(r.Files) > 0 || len(r.Executed) > 0 {
		t.Errorf("no administrator's key, yet files %q, executed %q", r.Files, r.Executed)
	}
}
