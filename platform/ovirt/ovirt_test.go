package ovirt_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

const (
	keyA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl a@example.com"
	keyB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBJr6Yx5Wj7uGAGK3A3dbR4bXBE2Tb0R6wi3/3vMw8jQ b@example.com"
	hash = "$6$saltsalt$8RWsOfwR6M6PpnoeQiEiWzNTPo1f0HjVYjDnLZhGx16aBFRkeqiHAzfXP/LgrOWMBMXqiU2pLrXsSOHNUyUm91" // "x"
)

// vm is an oVirt <vm> with the given children of <initialization> and
// other children of <vm>.
func vm(init, other string) string {
	return "<vm id=\"0c3b1b2e-5b6d-4c0f-9f55-6a6e1f3c2b11\">\n  <name>web</name>\n" + other + "  <initialization>\n" + init + "  </initialization>\n</vm>\n"
}

const nics = "  <nics>\n    <nic><name>eth0</name><mac><address>56:6F:1A:2B:00:01</address></mac></nic>\n    <nic><name>eth1</name><mac><address>56:6f:1a:2b:00:02</address></mac></nic>\n  </nics>\n"

// userData is the final #cloud-config as cloud-init merges it, read with
// vminit's renderer (the consumer tests read it with cloud-init itself).
func userData(t *testing.T, s *spec.Spec) map[string]any {
	t.Helper()
	ud, err := cloudinit.UserData(&spec.Instance{Spec: *s})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(ud, &m); err != nil {
		t.Fatalf("%v\n%s", err, ud)
	}
	return m
}

func TestCloudInitGuest(t *testing.T) {
	platformtest.Run(t, []platformtest.Case{
		{Name: "identity", Doc: vm("    <host_name>Web.Example.com</host_name>\n", ""),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "hostname", s.Hostname, "web")
				platformtest.Eq(t, "fqdn", s.FQDN, "web.example.com")
				platformtest.Eq(t, "instanceID", s.InstanceID, "0c3b1b2e-5b6d-4c0f-9f55-6a6e1f3c2b11")
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
				platformtest.Eq(t, "object", r.Object, "oVirt vm web")
				platformtest.Eq(t, "metaData", s.CloudInit.MetaData, map[string]any{
					"availability_zone": "nova", "meta": map[string]any{"dsmode": "local", "essential": "false", "role": "server"}})
				ud := userData(t, s)
				for k, v := range map[string]any{"disable_root": false, "ssh_pwauth": true, "chpasswd": map[string]any{"expire": false}} {
					platformtest.Eq(t, k, ud[k], v)
				}
				for _, k := range []string{"password", "user", "runcmd", "output"} {
					if _, ok := ud[k]; ok {
						t.Errorf("user data has %s", k)
					}
				}
			}},
		{Name: "a name made a host name; no id", Doc: "<vm><name>CentOS Web_1</name><initialization><host_name>x</host_name></initialization></vm>",
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "name", r.Instance.Metadata.Name, "centos-web-1")
				if s.InstanceID == "" || s.InstanceID == "x" {
					t.Errorf("instanceID %q", s.InstanceID)
				}
			}},
		{Name: "keys for the default user, CR/LF", Doc: vm("    <authorized_ssh_keys>"+keyA+"\r\n\r\n"+keyB+"\n</authorized_ssh_keys>\n", ""),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "keys", s.SSHAuthorizedKeys, []string{keyA, keyB})
				platformtest.Eq(t, "users", len(s.Users), 0)
			}},
		{Name: "user with keys and a hash", Doc: vm("    <user_name>admin</user_name>\n    <root_password>"+hash+"</root_password>\n    <authorized_ssh_keys>"+keyA+"</authorized_ssh_keys>\n", ""),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				f := false
				platformtest.Eq(t, "users", s.Users, []spec.User{{Name: "admin", PasswordHash: hash, LockPassword: &f, SSHAuthorizedKeys: []string{keyA}}})
				platformtest.Eq(t, "keys", len(s.SSHAuthorizedKeys), 0)
			}},
		{Name: "a password without user_name is root's", Doc: vm("    <root_password>"+hash+"</root_password>\n", ""),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "user", s.Users[0].Name, "root")
			}},
		{Name: "plain password, salted", Doc: vm("    <user_name>admin</user_name>\n    <root_password>s3cret pass</root_password>\n", ""), Opts: platform.Options{PasswordSalt: "abcdefgh"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "hash", s.Users[0].PasswordHash, "$6$abcdefgh$JkUs2M4cQMIF3fzb8rSPdrGis9kyxOr8G//eP6mEBQv4DyD/cfcCAqUX6.8VAMaqE9BpPh.U5Cfz9mU/DZcFL1")
			}},
		{Name: "plain password, no salt", Doc: vm("    <root_password>changeme</root_password>\n", ""),
			Errs: []string{"vm.yaml:4: vm.initialization.root_password: a plain-text password: vminit never writes one to the seed (oVirt does)", "--password-salt"}},
		{Name: "bad salt", Doc: vm("    <root_password>changeme</root_password>\n", ""), Opts: platform.Options{PasswordSalt: "has space"},
			Errs: []string{`vm.initialization.root_password: --password-salt "has space": want 1 to 16 characters of [./A-Za-z0-9]`}},
		{Name: "regenerate keys, timezone", Doc: vm("    <regenerate_ssh_keys>false</regenerate_ssh_keys>\n    <timezone>Europe/Berlin</timezone>\n", ""),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "timezone", s.Timezone, "Europe/Berlin")
				platformtest.Eq(t, "ssh_deletekeys", userData(t, s)["ssh_deletekeys"], any(false))
			}},
		{Name: "custom script merged by cloud-init's rules", Doc: vm("    <custom_script>disable_root: true\nruncmd:\n- echo one\n</custom_script>\n", ""),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				ud := userData(t, s)
				platformtest.Eq(t, "disable_root (the script's: a key given again replaces)", ud["disable_root"], any(true))
				platformtest.Eq(t, "ssh_pwauth (oVirt's)", ud["ssh_pwauth"], any(true))
				platformtest.Eq(t, "runcmd", ud["runcmd"], any([]any{"echo one"}))
			}},
		{Name: "custom script with its merge_how", Doc: vm("    <custom_script>disable_root: true\nchpasswd: {list: [a]}\nmerge_how: 'dict(no_replace,recurse_dict)+list(append)'\n</custom_script>\n", ""),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				ud := userData(t, s)
				platformtest.Eq(t, "disable_root (oVirt's: no_replace)", ud["disable_root"], any(false))
				platformtest.Eq(t, "chpasswd (merged)", ud["chpasswd"], any(map[string]any{"expire": false, "list": []any{"a"}}))
			}},
		{Name: "custom script with a header", Doc: vm("    <custom_script>#cloud-config\npackages: [htop]\n</custom_script>\n", ""),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "packages", userData(t, s)["packages"], any([]any{"htop"}))
			}},
		{Name: "a #! custom script stays a script", Doc: vm("    <custom_script>#!/bin/sh\necho hi\n</custom_script>\n", ""),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				ud, err := cloudinit.UserData(&spec.Instance{Spec: *s})
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(ud), "Content-Type: text/x-shellscript") || !strings.Contains(string(ud), "#!/bin/sh\necho hi\n") {
					t.Errorf("user data:\n%s", ud)
				}
			}},
		{Name: "custom script that is no cloud-config", Doc: vm("    <custom_script>- a list\n</custom_script>\n", ""),
			Errs: []string{"vm.initialization.custom_script: #cloud-config"}},
		{Name: "Windows-only fields", Doc: vm("    <domain>corp.example.com</domain>\n    <org_name>Corp</org_name>\n    <windows_license_key>X</windows_license_key>\n", ""),
			Warns: []string{"vm.initialization.domain: ignored: oVirt uses it only in Windows sysprep answer files", "org_name: ignored", "windows_license_key: ignored"}},
		{Name: "Windows guests", Doc: vm("", "  <os><type>windows_2022</type></os>\n"),
			Errs: []string{`vm.yaml:3: vm.os.type: "windows_2022": Windows guests get a sysprep answer file: without a custom_script the engine fills its own answer-file template`}},
		{Name: "no initialization", Doc: "<vm><name>a</name></vm>",
			Errs: []string{"vm: no initialization: oVirt gives this VM no first-boot data"}},
	})
}

func TestNetwork(t *testing.T) {
	nc := func(body string) string {
		return "    <nic_configurations>\n" + body + "    </nic_configurations>\n"
	}
	static := "      <nic_configuration><name>eth0</name><on_boot>true</on_boot><boot_protocol>static</boot_protocol>" +
		"<ip><address>192.0.2.20</address><netmask>255.255.255.0</netmask><gateway>192.0.2.1</gateway></ip>" +
		"<ipv6_boot_protocol>static</ipv6_boot_protocol><ipv6><address>2001:db8::20</address><netmask>64</netmask><gateway>2001:db8::1</gateway></ipv6></nic_configuration>\n"
	dhcp := "      <nic_configuration><name>eth1</name><boot_protocol>dhcp</boot_protocol><ipv6_boot_protocol>dhcp</ipv6_boot_protocol></nic_configuration>\n"
	platformtest.Run(t, []platformtest.Case{
		{Name: "static and dhcp, matched by MAC", Doc: vm(nc(static+dhcp)+"    <dns_servers>192.0.2.53 192.0.2.54</dns_servers>\n    <dns_search>example.com corp</dns_search>\n", nics),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				ns := &spec.Nameservers{Addresses: []string{"192.0.2.53", "192.0.2.54"}, Search: []string{"example.com", "corp"}}
				platformtest.Eq(t, "network", s.Network, &spec.Network{Ethernets: map[string]spec.Ethernet{
					"eth0": {Match: &spec.Match{MACAddress: "56:6f:1a:2b:00:01"}, SetName: "eth0", Interface: spec.Interface{
						Addresses: []string{"192.0.2.20/24", "2001:db8::20/64"}, Gateway4: "192.0.2.1", Gateway6: "2001:db8::1", Nameservers: ns}},
					"eth1": {Match: &spec.Match{MACAddress: "56:6f:1a:2b:00:02"}, SetName: "eth1", Interface: spec.Interface{DHCP4: true, DHCP6: true, Nameservers: ns}},
				}})
			}},
		{Name: "a prefix length for IPv4", Doc: vm(nc(strings.Replace(static, "255.255.255.0", "24", 1)), nics),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "address", s.Network.Ethernets["eth0"].Addresses[0], "192.0.2.20/24")
			}},
		{Name: "eni", Doc: vm(nc(dhcp)+"    <cloud_init_network_protocol>eni</cloud_init_network_protocol>\n", nics),
			Warns: []string{"vm.initialization.cloud_init_network_protocol: eni: written as network_data.json"}},
		{Name: "dns without nics", Doc: vm("    <dns_servers>192.0.2.53</dns_servers>\n", ""),
			Warns: []string{"vm.initialization.dns_servers: ignored without nic_configurations, as oVirt does"}},
		{Name: "no MAC: matched by name", Doc: vm(nc(dhcp), ""),
			Warns: []string{`vm.initialization.nic_configurations.nic_configuration[0].name: "eth1": matched by interface name, as oVirt writes it`},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "eth1", s.Network.Ethernets["eth1"], spec.Ethernet{Match: &spec.Match{Name: "eth1"}, Interface: spec.Interface{DHCP4: true, DHCP6: true}})
			}},
		{Name: "problems", Doc: vm(nc(
			"      <nic_configuration><name>eth0</name><on_boot>false</on_boot><boot_protocol>dhcp</boot_protocol></nic_configuration>\n"+
				"      <nic_configuration><name>eth1</name><boot_protocol>static</boot_protocol></nic_configuration>\n"+
				"      <nic_configuration><name>eth9</name><boot_protocol>dhcp</boot_protocol></nic_configuration>\n"+
				"      <nic_configuration><boot_protocol>dhcp</boot_protocol></nic_configuration>\n"+
				"      <nic_configuration><name>eth1</name><ipv6_boot_protocol>autoconf</ipv6_boot_protocol></nic_configuration>\n"+
				"      <nic_configuration><name>eth1</name><boot_protocol>autoconf</boot_protocol></nic_configuration>\n"+
				"      <nic_configuration><name>eth1</name><boot_protocol>static</boot_protocol><ip><address>192.0.2.9</address><netmask>255.0.255.0</netmask></ip></nic_configuration>\n"), nics),
			Errs: []string{
				"nic_configuration[0].on_boot: false: oVirt refuses cloud-init network settings that do not start on boot (the engine does not run the VM: 'Start on boot' must be true)",
				"nic_configuration[1].ip.address: required with boot_protocol static (the engine does not run the VM without it)",
				"nic_configuration[3].name: required: the guest's interface name (oVirt writes the settings under no name, for no interface of the guest)",
				`nic_configuration[4].ipv6_boot_protocol: "autoconf": oVirt refuses IPv6 autoconf for cloud-init (the engine does not run the VM)`,
				`nic_configuration[5].boot_protocol: "autoconf" is for IPv6`,
				`nic_configuration[6].ip.netmask: "255.0.255.0" is not a netmask (255.255.255.0) or prefix length (0-32) (oVirt writes it into network_data.json as given, which cloud-init cannot read)`}},
	})
}

func TestIgnitionGuest(t *testing.T) {
	rhcos := "  <os><type>rhcos_x64</type></os>\n"
	platformtest.Run(t, []platformtest.Case{
		{Name: "no script: oVirt's version, hostname and user", Doc: vm("    <host_name>node-1</host_name>\n    <user_name>core</user_name>\n    <root_password>"+hash+"</root_password>\n    <authorized_ssh_keys>"+keyA+"</authorized_ssh_keys>\n", rhcos),
			Warns: []string{"custom_script: Ignition spec 2.3.0 translated to spec 3"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "agent", s.Agent, spec.AgentIgnition)
				platformtest.Eq(t, "variant", s.Ignition.Variant, spec.VariantRHCOS)
				platformtest.Eq(t, "hostname", s.Hostname, "node-1")
				f := false
				platformtest.Eq(t, "users", s.Users, []spec.User{{Name: "core", PasswordHash: hash, LockPassword: &f, SSHAuthorizedKeys: []string{keyA}}})
				platformtest.Eq(t, "config", s.Ignition.Config, `{"ignition":{"version":"3.0.0"}}`)
			}},
		{Name: "a spec 3 script", Doc: vm(`    <custom_script>{"ignition": {"version": "3.1.0"}, "storage": {"files": [{"path": "/etc/motd", "contents": {"source": "data:,hi"}}]}}</custom_script>
    <authorized_ssh_keys>`+keyA+"</authorized_ssh_keys>\n    <root_password>x</root_password>\n    <timezone>UTC</timezone>\n", rhcos),
			Warns: []string{"root_password: ignored without user_name, as oVirt ignores it for Ignition guests"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "keys (for core)", s.SSHAuthorizedKeys, []string{keyA})
				if !strings.Contains(s.Ignition.Config, "/etc/motd") {
					t.Errorf("config %s", s.Ignition.Config)
				}
			}},
		{Name: "user's timezone and nics ignored", Doc: vm("    <user_name>core</user_name>\n    <timezone>UTC</timezone>\n    <nic_configurations><nic_configuration><name>eth0</name></nic_configuration></nic_configurations>\n", rhcos),
			Warns: []string{"timezone: ignored for an Ignition guest", "nic_configurations: ignored for an Ignition guest", "translated to spec 3"}},
		{Name: "an Ignition script without an OS type", Doc: vm(`    <custom_script>{"ignition": {"version": "3.0.0"}}</custom_script>`+"\n", ""),
			Warns: []string{"custom_script: an Ignition config and no os.type"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "agent", s.Agent, spec.AgentIgnition)
			}},
		{Name: "not JSON: the file's line", Doc: vm("    <custom_script>\n{\n  \"ignition\": {\"version\": \"3.0.0\"},\n  \"passwd\": [,]\n}\n</custom_script>\n", rhcos),
			Errs: []string{"vm.yaml:8: vm.initialization.custom_script: column 14: not JSON: invalid character ','", "(the engine's IgnitionHandler cannot parse it either: the VM does not start) (in vm/"}},
		{Name: "not JSON, JSON document", Doc: `{"name": "a", "os": {"type": "rhcos_x64"}, "initialization": {"custom_script": "{\"ignition\": ]"}}`,
			Errs: []string{"vm.initialization.custom_script: line 1, column 14 of its text: not JSON"}},
	})
}

func TestDecode(t *testing.T) {
	platformtest.Run(t, []platformtest.Case{
		{Name: "JSON vm", Doc: `{"id": "a1", "name": "j", "nics": {"nic": [{"name": "eth0", "mac": {"address": "56:6f:1a:2b:00:01"}}]},
 "initialization": {"host_name": "j", "regenerate_ssh_keys": "true", "nic_configurations": {"nic_configuration": [{"name": "eth0", "boot_protocol": "dhcp"}]}}}`,
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "instanceID", s.InstanceID, "a1")
				platformtest.Eq(t, "dhcp4", s.Network.Ethernets["eth0"].DHCP4, true)
			}},
		{Name: "XML action", Doc: "<action><use_cloud_init>true</use_cloud_init><vm><initialization><host_name>a</host_name></initialization></vm></action>",
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) { platformtest.Eq(t, "hostname", s.Hostname, "a") }},
		{Name: "unknown and misplaced elements", Doc: "<vm>\n<name>a</name>\n<cpus>2</cpus>\n<link rel=\"x\"/>\n<initialization>\n<host_nme>a</host_nme>\n<nic_configurations><nic>x</nic></nic_configurations>\n<regenerate_ssh_keys>maybe</regenerate_ssh_keys>\n<cloud_init_network_protocol>dhcp</cloud_init_network_protocol>\n</initialization>\n</vm>",
			Errs: []string{`vm.yaml:3: vm.cpus: unknown element: oVirt's vm has no "cpus"`,
				`vm.yaml:6: vm.initialization.host_nme: unknown element: oVirt's initialization has no "host_nme"`,
				"vm.yaml:7: vm.initialization.nic_configurations.nic: unknown element: nic_configurations holds <nic_configuration> items",
				`vm.yaml:8: vm.initialization.regenerate_ssh_keys: "maybe": want true or false`,
				`vm.yaml:9: vm.initialization.cloud_init_network_protocol: "dhcp": want one of openstack_metadata, eni`}},
		{Name: "not XML", Doc: "<vm><name>a</vm>", Errs: []string{"not well-formed XML"}},
		{Name: "another root", Doc: "<host><name>a</name></host>", Errs: []string{"the root is <host>; want <vm>"}},
		{Name: "an action without a vm", Doc: "<action><use_cloud_init>true</use_cloud_init></action>", Errs: []string{"action: <action> without <vm> carries no initialization"}},
		{Name: "JSON list where a value belongs", Doc: `{"initialization": {"host_name": "a"}, "name": [[1]]}`, Errs: []string{"a list where an object or value belongs"}},
		{Name: "nested too deep", Doc: strings.Repeat("<vm>", 70) + strings.Repeat("</vm>", 70), Errs: []string{"nested more than 64 elements deep"}},
	})
}

// TestPasswordHashMatchesCrypt holds --password-salt's SHA-512 crypt to the
// C library's crypt(3), through Python's crypt module: the hash a guest's
// login compares with.
func TestPasswordHashMatchesCrypt(t *testing.T) {
	py := testtools.RequireFile(t, "/usr/bin/python3")
	cases := []struct{ pw, salt string }{
		{"changeme", "examplesalt"}, {"s3cret pass", "abcdefgh"}, {"ü-ñ-€ unicode", "a"},
		{strings.Repeat("long password ", 20), "./ABCxyz0123456789"[:16]}, {"x", "sixteencharsalt."},
		{`quote"back\slash'`, "Zz09./"},
	}
	var in []map[string]string
	for _, c := range cases {
		in = append(in, map[string]string{"pw": c.pw, "salt": c.salt})
	}
	data, _ := json.Marshal(in)
	cmd := exec.Command(py, "-W", "ignore", "-c", `
import crypt, json, sys
print(json.dumps([crypt.crypt(c["pw"], "$6$" + c["salt"]) for c in json.load(sys.stdin)]))
`)
	cmd.Stdin = strings.NewReader(string(data))
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && strings.Contains(string(ee.Stderr), "No module named 'crypt'") {
			testtools.Missing(t, "Python's crypt module")
		}
		t.Fatalf("python: %v", err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		doc := vm(fmt.Sprintf("    <user_name>admin</user_name>\n    <root_password>%s</root_password>\n", xmlEscape(c.pw)), "")
		r, err := platformtest.Convert(t, doc, platform.Options{PasswordSalt: c.salt})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Instance.Spec.Users[0].PasswordHash; got != want[i] {
			t.Errorf("password %q salt %q: %s, crypt(3) says %s", c.pw, c.salt, got, want[i])
		}
	}
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
