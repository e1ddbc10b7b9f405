package cloudinit

import (
	"encoding/json"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestOneHostnameRule: every datasource reports the same host name, the
// FQDN when the spec has one, else the host name.
func TestOneHostnameRule(t *testing.T) {
	for fqdn, want := range map[string]string{"web-1.example.com": "web-1.example.com", "": "web-1"} {
		doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web-1}\nspec: {}\n"
		if fqdn != "" {
			doc = strings.Replace(doc, "spec: {}", "spec: {fqdn: "+fqdn+"}", 1)
		}
		inst := loadSpec(t, doc, nil)
		got := map[string]string{}
		md, err := MetaData(inst)
		if err != nil {
			t.Fatal(err)
		}
		var nc map[string]any
		yaml.Unmarshal(md, &nc)
		got["NoCloud local-hostname"], _ = nc["local-hostname"].(string)
		cd, err := ConfigDriveMetaData(inst)
		if err != nil {
			t.Fatal(err)
		}
		var cdm map[string]any
		json.Unmarshal(cd, &cdm)
		got["ConfigDrive hostname"], _ = cdm["hostname"].(string)
		for _, f := range EC2MetaData(inst) {
			if f.Path == "meta-data/hostname" || f.Path == "meta-data/local-hostname" {
				got["EC2 "+f.Path] = string(f.Data)
			}
		}
		if len(got) != 4 {
			t.Fatalf("fqdn %q: %v", fqdn, got)
		}
		for where, h := range got {
			if h != want {
				t.Errorf("fqdn %q: %s is %q, want %q", fqdn, where, h, want)
			}
		}
	}
}

// TestEC2Levels: every served version has the feature level its date
// gives (the levels the metadata server keeps a tree for), and every
// file's Since starts one.
func TestEC2Levels(t *testing.T) {
	want := map[string]int{"2009-04-04": 0, "2016-09-02": 1, "2018-09-24": 1, "2019-10-01": 2, "2021-03-23": 2, "latest": 2}
	if vs := EC2Versions(); len(vs) != len(want) || vs[len(vs)-1] != "latest" {
		t.Errorf("EC2Versions %v", EC2Versions())
	}
	for _, v := range EC2Versions() {
		if got := EC2Level(v); got != want[v] {
			t.Errorf("EC2Level(%s) = %d, want %d", v, got, want[v])
		}
	}
	for _, v := range []string{"", "2008-02-01", "2020-01-01", "latest/", "LATEST"} {
		if got := EC2Level(v); got != -1 {
			t.Errorf("EC2Level(%q) = %d, want -1", v, got)
		}
	}
	inst := loadSpec(t, `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: web-1}
spec:
  network:
    ethernets:
      eth0: {match: {macAddress: "52:54:00:12:34:56"}, addresses: [192.0.2.10/24]}
`, nil)
	for _, f := range EC2MetaData(inst) {
		if l := EC2Level(f.Since); l < 0 || ec2Since[l] != f.Since {
			t.Errorf("%s: Since %q starts no level", f.Path, f.Since)
		}
	}
}

// TestEC2MetaDataVersions: each file says the first metadata version that
// has it, and the tree is sorted.
func TestEC2MetaDataVersions(t *testing.T) {
	inst := loadSpec(t, `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: web-1}
spec:
  sshAuthorizedKeys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGClPAdKZWvfQndmz2tRFw+JMNfVSzOuyotc5XUqX77L ops@example.com"]
  network:
    ethernets:
      eth0: {match: {macAddress: "52:54:00:12:34:56"}, addresses: [192.0.2.10/24]}
  metadataServer: {addresses: [192.0.2.10], region: eu-1}
`, nil)
	files := EC2MetaData(inst)
	since := map[string]string{}
	for i, f := range files {
		if i > 0 && files[i-1].Path >= f.Path {
			t.Errorf("not sorted at %s", f.Path)
		}
		since[f.Path] = f.Since
	}
	for p, want := range map[string]string{
		"meta-data/instance-id":      EC2Version2009,
		"meta-data/placement/region": EC2Version2019,
		"meta-data/network/interfaces/macs/52:54:00:12:34:56/local-ipv4s": EC2Version2016,
		"meta-data/public-keys/": EC2Version2009,
	} {
		if since[p] != want {
			t.Errorf("%s: since %q, want %q", p, since[p], want)
		}
	}
	for _, f := range files {
		switch f.Path {
		case "meta-data/placement/region":
			if string(f.Data) != "eu-1" {
				t.Errorf("region %q", f.Data)
			}
		case "meta-data/public-keys/":
			if string(f.Data) != "0=ops@example.com" {
				t.Errorf("public-keys/ lists %q", f.Data)
			}
		}
	}
}
