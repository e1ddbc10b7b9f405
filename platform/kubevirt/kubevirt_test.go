package kubevirt_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/kubevirt"
	"github.com/vminit/vminit/spec"
)

const (
	keyA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl a@example.com"
	keyB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBJr6Yx5Wj7uGAGK3A3dbR4bXBE2Tb0R6wi3/3vMw8jQ b@example.com"
)

// vm wraps a VMI spec (indented for spec.template.spec) in a
// VirtualMachine named vm-1 in namespace ns, followed by more documents.
func vm(vmiSpec string, more ...string) string {
	doc := "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm-1\n  namespace: ns\nspec:\n  template:\n    spec:\n      domain:\n        devices: {}\n" + platformtest.Indent(vmiSpec, 6)
	for _, m := range more {
		doc += "---\n" + m
	}
	return doc
}

func secret(name string, kv ...string) string {
	s := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: ns\nstringData:\n", name)
	for i := 0; i+1 < len(kv); i += 2 {
		s += fmt.Sprintf("  %s: %q\n", kv[i], kv[i+1])
	}
	return s
}

func gzipB64(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

const ignJSON = `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl a@example.com"]}]}}`

func TestCloudInitVolumes(t *testing.T) {
	big := strings.Repeat("#", 2100)
	platformtest.Run(t, []platformtest.Case{
		{Name: "noCloud userData", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    userData: \"#!/bin/sh\\necho hi\\n\"\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceNoCloud)
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\necho hi\n")
				platformtest.Eq(t, "userDataOnly", s.CloudInit.UserDataOnly, true)
				platformtest.Eq(t, "metaData", s.CloudInit.MetaData, map[string]any(nil))
				platformtest.Eq(t, "object", r.Object, "KubeVirt VirtualMachine ns/vm-1")
			}},
		// KubeVirt's quick-start VM (kubevirt.io labs' vm.yaml) delivers
		// "Hi.", which cloud-init ignores: built as given, with a warning.
		{Name: "user data cloud-init ignores", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    userData: |\n      Hi.\n"),
			Warns: []string{`vm.yaml:14: spec.template.spec.volumes[0].cloudInitNoCloud.userData: KubeVirt VirtualMachine ns/vm-1: KubeVirt delivers this as the user-data file, and so does vminit, but cloud-init ignores it`},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "Hi.\n")
			}},
		{Name: "secret user data cloud-init ignores", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    secretRef: {name: ud}\n", secret("ud", "userdata", "# set up\necho hi\n")),
			Warns: []string{`spec.template.spec.volumes[0].cloudInitNoCloud.secretRef.name: KubeVirt VirtualMachine ns/vm-1: KubeVirt delivers this as the user-data file`, `Secret "ud" key "userdata"`}},
		// KubeVirt's documented Ignition path for FCOS and RHCOS (the
		// user guide's startup-scripts page): Ignition JSON as the config
		// drive's user data, which Ignition's kubevirt platform reads.
		{Name: "configDrive userData Ignition", Doc: vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    userData: |\n      {\"ignition\": {\"version\": \"3.2.0\"},\n       \"passwd\": {\"users\": [{\"name\": \"core\"}]}}\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "agent", s.Agent, spec.AgentIgnition)
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "")
				if !strings.Contains(s.Ignition.Config, `"name": "core"`) {
					t.Errorf("ignition config %s", s.Ignition.Config)
				}
			}},
		// virt-launcher writes the drive's meta-data whatever the user
		// data: Afterburn reads its instance_type (and hostname, uuid).
		{Name: "configDrive Ignition with an instancetype", Doc: strings.Replace(vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    userData: '"+ignJSON+"'\n"), "spec:\n  template:", "spec:\n  instancetype: {name: u1.medium}\n  template:", 1),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "agent", s.Agent, spec.AgentIgnition)
				platformtest.Eq(t, "metaData", s.CloudInit.MetaData, map[string]any{"instance_id": "vm-1.ns", "instance_type": "u1.medium"})
			}},
		{Name: "configDrive userDataBase64 Ignition", Doc: vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    userDataBase64: " + base64.StdEncoding.EncodeToString([]byte(ignJSON)) + "\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "agent", s.Agent, spec.AgentIgnition)
			}},
		{Name: "noCloud secret Ignition, with network data", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    secretRef: {name: ud}\n    networkData: \"version: 2\\n\"\n", secret("ud", "userdata", ignJSON)),
			Warns: []string{"spec.template.spec.volumes[0].cloudInitNoCloud.networkData: ignored: KubeVirt writes it beside the Ignition config (Secret \"ud\" key \"userdata\"), but Ignition reads no network data"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "agent", s.Agent, spec.AgentIgnition)
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceNoCloud)
				platformtest.Eq(t, "networkConfig", s.CloudInit.NetworkConfig, "")
			}},
		{Name: "configDrive Ignition that is no JSON", Doc: vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    userData: |\n      {\"ignition\": {\"version\": \"3.2.0\"},}\n"),
			Errs: []string{"vm.yaml:15: spec.template.spec.volumes[0].cloudInitConfigDrive.userData: column 47: not JSON"}},
		// KubeVirt users write NoCloud network data both ways; cloud-init
		// strips a top-level network: key only since 22.2 (22.4's
		// stages.py _remove_top_level_network_key), so vminit unwraps it.
		{Name: "noCloud networkData wrapped in network:", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkData: |\n      # the pod network\n      network:\n        version: 2\n        ethernets:\n          eth0: {dhcp4: true}\n"),
			Warns: []string{"vm.yaml:14: spec.template.spec.volumes[0].cloudInitNoCloud.networkData: unwrapped from its top-level network: key"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "networkConfig", s.CloudInit.NetworkConfig, "version: 2\nethernets:\n  eth0: {dhcp4: true}\n")
			}},
		{Name: "configDrive userDataBase64 gzip", Doc: vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    userDataBase64: " + gzipB64("#cloud-config\na: 1\n") + "\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
				platformtest.Eq(t, "userData (decompressed)", s.CloudInit.UserData, "#cloud-config\na: 1\n")
				platformtest.Eq(t, "metaData", s.CloudInit.MetaData, map[string]any{"instance_id": "vm-1.ns"})
			}},
		{Name: "secretRef prefers userdata", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    secretRef: {name: ud}\n", secret("ud", "userData", "#cloud-config\nb: 2\n", "userdata", "#cloud-config\na: 1\n")),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "#cloud-config\na: 1\n")
			}},
		{Name: "secretRef userData", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    secretRef: {name: ud}\n", secret("ud", "userData", "#cloud-config\nb: 2\n")),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "#cloud-config\nb: 2\n")
			}},
		{Name: "networkData inline", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkData: \"version: 2\\nethernets: {eth0: {dhcp4: true}}\\n\"\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "networkConfig", s.CloudInit.NetworkConfig, "version: 2\nethernets: {eth0: {dhcp4: true}}\n")
				// KubeVirt allows network data alone and writes an empty
				// user-data (the user guide's network binding examples):
				// so does vminit, rather than a generated #cloud-config.
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "")
				platformtest.Eq(t, "userDataOnly", s.CloudInit.UserDataOnly, true)
			}},
		{Name: "networkDataBase64", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkDataBase64: " + base64.StdEncoding.EncodeToString([]byte("version: 1\nconfig: []\n")) + "\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "networkConfig", s.CloudInit.NetworkConfig, "version: 1\nconfig: []\n")
			}},
		{Name: "networkDataSecretRef prefers networkdata", Doc: vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    networkDataSecretRef: {name: nd}\n", secret("nd", "networkData", `{"links": []}`, "networkdata", `{"links": [], "networks": []}`)),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "networkConfig", s.CloudInit.NetworkConfig, `{"links": [], "networks": []}`)
			}},
		{Name: "networkDataSecretRef networkData", Doc: vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    networkDataSecretRef: {name: nd}\n", secret("nd", "networkData", `{"links": []}`)),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "networkConfig", s.CloudInit.NetworkConfig, `{"links": []}`)
			}},
		{Name: "two user data sources", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    userData: \"#!/bin/sh\\n\"\n    secretRef: {name: ud}\n"),
			Errs: []string{"vm.yaml:13: spec.template.spec.volumes[0].cloudInitNoCloud: sets userData and secretRef: give at most one source of userData"}},
		{Name: "two network data sources", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkData: \"version: 2\\n\"\n    networkDataBase64: dmVyc2lvbjogMgo=\n"),
			Errs: []string{"sets networkData and networkDataBase64"}},
		{Name: "bad base64", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    userDataBase64: '!!'\n"),
			Errs: []string{"spec.template.spec.volumes[0].cloudInitNoCloud.userDataBase64: not base64"}},
		{Name: "no data", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud: {}\n"),
			Errs: []string{"spec.template.spec.volumes[0].cloudInitNoCloud: needs user data or network data"}},
		{Name: "secret without the key", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    secretRef: {name: ud}\n", secret("ud", "user-data", "x")),
			Errs: []string{`spec.template.spec.volumes[0].cloudInitNoCloud.secretRef.name: secret "ud" in namespace "ns" has no key "userdata" or "userData" (it has "user-data")`}},
		{Name: "secret missing", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkDataSecretRef: {name: nd}\n"),
			Errs: []string{`vm.yaml:14: spec.template.spec.volumes[0].cloudInitNoCloud.networkDataSecretRef.name: secret "nd" not found in namespace "ns"`}},
		{Name: "secret name empty", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    secretRef: {name: \"\"}\n"),
			Errs: []string{"cloudInitNoCloud.secretRef.name: required"}},
		{Name: "first volume wins", Doc: vm("volumes:\n- name: a\n  cloudInitConfigDrive:\n    userData: \"#!/bin/sh\\n\"\n- name: b\n  cloudInitNoCloud:\n    userData: \"#cloud-config\\n\"\n"),
			Warns: []string{"spec.template.spec.volumes[1].cloudInitNoCloud: ignored: only the first cloud-init volume (spec.template.spec.volumes[0].cloudInitConfigDrive) is used"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\n")
			}},
		{Name: "inline over 2 KiB", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    userData: \"#!/bin/sh\\n" + big + "\\n\"\n"),
			Warns: []string{"cloudInitNoCloud.userData: 2111 bytes: KubeVirt's API server refuses more than 2048 bytes inline"}},
		{Name: "base64 over 2 KiB decoded", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkDataBase64: " + base64.StdEncoding.EncodeToString([]byte("version: 2\n"+big+"\n")) + "\n"),
			Warns: []string{"cloudInitNoCloud.networkDataBase64: 2112 bytes decoded"}},
		{Name: "no first-boot data", Doc: vm("volumes:\n- name: root\n  containerDisk: {image: x}\n"),
			Errs: []string{"spec.template.spec.volumes: no cloudInitNoCloud, cloudInitConfigDrive or sysprep volume"}},
	})
}

func TestIdentity(t *testing.T) {
	ci := "volumes:\n- name: ci\n  cloudInitNoCloud:\n    userData: \"#!/bin/sh\\n\"\n"
	long := strings.Repeat("a", 70)
	platformtest.Run(t, []platformtest.Case{
		{Name: "VM: the controller's name-derived UUID", Doc: vm(ci),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "instanceID", s.InstanceID, kubevirt.LegacyUUID("vm-1"))
				platformtest.Eq(t, "hostname", s.Hostname, "vm-1")
			}},
		{Name: "firmware UUID", Doc: strings.Replace(vm(ci), "devices: {}", "devices: {}\n        firmware: {uuid: 5d307ca9-b3ef-428c-8861-06e72d69f223}", 1),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "instanceID", s.InstanceID, "5d307ca9-b3ef-428c-8861-06e72d69f223")
			}},
		{Name: "spec.hostname", Doc: vm("hostname: web\n" + ci),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "hostname", s.Hostname, "web")
			}},
		{Name: "name cut at the first dot", Doc: strings.Replace(vm(ci), "name: vm-1", "name: web.example", 1),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "hostname", s.Hostname, "web")
				platformtest.Eq(t, "metadata.name", r.Instance.Metadata.Name, "web.example")
			}},
		{Name: "a name vminit cannot take", Doc: strings.Replace(vm(ci), "name: vm-1", "name: "+long, 1),
			Errs: []string{"vm.yaml:4: metadata.name: \"" + long + "\" is not a valid name"}},
		{Name: "bare VMI: stable id, cluster instancetype first", Doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: db-0
  annotations:
    kubevirt.io/instancetype-name: u1.small
    kubevirt.io/cluster-instancetype-name: cx1.large
spec:
  domain:
    devices: {}
` + platformtest.Indent(ci, 2),
			Opts: platform.Options{Namespace: "prod"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "instanceID", s.InstanceID, kubevirt.LegacyUUID("db-0"))
				platformtest.Eq(t, "metaData", s.CloudInit.MetaData, map[string]any{"instance-type": "cx1.large"})
				platformtest.Eq(t, "object", r.Object, "KubeVirt VirtualMachineInstance prod/db-0")
			}},
		{Name: "VM instancetype on ConfigDrive", Doc: strings.Replace(vm(strings.Replace(ci, "cloudInitNoCloud", "cloudInitConfigDrive", 1)), "spec:\n  template:", "spec:\n  instancetype: {name: u1.medium}\n  template:", 1),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "metaData", s.CloudInit.MetaData, map[string]any{"instance_id": "vm-1.ns", "instance_type": "u1.medium"})
			}},
		{Name: "tagged devices", Doc: strings.Replace(vm(strings.Replace(ci, "cloudInitNoCloud", "cloudInitConfigDrive", 1)), "devices: {}", `devices:
          interfaces:
          - {name: a, masquerade: {}, tag: front, pciAddress: "0000:02:01.0", macAddress: "52:54:00:00:00:01"}
          - {name: b, bridge: {}, tag: back}
          - {name: c, bridge: {}}
          hostDevices:
          - {name: h, deviceName: intel.com/qat, tag: hd}
          gpus:
          - {name: g, deviceName: nvidia.com/gpu, tag: gpu}`, 1),
			Warns: []string{
				"interfaces[1].tag: left out of meta_data.json devices: KubeVirt reads the NIC's PCI address from the running domain",
				"hostDevices[0].tag: left out", "gpus[0].tag: left out"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq[any](t, "devices", s.CloudInit.MetaData["devices"], []any{map[string]any{"type": "nic", "bus": "pci", "address": "0000:02:01.0", "mac": "52:54:00:00:00:01", "tags": []any{"front"}}})
			}},
	})
}

func TestAccessCredentials(t *testing.T) {
	ac := func(pm string) string {
		return "accessCredentials:\n- sshPublicKey:\n    source: {secret: {secretName: keys}}\n    propagationMethod: " + pm + "\n"
	}
	nc := "volumes:\n- name: ci\n  cloudInitNoCloud:\n    userData: \"#!/bin/sh\\n\"\n"
	cd := strings.Replace(nc, "cloudInitNoCloud", "cloudInitConfigDrive", 1)
	keys := secret("keys", "b-file", keyB+"\n", "a-file", "# a comment\n"+keyA+"\n\n  "+keyB+"  \n")
	platformtest.Run(t, []platformtest.Case{
		{Name: "noCloud: one key per line, files in name order", Doc: vm(ac("{noCloud: {}}")+nc, keys),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "keys", s.SSHAuthorizedKeys, []string{keyA, keyB, keyB})
			}},
		{Name: "configDrive", Doc: vm(ac("{configDrive: {}}")+cd, keys),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "key count", len(s.SSHAuthorizedKeys), 3)
			}},
		{Name: "noCloud needs a noCloud volume", Doc: vm(ac("{noCloud: {}}")+cd, keys),
			Errs: []string{"accessCredentials[0].sshPublicKey.propagationMethod.noCloud: needs a cloudInitNoCloud volume"}},
		{Name: "configDrive needs a configDrive volume", Doc: vm(ac("{configDrive: {}}")+nc, keys),
			Errs: []string{"accessCredentials[0].sshPublicKey.propagationMethod.configDrive: needs a cloudInitConfigDrive volume"}},
		{Name: "no propagation", Doc: vm(ac("{}")+nc, keys),
			Errs: []string{"accessCredentials[0].sshPublicKey.propagationMethod: required"}},
		{Name: "guest agent is run time", Doc: vm(ac("{qemuGuestAgent: {users: [fedora]}}")+"- userPassword:\n    source: {secret: {secretName: pw}}\n    propagationMethod: {qemuGuestAgent: {}}\n"+nc, keys),
			Warns: []string{"propagationMethod.qemuGuestAgent: ignored: KubeVirt pushes these keys at run time", "accessCredentials[1].userPassword: ignored"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "keys", s.SSHAuthorizedKeys, []string(nil))
			}},
		{Name: "secret missing", Doc: vm(ac("{noCloud: {}}") + nc),
			Errs: []string{`accessCredentials[0].sshPublicKey.source.secret.secretName: secret "keys" not found in namespace "ns"`}},
		{Name: "not a key", Doc: vm(ac("{noCloud: {}}")+nc, secret("keys", "k", "ssh-rsa garbage\n")),
			Errs: []string{`spec.template.spec.accessCredentials[0].sshPublicKey.source.secret.secretName (key "k"): not an SSH public key`}},
	})
}

func TestIgnitionAnnotation(t *testing.T) {
	ann := func(cfg string) string {
		return strings.Replace(vm(""), "  template:\n", "  template:\n    metadata:\n      annotations:\n        kubevirt.io/ignitiondata: '"+cfg+"'\n", 1)
	}
	platformtest.Run(t, []platformtest.Case{
		{Name: "spec 3 on the config drive", Doc: ann(`{"ignition": {"version": "3.2.0"}}`),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "agent", s.Agent, spec.AgentIgnition)
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
				platformtest.Eq(t, "config", s.Ignition.Config, `{"ignition": {"version": "3.2.0"}}`)
			}},
		{Name: "spec 2.2 translated", Doc: ann(`{"ignition": {"version": "2.2.0"}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["` + keyA + `"]}]}}`),
			Warns: []string{"Ignition spec 2.2.0 translated to spec 3"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				if !strings.Contains(s.Ignition.Config, `"version":"3.0.0"`) || !strings.Contains(s.Ignition.Config, keyA) {
					t.Errorf("config %s", s.Ignition.Config)
				}
			}},
		{Name: "not JSON, one line", Doc: ann(`{"ignition": }`),
			Errs: []string{`vm.yaml:10: spec.template.metadata.annotations["kubevirt.io/ignitiondata"]: line 1, column 14 of its text: not JSON: invalid character '}'`}},
		{Name: "spec 2 networkd has no spec 3", Doc: ann(`{"ignition": {"version": "2.2.0"}, "networkd": {"units": [{"name": "a.network", "contents": "x"}]}}`),
			Errs: []string{"cannot be translated to spec 3"}},
		{Name: "and a cloud-init volume", Doc: strings.Replace(ann(`{"ignition": {"version": "3.0.0"}}`), "devices: {}\n", "devices: {}\n      volumes:\n      - name: ci\n        cloudInitNoCloud: {userData: \"#!/bin/sh\\n\"}\n", 1),
			Errs: []string{`annotations["kubevirt.io/ignitiondata"]: the VM also has the cloud-init volume spec.template.spec.volumes[0].cloudInitNoCloud`}},
	})
}

func TestSysprep(t *testing.T) {
	const answer = "<?xml version=\"1.0\"?>\n<unattend xmlns=\"urn:schemas-microsoft-com:unattend\"/>\n"
	const components = `<unattend xmlns="urn:schemas-microsoft-com:unattend">
  <settings pass="windowsPE">
    <component name="Microsoft-Windows-International-Core-WinPE"><UILanguage>en-US</UILanguage></component>
    <component name="Microsoft-Windows-Setup"/>
  </settings>
  <settings pass="oobeSystem"><component name="Microsoft-Windows-Shell-Setup"/></settings>
</unattend>`
	cm := func(kv ...string) string {
		s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: answers\n  namespace: ns\ndata:\n"
		for i := 0; i+1 < len(kv); i += 2 {
			s += fmt.Sprintf("  %s: %q\n", kv[i], kv[i+1])
		}
		return s
	}
	sp := "volumes:\n- name: sp\n  sysprep: {configMap: {name: answers}}\n"
	platformtest.Run(t, []platformtest.Case{
		{Name: "Windows: the disc alone", Doc: vm(sp, cm("unattend.xml", answer, "setup.ps1", "echo")),
			Warns: []string{`configmap "answers": unattend.xml passed through as KubeVirt delivers it, on the disc labelled unattendCD: well-formed XML configuring no configuration passes; not checked: each component's settings`},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				if r.Instance != nil || r.Spec != nil {
					t.Errorf("a Windows VM has no spec: %s", r.Spec)
				}
				platformtest.Eq(t, "label", r.Sysprep.Label, "unattendCD")
				platformtest.Eq(t, "files", len(r.Sysprep.Files), 2)
				platformtest.Eq(t, "first file", r.Sysprep.Files[1].Path, "unattend.xml")
				platformtest.Eq(t, "content", string(r.Sysprep.Files[1].Data), answer)
			}},
		{Name: "secret, beside cloud-init", Doc: vm("volumes:\n- name: sp\n  sysprep: {secret: {name: answers}}\n- name: ci\n  cloudInitNoCloud: {userData: \"#!/bin/sh\\n\"}\n", secret("answers", "Autounattend.XML", answer)),
			Warns: []string{"Autounattend.XML passed through"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "sysprep file", r.Sysprep.Files[0].Path, "Autounattend.XML")
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\n")
			}},
		{Name: "components named", Doc: vm(sp, cm("autounattend.xml", components)),
			Warns: []string{"configuring windowsPE (Microsoft-Windows-International-Core-WinPE, Microsoft-Windows-Setup); oobeSystem (Microsoft-Windows-Shell-Setup); not checked"}},
		{Name: "root Windows setup does not read", Doc: vm(sp, cm("autounattend.xml", "<unattend/>")),
			Warns: []string{`but its root is <unattend> in namespace "", where Windows setup reads an <unattend xmlns="urn:schemas-microsoft-com:unattend">`}},
		{Name: "no answer file", Doc: vm(sp, cm("setup.ps1", "echo")),
			Errs: []string{`spec.template.spec.volumes[0].sysprep.configMap.name: configmap "answers" has no autounattend.xml or unattend.xml key (it has setup.ps1)`}},
		{Name: "keys that are no file name on the disc", Doc: vm(sp, cm("autounattend.xml", answer, "../../escape.txt", "x", "/abs.txt", "y")),
			Errs: []string{`spec.template.spec.volumes[0].sysprep.configMap.name: configmap "answers": key "../../escape.txt" has a ".." segment`,
				`configmap "answers": key "/abs.txt" is absolute`}},
		{Name: "malformed answer file", Doc: vm(sp, cm("autounattend.xml", "<unattend><settings></unattend>")),
			Errs: []string{"autounattend.xml is not well-formed XML", "line 1"}},
		{Name: "two roots", Doc: vm(sp, cm("autounattend.xml", "<a/><b/>")),
			Errs: []string{"2 root elements"}},
		{Name: "both kinds", Doc: vm("volumes:\n- name: sp\n  sysprep: {configMap: {name: a}, secret: {name: b}}\n"),
			Errs: []string{"sysprep: sets both configMap and secret"}},
		{Name: "configmap missing", Doc: vm(sp),
			Errs: []string{`sysprep.configMap.name: configmap "answers" not found in namespace "ns"`}},
	})
}

func TestPoolAndVersions(t *testing.T) {
	pool := `apiVersion: pool.kubevirt.io/v1beta1
kind: VirtualMachinePool
metadata:
  name: workers
  namespace: ns
spec:
  replicas: 3
  nameGeneration:
    appendIndexToSecretRefs: true
  selector: {}
  virtualMachineTemplate:
    spec:
      template:
        spec:
          domain:
            devices: {}
          volumes:
          - name: ci
            cloudInitNoCloud:
              secretRef: {name: ud}
`
	platformtest.Run(t, []platformtest.Case{
		{Name: "pool member 2", Doc: pool + "---\n" + secret("ud-2", "userdata", "#!/bin/sh\necho 2\n"), Opts: platform.Options{PoolIndex: 2},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "name", r.Instance.Metadata.Name, "workers-2")
				platformtest.Eq(t, "instanceID", s.InstanceID, kubevirt.LegacyUUID("workers-2"))
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\necho 2\n")
			}},
		{Name: "pool without appendIndex", Doc: strings.Replace(pool, "appendIndexToSecretRefs: true", "appendIndexToSecretRefs: false", 1) + "---\n" + secret("ud", "userdata", "#!/bin/sh\n"), Opts: platform.Options{PoolIndex: 1},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "name", r.Instance.Metadata.Name, "workers-1")
			}},
		{Name: "pool: the member's sysprep ConfigMap", Doc: `apiVersion: pool.kubevirt.io/v1alpha1
kind: VirtualMachinePool
metadata: {name: win, namespace: ns}
spec:
  nameGeneration: {appendIndexToConfigMapRefs: true}
  selector: {}
  virtualMachineTemplate:
    spec:
      template:
        spec:
          domain: {devices: {}}
          volumes:
          - name: sp
            sysprep: {configMap: {name: answers}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: answers-0, namespace: ns}
data: {unattend.xml: "<unattend/>"}
`,
			Warns: []string{`configmap "answers-0": unattend.xml passed through`},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "object", r.Object, "KubeVirt VirtualMachinePool ns/win-0")
				platformtest.Eq(t, "answer file", string(r.Sysprep.Files[0].Data), "<unattend/>")
			}},
		{Name: "pool index past replicas", Doc: pool, Opts: platform.Options{PoolIndex: 3},
			Errs: []string{"spec.replicas: the pool has 3 members; there is no member 3: KubeVirt's pool controller makes members 0 to 2"}},
		{Name: "v1alpha3 VM", Doc: strings.Replace(vm("volumes:\n- name: ci\n  cloudInitNoCloud: {userData: \"#!/bin/sh\\n\"}\n"), "kubevirt.io/v1\n", "kubevirt.io/v1alpha3\n", 1),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\n")
			}},
		// kubevirt.io/v1alpha2 as KubeVirt v0.7-v0.12 served it (the
		// corpus holds its published examples).
		{Name: "v1alpha2 VM as shipped", Doc: `apiVersion: kubevirt.io/v1alpha2
kind: VirtualMachine
metadata: {name: old, creationTimestamp: null}
spec:
  running: false
  template:
    metadata: {labels: {a: b}}
    spec:
      domain:
        devices:
          disks:
          - {name: registrydisk, volumeName: registryvolume, disk: {bus: virtio}}
          - {name: cloudinitdisk, volumeName: cloudinitvolume, floppy: {}}
      volumes:
      - {name: registryvolume, registryDisk: {image: kubevirt/cirros-registry-disk-demo}}
      - {name: cloudinitvolume, cloudInitNoCloud: {secretRef: {name: ud}}}
status: {}
---
` + secret("ud", "userdata", "#!/bin/sh\n", "userData", "#!/bin/false\n"),
			Opts: platform.Options{Namespace: "ns"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				// v0.12's virt-launcher read the key userdata alone, and
				// wrote the instance-id <name>.<namespace>.
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\n")
				platformtest.Eq(t, "instance-id", s.InstanceID, "old.ns")
				platformtest.Eq(t, "object", r.Object, "KubeVirt VirtualMachine ns/old")
			}},
		{Name: "v1alpha2 VMI: volumeName naming no volume", Doc: `apiVersion: kubevirt.io/v1alpha2
kind: VirtualMachineInstance
metadata: {name: old}
spec:
  domain:
    devices:
      disks:
      - {name: a, volumeName: nocloud, disk: {}}
      - {name: b, volumeName: other, disk: {}}
      - {name: c, volumeName: other, disk: {}}
  volumes:
  - {name: ci, cloudInitNoCloud: {userData: "#!/bin/sh\n"}}
  - {name: other, emptyDisk: {capacity: 1Gi}}
`,
			Errs: []string{`spec.domain.devices.disks[0].volumeName: no volume is named "nocloud": KubeVirt's virt-api webhook refuses the object`,
				`spec.domain.devices.disks[2].volumeName: disks[1] names volume "other" too`}},
		{Name: "v1alpha2 VMI: the design document's disk-borne cloudinit never shipped", Doc: `apiVersion: kubevirt.io/v1alpha2
kind: VirtualMachineInstance
metadata: {name: old}
spec:
  domain:
    devices:
      disks:
      - {type: file, cloudinit: {nocloud: {userDataBase64: IyEvYmluL3NoCg==}}}
`,
			Errs: []string{"spec.domain.devices.disks[0].type: unknown field", "spec.domain.devices.disks[0].cloudinit: unknown field"}},
		{Name: "v1alpha1 is no longer served", Doc: "apiVersion: kubevirt.io/v1alpha1\nkind: OfflineVirtualMachine\nmetadata: {name: a}\nspec: {}\n",
			Errs: []string{`apiVersion: kubevirt.io/v1alpha1 is no longer served: KubeVirt replaced it with v1alpha2 in v0.7.0 (2018), so kubectl apply fails with no matches for kind "OfflineVirtualMachine" in version "kubevirt.io/v1alpha1"; its OfflineVirtualMachine is today's kubevirt.io/v1 VirtualMachine`}},
		{Name: "unknown field below the lenient VMI spec", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud: {userdata: x}\n"),
			Errs: []string{"spec.template.spec.volumes[0].cloudInitNoCloud.userdata: unknown field"}},
		{Name: "no template", Doc: "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: a}\nspec: {}\n",
			Errs: []string{"spec.template: required"}},
		{Name: "no name", Doc: "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {}\nspec: {domain: {devices: {}}}\n",
			Errs: []string{"metadata.name: required"}},
	})
}

func TestRecognizes(t *testing.T) {
	for _, c := range []struct {
		apiVersion, kind string
		want             bool
	}{
		{"kubevirt.io/v1", "VirtualMachine", true}, {"kubevirt.io/v1alpha3", "VirtualMachineInstance", true},
		{"kubevirt.io/v1alpha2", "VirtualMachineInstance", true}, {"kubevirt.io/v1alpha2", "VirtualMachine", true},
		{"kubevirt.io/v1alpha1", "OfflineVirtualMachine", true}, {"kubevirt.io/v1alpha1", "VirtualMachineInstance", false},
		{"pool.kubevirt.io/v1alpha1", "VirtualMachinePool", true}, {"pool.kubevirt.io/v1beta1", "VirtualMachinePool", true},
		{"kubevirt.io/v1", "VirtualMachinePool", false}, {"v1", "Pod", false},
	} {
		if got := kubevirt.Recognizes(c.apiVersion, c.kind); got != c.want {
			t.Errorf("Recognizes(%s, %s) = %v", c.apiVersion, c.kind, got)
		}
	}
}

func TestHostname(t *testing.T) {
	long := strings.Repeat("a", 70)
	for _, c := range [][3]string{
		{"vm-1", "", "vm-1"}, {"vm-1", "web", "web"}, {"db.example.com", "", "db"}, {long + ".x", "", long[:63]}, {long, "", long[:63]},
	} {
		if got := kubevirt.Hostname(c[0], c[1]); got != c[2] {
			t.Errorf("Hostname(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

// TestRefusalsSayWhatKubeVirtDoes: every refusal names the object's field
// and line (platformtest checks the file name and the field) and says what
// KubeVirt itself does with the input: the webhook's or the API server's
// own message, or what virt-launcher and the guest do.
func TestRefusalsSayWhatKubeVirtDoes(t *testing.T) {
	const ci = "volumes:\n- name: ci\n  cloudInitNoCloud: {userData: \"#!/bin/sh\\n\"}\n"
	platformtest.Run(t, []platformtest.Case{
		{Name: "unknown field", Doc: vm("hostnme: x\n" + ci),
			Errs: []string{"vm.yaml:11: spec.template.spec.hostnme: unknown field: kubectl apply (its strict field validation) and KubeVirt's API server refuse it"}},
		{Name: "wrong type", Doc: vm("hostname: [x]\n" + ci),
			Errs: []string{"spec.template.spec.hostname", "the API server refuses the object"}},
		{Name: "no template", Doc: "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: a}\nspec: {}\n",
			Errs: []string{"vm.yaml:4: spec.template: required: the VirtualMachineInstance template; KubeVirt's API server refuses a VirtualMachine without one"}},
		{Name: "no name", Doc: "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {}\nspec: {domain: {devices: {}}}\n",
			Errs: []string{"vm.yaml:3: metadata.name: required: the API server refuses an object without a name"}},
		{Name: "no data", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud: {}\n"),
			Errs: []string{`vm.yaml:13: spec.template.spec.volumes[0].cloudInitNoCloud: needs user data or network data`, `virt-api's webhook refuses the VM ("must have at least one userdatasource or one networkdatasource set")`}},
		{Name: "two sources", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud: {userData: \"#!/bin/sh\\n\", userDataBase64: IyEvYmluL3NoCg==}\n"),
			Errs: []string{`virt-api's webhook refuses the VM ("must have only one userdatasource set")`}},
		{Name: "bad base64", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud: {networkDataBase64: \"%%\"}\n"),
			Errs: []string{`spec.template.spec.volumes[0].cloudInitNoCloud.networkDataBase64: not base64: virt-api's webhook refuses the VM ("networkDataBase64 is not a valid base64 value")`}},
		{Name: "secret not found", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud: {secretRef: {name: nope}}\n"),
			Errs: []string{`spec.template.spec.volumes[0].cloudInitNoCloud.secretRef.name: secret "nope" not found in namespace "ns": KubeVirt's virt-launcher pod mounts it as a volume and does not start without it`}},
		{Name: "secret without the key", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud: {secretRef: {name: s}}\n", secret("s", "user-data", "#!/bin/sh\n")),
			Errs: []string{`has no key "userdata" or "userData"`, "virt-launcher reads only these keys of the mounted Secret"}},
		{Name: "secretRef without a name", Doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud: {secretRef: {}}\n"),
			Errs: []string{"secretRef.name: required: the Secret's name; KubeVirt counts a secretRef without one as no source"}},
		{Name: "noCloud keys without the volume", Doc: vm("accessCredentials:\n- sshPublicKey: {source: {secret: {secretName: k}}, propagationMethod: {noCloud: {}}}\n"),
			Errs: []string{`propagationMethod.noCloud: needs a cloudInitNoCloud volume; virt-api's webhook refuses the VM ("requires a noCloud volume to exist when the noCloud propagationMethod is in use")`}},
		{Name: "keys without a propagation method", Doc: vm(ci + "accessCredentials:\n- sshPublicKey: {source: {secret: {secretName: k}}, propagationMethod: {}}\n"),
			Errs: []string{`propagationMethod: required: noCloud, configDrive or qemuGuestAgent; virt-api's webhook refuses the VM ("must have exactly one propagationMethod set")`}},
		{Name: "keys without a Secret", Doc: vm(ci + "accessCredentials:\n- sshPublicKey: {source: {}, propagationMethod: {noCloud: {}}}\n"),
			Errs: []string{`source.secret.secretName: required: the Secret holding the keys; virt-api's webhook refuses the VM without one ("must have exactly one source set")`}},
		{Name: "annotation that is no JSON", Doc: "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: a\n  annotations:\n    kubevirt.io/ignitiondata: |\n      {\"ignition\": \n",
			Errs: []string{"not JSON", "KubeVirt passes it to QEMU's fw_cfg unchecked, and the guest's Ignition fails on it at boot"}},
		{Name: "Ignition user data that is no JSON", Doc: vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    userData: |\n      {\"ignition\": {\"version\": \"3.2.0\"},}\n"),
			Errs: []string{"not JSON", "virt-launcher writes it unchecked as the user data, and the guest's Ignition fails on it at boot"}},
		{Name: "sysprep with both", Doc: vm("volumes:\n- name: sp\n  sysprep: {configMap: {name: a}, secret: {name: b}}\n"),
			Errs: []string{"sysprep: sets both configMap and secret: KubeVirt's virt-controller mounts the secret and ignores the configMap; give one"}},
		{Name: "sysprep with neither", Doc: vm("volumes:\n- name: sp\n  sysprep: {}\n"),
			Errs: []string{`sysprep: needs configMap or secret; KubeVirt's virt-controller cannot make the VM's pod ("Sysprep must have Secret or ConfigMap reference set")`}},
		{Name: "sysprep without an answer file", Doc: vm("volumes:\n- name: sp\n  sysprep: {configMap: {name: a}}\n", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns}\ndata: {x.xml: \"<a/>\"}\n"),
			Errs: []string{`virt-launcher does not start the VM ("Sysprep drive should contain autounattend.xml or unattend.xml but neither were found.")`}},
		{Name: "sysprep answer file that is no XML", Doc: vm("volumes:\n- name: sp\n  sysprep: {configMap: {name: a}}\n", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns}\ndata: {unattend.xml: \"<a>\"}\n"),
			Errs: []string{"is not well-formed XML: KubeVirt delivers it unchecked, and Windows setup would stop on it"}},
	})
}
