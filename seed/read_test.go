package seed

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/vminit/vminit/spec"
)

func TestReadBackAndCheck(t *testing.T) {
	for name := range goldenCases {
		inst := load(t, name)
		for _, ds := range Datasources {
			s, err := Build(inst, ds, Options{})
			if err != nil {
				continue
			}
			r, err := Read(s.FS(), s.Label)
			if err != nil {
				t.Fatalf("%s %s: %v", name, ds, err)
			}
			if r.Datasource != ds || len(r.Files) != len(s.Files) {
				t.Errorf("%s %s: read %s with %d files, want %d", name, ds, r.Datasource, len(r.Files), len(s.Files))
			}
			if _, err := Check(r); err != nil {
				t.Errorf("%s %s: %v", name, ds, err)
			}
		}
	}
}

func TestCheckFindsProblems(t *testing.T) {
	ok := map[string]string{
		"user-data": "#cloud-config\nhostname: x\n",
		"meta-data": "instance-id: i-1\n",
	}
	for _, c := range []struct {
		label string
		files map[string]string
		want  string
	}{
		{"cidata", map[string]string{"user-data": ""}, "meta-data: missing"},
		{"CIDATA ", ok, `label: "CIDATA ": cloud-init's NoCloud looks for the label cidata`},
		{"cidata", map[string]string{"user-data": "", "meta-data": "local-hostname: x\n"}, "meta-data: no instance-id"},
		{"cidata", map[string]string{"user-data": "#cloud-config\n- a\n", "meta-data": "instance-id: a\n"}, "user-data: #cloud-config must be a mapping"},
		{"cidata", map[string]string{"user-data": "", "meta-data": "instance-id: a\n", "network-config": "network:\n  version: 2\n  ethernets: {}\n"}, "network-config: wrapped in a top-level network: key"},
		{"cidata", map[string]string{"user-data": "", "meta-data": "instance-id: a\n", "network-config": "version: 3\n"}, "network-config: version must be 1 or 2"},
		{"config-2", map[string]string{"openstack/latest/meta_data.json": `{"hostname": "x"}`}, "openstack/latest/meta_data.json: no uuid"},
		{"config-2", map[string]string{"openstack/latest/meta_data.json": `{"uuid": "u", "public-keys": ["ssh-ed25519 AAAA"]}`}, "public-keys is read only from the legacy (v1) layout"},
		{"config-2", map[string]string{"openstack/latest/meta_data.json": `{"uuid": "u"}`, "openstack/latest/network_data.json": `{"links": [{"id": "v", "type": "vlan", "vlan_link": "x", "vlan_id": 5}], "networks": [{"id": "n", "type": "ipv4", "link": "w"}]}`}, "links[0]: a VLAN needs"},
		{"config-2", map[string]string{"openstack/latest/meta_data.json": `{"uuid": "u"}`, "openstack/latest/vendor_data.json": `{"cloud-init": {"a": 1}}`}, "vendor_data.json: cloud-init takes vendor data from"},
		// The keys inside user data, as build judges them.
		{"cidata", map[string]string{"user-data": "#cloud-config\nssh_authorized_keys: [ssh-ed25519AAAAC3NzaC1lZDI1NTE5AAAAIPL3axFGHI3db9iJWkPXVbYzD7OaWTtHuqmxLvj+DztB]\n", "meta-data": "instance-id: a\n"}, "user-data: ssh_authorized_keys[0]: not an SSH public key"},
		{"config-2", map[string]string{"openstack/latest/meta_data.json": `{"uuid": "u"}`, "openstack/latest/user_data": `{"ignition": {"version": "3.2.0"}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519AAAA"]}]}}`}, "user_data: passwd.users[0].sshAuthorizedKeys[0]: not an SSH public key"},
	} {
		_, err := Check(readMap(t, c.label, c.files))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.files, err, c.want)
		}
		if err != nil && spec.AsErrors(err) == nil {
			t.Errorf("not spec.Errors: %v", err)
		}
	}
	for _, c := range []struct {
		label string
		files map[string]string
		want  string
	}{
		// User data cloud-init ignores is what KubeVirt
		// delivers ("Hi."), and what build writes with a warning.
		{"cidata", map[string]string{"user-data": "hello\n", "meta-data": "instance-id: a\n"}, "user-data: cloud-init does not recognise this data"},
		{"config-2", map[string]string{"openstack/2018-08-27/meta_data.json": `{"uuid": "u"}`, "openstack/2018-08-27/user_data": "oops"}, "openstack/2018-08-27/user_data: cloud-init does not recognise"},
	} {
		ws, err := Check(readMap(t, c.label, c.files))
		if err != nil || ws.Error() == "" || !strings.Contains(ws.Error(), c.want) {
			t.Errorf("%v: got warnings %v, error %v; want the warning %q and no error", c.files, ws, err, c.want)
		}
	}
	if _, err := Read(fstest.MapFS{"README": {}}, "data"); err == nil {
		t.Error("no seed recognised in a disk without one")
	}
}

// readMap reads the seed of files (path: content) labelled label.
func readMap(t *testing.T, label string, files map[string]string) *Seed {
	t.Helper()
	fsys := fstest.MapFS{}
	for p, data := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(data)}
	}
	s, err := Read(fsys, label)
	if err != nil {
		t.Fatalf("%v: %v", files, err)
	}
	return s
}
