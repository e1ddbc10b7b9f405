package kubevirt_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
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
	doc := "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm-1\n  namespace: ns\nspec:\n  template:\n    spec:\n      domain:\n        devices: {}\n" + indent(vmiSpec, 6)
	for _, m := range more {
		doc += "---\n" + m
	}
	return doc
}

func indent(s string, n int) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if strings.TrimSpace(l) != "" {
			b.WriteString(strings.Repeat(" ", n))
		}
		b.WriteString(l)
	}
	return b.String()
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

func convertOne(t *testing.T, doc string, opts platform.Options) (*platform.Result, error) {
	t.Helper()
	rs, err := convert.Read(t.Context(), "vm.yaml", []byte(doc), opts)
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 {
		t.Fatalf("%d results", len(rs))
	}
	return rs[0], nil
}

type fieldCase struct {
	name  string
	doc   string
	opts  platform.Options
	check func(t *testing.T, s *spec.Spec, r *platform.Result)
	// errs and warns must each appear in the error text or a warning.
	errs, warns []string
}

func runCases(t *testing.T, cases []fieldCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := convertOne(t, c.doc, c.opts)
			if len(c.errs) > 0 {
				if err == nil {
					t.Fatalf("converted without error: %s", r.Spec)
				}
				if !errors.Is(err, spec.ErrInvalid) {
					t.Errorf("not spec.ErrInvalid: %v", err)
				}
				for _, w := range c.errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ws := strings.Join(r.Warnings, "\n")
			for _, w := range c.warns {
				if !strings.Contains(ws, w) {
					t.Errorf("warnings lack %q:\n%s", w, ws)
				}
			}
			if len(c.warns) == 0 && ws != "" {
				t.Errorf("unexpected warnings:\n%s", ws)
			}
			if c.check != nil {
				var s *spec.Spec
				if r.Instance != nil {
					s = &r.Instance.Spec
				}
				c.check(t, s, r)
			}
		})
	}
}

func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

func TestCloudInitVolumes(t *testing.T) {
	big := strings.Repeat("#", 2100)
	runCases(t, []fieldCase{
		{name: "noCloud userData", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    userData: \"#!/bin/sh\\necho hi\\n\"\n"),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "datasource", s.Datasource, spec.DatasourceNoCloud)
				eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\necho hi\n")
				eq(t, "userDataOnly", s.CloudInit.UserDataOnly, true)
				eq(t, "metaData", s.CloudInit.MetaData, map[string]any(nil))
				eq(t, "object", r.Object, "KubeVirt VirtualMachine ns/vm-1")
			}},
		{name: "configDrive userDataBase64 gzip", doc: vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    userDataBase64: " + gzipB64("#cloud-config\na: 1\n") + "\n"),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
				eq(t, "userData (decompressed)", s.CloudInit.UserData, "#cloud-config\na: 1\n")
				eq(t, "metaData", s.CloudInit.MetaData, map[string]any{"instance_id": "vm-1.ns"})
			}},
		{name: "secretRef prefers userdata", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    secretRef: {name: ud}\n", secret("ud", "userData", "#cloud-config\nb: 2\n", "userdata", "#cloud-config\na: 1\n")),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "userData", s.CloudInit.UserData, "#cloud-config\na: 1\n")
			}},
		{name: "secretRef userData", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    secretRef: {name: ud}\n", secret("ud", "userData", "#cloud-config\nb: 2\n")),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "userData", s.CloudInit.UserData, "#cloud-config\nb: 2\n")
			}},
		{name: "networkData inline", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkData: \"version: 2\\nethernets: {eth0: {dhcp4: true}}\\n\"\n"),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "networkConfig", s.CloudInit.NetworkConfig, "version: 2\nethernets: {eth0: {dhcp4: true}}\n")
				eq(t, "userData (none: KubeVirt allows network data alone)", s.CloudInit.UserData, "")
				eq(t, "userDataOnly", s.CloudInit.UserDataOnly, false)
			}},
		{name: "networkDataBase64", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkDataBase64: " + base64.StdEncoding.EncodeToString([]byte("version: 1\nconfig: []\n")) + "\n"),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "networkConfig", s.CloudInit.NetworkConfig, "version: 1\nconfig: []\n")
			}},
		{name: "networkDataSecretRef prefers networkdata", doc: vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    networkDataSecretRef: {name: nd}\n", secret("nd", "networkData", `{"links": []}`, "networkdata", `{"links": [], "networks": []}`)),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "networkConfig", s.CloudInit.NetworkConfig, `{"links": [], "networks": []}`)
			}},
		{name: "networkDataSecretRef networkData", doc: vm("volumes:\n- name: ci\n  cloudInitConfigDrive:\n    networkDataSecretRef: {name: nd}\n", secret("nd", "networkData", `{"links": []}`)),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "networkConfig", s.CloudInit.NetworkConfig, `{"links": []}`)
			}},
		{name: "two user data sources", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    userData: \"#!/bin/sh\\n\"\n    secretRef: {name: ud}\n"),
			errs: []string{"vm.yaml:13: spec.template.spec.volumes[0].cloudInitNoCloud: sets userData and secretRef: give at most one source of userData"}},
		{name: "two network data sources", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkData: \"version: 2\\n\"\n    networkDataBase64: dmVyc2lvbjogMgo=\n"),
			errs: []string{"sets networkData and networkDataBase64"}},
		{name: "bad base64", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    userDataBase64: '!!'\n"),
			errs: []string{"spec.template.spec.volumes[0].cloudInitNoCloud.userDataBase64: not base64"}},
		{name: "no data", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud: {}\n"),
			errs: []string{"spec.template.spec.volumes[0].cloudInitNoCloud: needs user data or network data"}},
		{name: "secret without the key", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    secretRef: {name: ud}\n", secret("ud", "user-data", "x")),
			errs: []string{`spec.template.spec.volumes[0].cloudInitNoCloud.secretRef.name: secret "ud" in namespace "ns" has no key "userdata" or "userData" (it has "user-data")`}},
		{name: "secret missing", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkDataSecretRef: {name: nd}\n"),
			errs: []string{`vm.yaml:14: spec.template.spec.volumes[0].cloudInitNoCloud.networkDataSecretRef.name: secret "nd" not found in namespace "ns"`}},
		{name: "secret name empty", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    secretRef: {name: \"\"}\n"),
			errs: []string{"cloudInitNoCloud.secretRef.name: required"}},
		{name: "first volume wins", doc: vm("volumes:\n- name: a\n  cloudInitConfigDrive:\n    userData: \"#!/bin/sh\\n\"\n- name: b\n  cloudInitNoCloud:\n    userData: \"#cloud-config\\n\"\n"),
			warns: []string{"spec.template.spec.volumes[1].cloudInitNoCloud: ignored: only the first cloud-init volume (spec.template.spec.volumes[0].cloudInitConfigDrive) is used"},
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
				eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\n")
			}},
		{name: "inline over 2 KiB", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    userData: \"#!/bin/sh\\n" + big + "\\n\"\n"),
			warns: []string{"cloudInitNoCloud.userData: 2111 bytes: KubeVirt's API server refuses more than 2048 bytes inline"}},
		{name: "base64 over 2 KiB decoded", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud:\n    networkDataBase64: " + base64.StdEncoding.EncodeToString([]byte("version: 2\n"+big+"\n")) + "\n"),
			warns: []string{"cloudInitNoCloud.networkDataBase64: 2112 bytes decoded"}},
		{name: "no first-boot data", doc: vm("volumes:\n- name: root\n  containerDisk: {image: x}\n"),
			errs: []string{"spec.template.spec.volumes: no cloudInitNoCloud, cloudInitConfigDrive or sysprep volume"}},
	})
}

func TestIdentity(t *testing.T) {
	ci := "volumes:\n- name: ci\n  cloudInitNoCloud:\n    userData: \"#!/bin/sh\\n\"\n"
	long := strings.Repeat("a", 70)
	runCases(t, []fieldCase{
		{name: "VM: the controller's name-derived UUID", doc: vm(ci),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "instanceID", s.InstanceID, kubevirt.LegacyUUID("vm-1"))
				eq(t, "hostname", s.Hostname, "vm-1")
			}},
		{name: "firmware UUID", doc: strings.Replace(vm(ci), "devices: {}", "devices: {}\n        firmware: {uuid: 5d307ca9-b3ef-428c-8861-06e72d69f223}", 1),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "instanceID", s.InstanceID, "5d307ca9-b3ef-428c-8861-06e72d69f223")
			}},
		{name: "spec.hostname", doc: vm("hostname: web\n" + ci),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) { eq(t, "hostname", s.Hostname, "web") }},
		{name: "name cut at the first dot", doc: strings.Replace(vm(ci), "name: vm-1", "name: web.example", 1),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "hostname", s.Hostname, "web")
				eq(t, "metadata.name", r.Instance.Metadata.Name, "web.example")
			}},
		{name: "a name vminit cannot take", doc: strings.Replace(vm(ci), "name: vm-1", "name: "+long, 1),
			errs: []string{"vm.yaml:4: metadata.name: \"" + long + "\" is not a valid name"}},
		{name: "bare VMI: stable id, cluster instancetype first", doc: `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: db-0
  annotations:
    kubevirt.io/instancetype-name: u1.small
    kubevirt.io/cluster-instancetype-name: cx1.large
spec:
  domain:
    devices: {}
` + indent(ci, 2),
			opts: platform.Options{Namespace: "prod"},
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "instanceID", s.InstanceID, kubevirt.LegacyUUID("db-0"))
				eq(t, "metaData", s.CloudInit.MetaData, map[string]any{"instance-type": "cx1.large"})
				eq(t, "object", r.Object, "KubeVirt VirtualMachineInstance prod/db-0")
			}},
		{name: "VM instancetype on ConfigDrive", doc: strings.Replace(vm(strings.Replace(ci, "cloudInitNoCloud", "cloudInitConfigDrive", 1)), "spec:\n  template:", "spec:\n  instancetype: {name: u1.medium}\n  template:", 1),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "metaData", s.CloudInit.MetaData, map[string]any{"instance_id": "vm-1.ns", "instance_type": "u1.medium"})
			}},
		{name: "tagged devices", doc: strings.Replace(vm(strings.Replace(ci, "cloudInitNoCloud", "cloudInitConfigDrive", 1)), "devices: {}", `devices:
          interfaces:
          - {name: a, masquerade: {}, tag: front, pciAddress: "0000:02:01.0", macAddress: "52:54:00:00:00:01"}
          - {name: b, bridge: {}, tag: back}
          - {name: c, bridge: {}}
          hostDevices:
          - {name: h, deviceName: intel.com/qat, tag: hd}
          gpus:
          - {name: g, deviceName: nvidia.com/gpu, tag: gpu}`, 1),
			warns: []string{
				"interfaces[1].tag: left out of meta_data.json devices: KubeVirt reads the NIC's PCI address from the running domain",
				"hostDevices[0].tag: left out", "gpus[0].tag: left out"},
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq[any](t, "devices", s.CloudInit.MetaData["devices"], []any{map[string]any{"type": "nic", "bus": "pci", "address": "0000:02:01.0", "mac": "52:54:00:00:00:01", "tags": []any{"front"}}})
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
	runCases(t, []fieldCase{
		{name: "noCloud: one key per line, files in name order", doc: vm(ac("{noCloud: {}}")+nc, keys),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "keys", s.SSHAuthorizedKeys, []string{keyA, keyB, keyB})
			}},
		{name: "configDrive", doc: vm(ac("{configDrive: {}}")+cd, keys),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) { eq(t, "key count", len(s.SSHAuthorizedKeys), 3) }},
		{name: "noCloud needs a noCloud volume", doc: vm(ac("{noCloud: {}}")+cd, keys),
			errs: []string{"accessCredentials[0].sshPublicKey.propagationMethod.noCloud: needs a cloudInitNoCloud volume"}},
		{name: "configDrive needs a configDrive volume", doc: vm(ac("{configDrive: {}}")+nc, keys),
			errs: []string{"accessCredentials[0].sshPublicKey.propagationMethod.configDrive: needs a cloudInitConfigDrive volume"}},
		{name: "no propagation", doc: vm(ac("{}")+nc, keys),
			errs: []string{"accessCredentials[0].sshPublicKey.propagationMethod: required"}},
		{name: "guest agent is run time", doc: vm(ac("{qemuGuestAgent: {users: [fedora]}}")+"- userPassword:\n    source: {secret: {secretName: pw}}\n    propagationMethod: {qemuGuestAgent: {}}\n"+nc, keys),
			warns: []string{"propagationMethod.qemuGuestAgent: ignored: KubeVirt pushes these keys at run time", "accessCredentials[1].userPassword: ignored"},
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "keys", s.SSHAuthorizedKeys, []string(nil))
			}},
		{name: "secret missing", doc: vm(ac("{noCloud: {}}") + nc),
			errs: []string{`accessCredentials[0].sshPublicKey.source.secret.secretName: secret "keys" not found in namespace "ns"`}},
		{name: "not a key", doc: vm(ac("{noCloud: {}}")+nc, secret("keys", "k", "ssh-rsa garbage\n")),
			errs: []string{`spec.template.spec.accessCredentials[0].sshPublicKey.source.secret.secretName (key "k"): not an SSH public key`}},
	})
}

func TestIgnitionAnnotation(t *testing.T) {
	ann := func(cfg string) string {
		return strings.Replace(vm(""), "  template:\n", "  template:\n    metadata:\n      annotations:\n        kubevirt.io/ignitiondata: '"+cfg+"'\n", 1)
	}
	runCases(t, []fieldCase{
		{name: "spec 3 on the config drive", doc: ann(`{"ignition": {"version": "3.2.0"}}`),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "agent", s.Agent, spec.AgentIgnition)
				eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
				eq(t, "config", s.Ignition.Config, `{"ignition": {"version": "3.2.0"}}`)
			}},
		{name: "spec 2.2 translated", doc: ann(`{"ignition": {"version": "2.2.0"}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["` + keyA + `"]}]}}`),
			warns: []string{"Ignition spec 2.2.0 translated to spec 3"},
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				if !strings.Contains(s.Ignition.Config, `"version":"3.0.0"`) || !strings.Contains(s.Ignition.Config, keyA) {
					t.Errorf("config %s", s.Ignition.Config)
				}
			}},
		{name: "not JSON, one line", doc: ann(`{"ignition": }`),
			errs: []string{`vm.yaml:10: spec.template.metadata.annotations["kubevirt.io/ignitiondata"]: line 1, column 14 of its text: not JSON: invalid character '}'`}},
		{name: "spec 2 networkd has no spec 3", doc: ann(`{"ignition": {"version": "2.2.0"}, "networkd": {"units": [{"name": "a.network", "contents": "x"}]}}`),
			errs: []string{"cannot be translated to spec 3"}},
		{name: "and a cloud-init volume", doc: strings.Replace(ann(`{"ignition": {"version": "3.0.0"}}`), "devices: {}\n", "devices: {}\n      volumes:\n      - name: ci\n        cloudInitNoCloud: {userData: \"#!/bin/sh\\n\"}\n", 1),
			errs: []string{`annotations["kubevirt.io/ignitiondata"]: the VM also has the cloud-init volume spec.template.spec.volumes[0].cloudInitNoCloud`}},
	})
}

func TestSysprep(t *testing.T) {
	const answer = "<?xml version=\"1.0\"?>\n<unattend xmlns=\"urn:schemas-microsoft-com:unattend\"/>\n"
	cm := func(kv ...string) string {
		s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: answers\n  namespace: ns\ndata:\n"
		for i := 0; i+1 < len(kv); i += 2 {
			s += fmt.Sprintf("  %s: %q\n", kv[i], kv[i+1])
		}
		return s
	}
	sp := "volumes:\n- name: sp\n  sysprep: {configMap: {name: answers}}\n"
	runCases(t, []fieldCase{
		{name: "Windows: the disc alone", doc: vm(sp, cm("unattend.xml", answer, "setup.ps1", "echo")),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				if r.Instance != nil || r.Spec != nil {
					t.Errorf("a Windows VM has no spec: %s", r.Spec)
				}
				eq(t, "label", r.Sysprep.Label, "unattendCD")
				eq(t, "files", len(r.Sysprep.Files), 2)
				eq(t, "first file", r.Sysprep.Files[1].Path, "unattend.xml")
				eq(t, "content", string(r.Sysprep.Files[1].Data), answer)
			}},
		{name: "secret, beside cloud-init", doc: vm("volumes:\n- name: sp\n  sysprep: {secret: {name: answers}}\n- name: ci\n  cloudInitNoCloud: {userData: \"#!/bin/sh\\n\"}\n", secret("answers", "Autounattend.XML", answer)),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "sysprep file", r.Sysprep.Files[0].Path, "Autounattend.XML")
				eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\n")
			}},
		{name: "no answer file", doc: vm(sp, cm("setup.ps1", "echo")),
			errs: []string{`spec.template.spec.volumes[0].sysprep.configMap.name: configmap "answers" has no autounattend.xml or unattend.xml key (it has setup.ps1)`}},
		{name: "malformed answer file", doc: vm(sp, cm("autounattend.xml", "<unattend><settings></unattend>")),
			errs: []string{"autounattend.xml is not well-formed XML", "line 1"}},
		{name: "two roots", doc: vm(sp, cm("autounattend.xml", "<a/><b/>")),
			errs: []string{"2 root elements"}},
		{name: "both kinds", doc: vm("volumes:\n- name: sp\n  sysprep: {configMap: {name: a}, secret: {name: b}}\n"),
			errs: []string{"sysprep: sets both configMap and secret"}},
		{name: "configmap missing", doc: vm(sp),
			errs: []string{`sysprep.configMap.name: configmap "answers" not found in namespace "ns"`}},
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
	runCases(t, []fieldCase{
		{name: "pool member 2", doc: pool + "---\n" + secret("ud-2", "userdata", "#!/bin/sh\necho 2\n"), opts: platform.Options{PoolIndex: 2},
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "name", r.Instance.Metadata.Name, "workers-2")
				eq(t, "instanceID", s.InstanceID, kubevirt.LegacyUUID("workers-2"))
				eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\necho 2\n")
			}},
		{name: "pool without appendIndex", doc: strings.Replace(pool, "appendIndexToSecretRefs: true", "appendIndexToSecretRefs: false", 1) + "---\n" + secret("ud", "userdata", "#!/bin/sh\n"), opts: platform.Options{PoolIndex: 1},
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "name", r.Instance.Metadata.Name, "workers-1")
			}},
		{name: "pool index past replicas", doc: pool, opts: platform.Options{PoolIndex: 3},
			errs: []string{"spec.replicas: the pool has 3 members; there is no member 3"}},
		{name: "v1alpha3 VM", doc: strings.Replace(vm("volumes:\n- name: ci\n  cloudInitNoCloud: {userData: \"#!/bin/sh\\n\"}\n"), "kubevirt.io/v1\n", "kubevirt.io/v1alpha3\n", 1),
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\n")
			}},
		{name: "v1alpha2 VMI", doc: `apiVersion: kubevirt.io/v1alpha2
kind: VirtualMachineInstance
metadata: {name: old}
spec:
  domain:
    devices:
      disks:
      - {type: file, cloudinit: {nocloud: {userDataBase64: IyEvYmluL3NoCg==}}}
      - {type: file, cloudinit: {nocloud: {userDataSecretRef: ignored}}}
`,
			check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\n")
				eq(t, "namespace", r.Object, "KubeVirt VirtualMachineInstance default/old")
			}},
		{name: "unknown field below the lenient VMI spec", doc: vm("volumes:\n- name: ci\n  cloudInitNoCloud: {userdata: x}\n"),
			errs: []string{"spec.template.spec.volumes[0].cloudInitNoCloud.userdata: unknown field"}},
		{name: "no template", doc: "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: a}\nspec: {}\n",
			errs: []string{"spec.template: required"}},
		{name: "no name", doc: "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {}\nspec: {domain: {devices: {}}}\n",
			errs: []string{"metadata.name: required"}},
	})
}

func TestRecognizes(t *testing.T) {
	for _, c := range []struct {
		apiVersion, kind string
		want             bool
	}{
		{"kubevirt.io/v1", "VirtualMachine", true}, {"kubevirt.io/v1alpha3", "VirtualMachineInstance", true},
		{"kubevirt.io/v1alpha2", "VirtualMachineInstance", true}, {"kubevirt.io/v1alpha2", "VirtualMachine", false},
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
