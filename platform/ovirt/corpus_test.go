package ovirt_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/GehirnInc/crypt/sha512_crypt"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/network"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// engineNIC is what ovirt-engine's VmInitToOpenStackMetadataAdapter writes
// to network_data.json for one nic_configuration: a link named after it
// (no MAC), and a network with its static address.
type engineNIC struct {
	name, address, netmask, gateway string
	dns                             []string
}

// engineDelivery is what the engine's CloudInitHandler puts on the
// config-2 disc for a corpus body, read from its code (oVirt/ovirt-engine
// backend/.../vdsbroker/CloudInitHandler.java at 0111fc63): meta_data
// hostname and name (host_name), user_data `user:` and `password:` (in
// plain text, where vminit writes its hash), the custom_script appended,
// and network_data.json's links and networks.
type engineDelivery struct {
	hostname, user, password, scriptFile string
	nics                                 []engineNIC
}

// TestCorpusMatchesEngine builds the corpus bodies that the engine gives
// cloud-init and compares what vminit delivers with what the engine
// writes, field by field.
func TestCorpusMatchesEngine(t *testing.T) {
	ansibleNIC := engineNIC{"eth1", "10.34.60.86", "255.255.252.0", "10.34.63.254", []string{"8.8.8.8", "8.8.4.4"}}
	for _, c := range []struct {
		file string
		opts platform.Options
		want engineDelivery
		// name is the instance's; warns are the warnings expected.
		name  string
		warns []string
	}{
		{file: "go-start-vm-with-cloudinit.xml", name: "myvm.example.com",
			want: engineDelivery{"myvm.example.com", "root", "redhat123", "/tmp/greeting.txt",
				[]engineNIC{{"eth0", "192.168.0.100", "255.255.255.0", "192.168.0.1", []string{"192.168.0.1", "192.168.0.2"}}}},
			warns: []string{`action.vm.initialization.nic_configurations.nic_configuration[0].name: "eth0": matched by interface name`}},
		{file: "py-start-vm-with-cloud-init.xml", name: "myvm", opts: platform.Options{Name: "myvm"},
			want: engineDelivery{"myvm.example.com", "root", "redhat123", "/tmp/greeting.txt",
				[]engineNIC{{"eth0", "192.168.0.100", "255.255.255.0", "192.168.0.1", []string{"192.168.0.1", "192.168.0.2", "192.168.0.3"}}}},
			warns: []string{`"eth0": matched by interface name`}},
		{file: "ansible-ovirt-vm-cloud-init.xml", name: "example.com",
			want:  engineDelivery{"example.com", "root", "super_password", "/tmp/greeting.txt", []engineNIC{ansibleNIC}},
			warns: []string{`"eth1": matched by interface name`}},
		{file: "ansible-ovirt-template-cloud-init.xml", name: "mytemplate",
			want:  engineDelivery{"example.com", "root", "super_password", "/tmp/greeting.txt", []engineNIC{ansibleNIC}},
			warns: []string{`template.initialization.nic_configurations.nic_configuration[0].name: "eth1": matched by interface name`}},
		{file: "ansible-ovirt-vmpool-cloud-init.xml", name: "example.com",
			want: engineDelivery{"example.com", "root", "super_password", "/tmp/greeting.txt",
				[]engineNIC{{"eth1", "10.34.60.86", "255.255.252.0", "10.34.63.254", nil}}},
			warns: []string{`vm_pool.vm.initialization.nic_configurations.nic_configuration[0].name: "eth1": matched by interface name`}},
	} {
		t.Run(c.file, func(t *testing.T) {
			c.opts.PasswordSalt = "corpussalt"
			r, err := platformtest.Convert(t, corpusBody(t, c.file), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			s := &r.Instance.Spec
			platformtest.Eq(t, "name", r.Instance.Metadata.Name, c.name)
			host := s.Hostname
			if s.FQDN != "" {
				host = s.FQDN
			}
			platformtest.Eq(t, "hostname", host, c.want.hostname)
			compareUser(t, s, c.want)
			if got := cloudInitAccounts(t, s); !slices.Equal(got, []string{c.want.user}) {
				t.Errorf("cloud-init creates %v, want %s alone (the engine's user: renames the default user)", got, c.want.user)
			}
			if !strings.Contains(s.CloudInit.UserData, "path: "+c.want.scriptFile) {
				t.Errorf("custom_script's file %s not in the user data:\n%s", c.want.scriptFile, s.CloudInit.UserData)
			}
			compareNetworkData(t, s, c.want.nics)
			for _, w := range c.warns {
				if !slices.ContainsFunc(r.Warnings, func(got string) bool { return strings.Contains(got, w) }) {
					t.Errorf("no warning %q in %q", w, r.Warnings)
				}
			}
		})
	}
}

// cloudInitAccounts is the accounts cloud-init 22.4's cc_users_groups
// creates from the user data, on an image whose default user is ubuntu
// (ug_util.normalize_users_groups, the code cloud-init runs).
func cloudInitAccounts(t *testing.T, s *spec.Spec) []string {
	t.Helper()
	py := testtools.RequireFile(t, "/usr/bin/python3")
	ud, err := cloudinit.UserData(&spec.Instance{Spec: *s})
	if err != nil {
		t.Fatal(err)
	}
	const script = `import sys, json
from cloudinit import util
from cloudinit.distros import ug_util
class Distro:
    def get_default_user(self):
        return {"name": "ubuntu", "lock_passwd": True, "groups": ["adm", "sudo"]}
users, _ = ug_util.normalize_users_groups(util.load_yaml(sys.stdin.read()), Distro())
print(json.dumps(sorted(users)))`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = strings.NewReader(string(ud))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cloud-init: %v", err)
	}
	var names []string
	if err := json.Unmarshal(out, &names); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return names
}

// corpusBody is a corpus file without its source comment.
func corpusBody(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", "ovirt", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// compareUser checks the engine's `user:` and plain `password:` against
// vminit's user and its hash, and that, as `user:` renames the image's
// default user, that user is the only one.
func compareUser(t *testing.T, s *spec.Spec, want engineDelivery) {
	t.Helper()
	if users := userData(t, s)["users"].([]any); len(users) != 1 || users[0].(map[string]any)["name"] != want.user {
		t.Errorf("users = %v, want %s alone (no distribution default user)", users, want.user)
	}
	if len(s.Users) != 1 || s.Users[0].Name != want.user {
		t.Fatalf("users = %+v, want %s", s.Users, want.user)
	}
	if err := sha512_crypt.New().Verify(s.Users[0].PasswordHash, []byte(want.password)); err != nil {
		t.Errorf("password hash %q is not of %q: %v", s.Users[0].PasswordHash, want.password, err)
	}
}

// compareNetworkData checks vminit's network_data.json against the
// engine's: each link named as the nic_configuration, without MAC, as
// the engine writes it, and its static address, gateway and DNS servers.
func compareNetworkData(t *testing.T, s *spec.Spec, want []engineNIC) {
	t.Helper()
	data, err := network.NetworkDataJSON(s.Network)
	if err != nil {
		t.Fatal(err)
	}
	var nd struct {
		Links []struct {
			ID, Name           string
			EthernetMACAddress string `json:"ethernet_mac_address"`
		}
		Networks []struct {
			Link, Type     string
			IPAddress      string   `json:"ip_address"`
			Netmask        string   `json:"netmask"`
			DNSNameservers []string `json:"dns_nameservers"`
			Routes         []struct{ Network, Gateway string }
		}
		Services []struct{ Type, Address string }
	}
	if err := json.Unmarshal(data, &nd); err != nil {
		t.Fatal(err)
	}
	if len(nd.Links) != len(want) || len(nd.Networks) != len(want) {
		t.Fatalf("network_data.json:\n%s\nwant %d links", data, len(want))
	}
	var dns []string
	for _, svc := range nd.Services {
		dns = append(dns, svc.Address)
	}
	for i, w := range want {
		l, n := nd.Links[i], nd.Networks[i]
		platformtest.Eq(t, "link name", l.Name, w.name)
		platformtest.Eq(t, "link MAC", l.EthernetMACAddress, "")
		platformtest.Eq(t, "network link", n.Link, l.ID)
		platformtest.Eq(t, "type", n.Type, "ipv4")
		platformtest.Eq(t, "ip_address", n.IPAddress, w.address)
		platformtest.Eq(t, "netmask", n.Netmask, w.netmask)
		if len(n.Routes) != 1 || n.Routes[0].Network != "0.0.0.0" || n.Routes[0].Gateway != w.gateway {
			t.Errorf("routes = %+v, want the default via %s", n.Routes, w.gateway)
		}
		platformtest.Eq(t, "dns services", dns, w.dns)
	}
}

// TestCorpusSysprep: the Python SDK's start with use_sysprep and an answer
// file in custom_script is read as the engine delivers it: the answer
// file passed through on the payload disc, what was checked and what not
// said.
func TestCorpusSysprep(t *testing.T) {
	r, err := platformtest.Convert(t, corpusBody(t, "py-start-vm-with-sysprep.xml"), platform.Options{Name: "win"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Instance != nil || r.Sysprep == nil || len(r.Sysprep.Files) != 1 || r.Sysprep.Files[0].Path != "Unattend.xml" {
		t.Fatalf("result %+v", r)
	}
	if got := string(r.Sysprep.Files[0].Data); !strings.HasPrefix(got, `<?xml version="1.0" encoding="UTF-8"?>`+"\n<unattend") {
		t.Errorf("answer file %q", got)
	}
	ws := strings.Join(r.Warnings, "\n")
	for _, w := range []string{"Unattend.xml passed through as the engine delivers it", "well-formed XML configuring no configuration passes", "not checked: each component's settings"} {
		if !strings.Contains(ws, w) {
			t.Errorf("warnings lack %q:\n%s", w, ws)
		}
	}
}

// TestCorpusRefusals checks what the corpus bodies the engine gives no
// cloud-init (sysprep) or that name no VM are refused with.
func TestCorpusRefusals(t *testing.T) {
	for _, c := range []struct {
		file, doc, want string
		unsupported     bool
	}{
		{file: "ansible-ovirt-vm-sysprep.xml", unsupported: true,
			want: "vm.yaml:2: action.use_sysprep: true: the engine writes a Windows sysprep answer file: without a custom_script the engine fills its own answer-file template (osinfo sysprepPath), which vminit does not have"},
		{file: "ansible-ovirt-template-sysprep.xml", unsupported: true,
			want: `vm.yaml:8: template.initialization.user_name: "Administrator": Windows' built-in account, which no Linux guest has; the engine writes a sysprep answer file`},
		// The Go SDK's body without its host_name: a start action's VM
		// is named in the URL.
		{file: "go-start-vm-with-cloudinit.xml", doc: "<host_name>myvm.example.com</host_name>",
			want: "action.vm.name: required: the instance needs a name, and neither the body nor initialization.host_name gives one (a start action's VM is named in its URL, .../vms/ID/start): pass --name NAME"},
	} {
		t.Run(c.file, func(t *testing.T) {
			body := strings.Replace(corpusBody(t, c.file), c.doc, "", 1)
			_, err := platformtest.Convert(t, body, platform.Options{PasswordSalt: "corpussalt"})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant %q", err, c.want)
			}
			if errors.Is(err, platform.ErrUnsupported) != c.unsupported {
				t.Errorf("errors.Is(ErrUnsupported) = %t", !c.unsupported)
			}
		})
	}
}
