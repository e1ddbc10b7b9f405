package virtlet_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/virtlet"
	"github.com/vminit/vminit/spec"
)

const (
	keyA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl a@example.com"
	keyB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBJr6Yx5Wj7uGAGK3A3dbR4bXBE2Tb0R6wi3/3vMw8jQ b@example.com"
	// noNet is the warning of every pod without VirtletForceDHCPNetworkConfig.
	noNet = "no network configuration: Virtlet described the pod's CNI result"
)

// pod is a Virtlet VM pod vm-1 in namespace ns with the annotations
// (YAML lines, as under annotations:), the container's extra fields
// (indented as the container's) and the pod's volumes, and more documents.
func pod(anns, container, volumes string, more ...string) string {
	doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: vm-1\n  namespace: ns\n  annotations:\n    kubernetes.io/target-runtime: virtlet.cloud\n" +
		platformtest.Indent(anns, 4) + "spec:\n  containers:\n  - name: vm\n    image: virtlet.cloud/cirros\n" + platformtest.Indent(container, 4)
	if volumes != "" {
		doc += "  volumes:\n" + platformtest.Indent(volumes, 2)
	}
	for _, m := range more {
		doc += "---\n" + m
	}
	return doc
}

// object is a ConfigMap or Secret in ns with string data.
func object(kind, name string, kv ...string) string {
	field := "data"
	if kind == "Secret" {
		field = "stringData"
	}
	s := fmt.Sprintf("apiVersion: v1\nkind: %s\nmetadata:\n  name: %s\n  namespace: ns\n%s:\n", kind, name, field)
	for i := 0; i+1 < len(kv); i += 2 {
		s += fmt.Sprintf("  %s: %q\n", kv[i], kv[i+1])
	}
	return s
}

// userData reads the #cloud-config the conversion wrote.
func userData(t *testing.T, s *spec.Spec) map[string]any {
	t.Helper()
	if !strings.HasPrefix(s.CloudInit.UserData, "#cloud-config\n") {
		t.Fatalf("user data is no #cloud-config: %q", s.CloudInit.UserData)
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s.CloudInit.UserData), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func files(s *spec.Spec) map[string]string {
	out := map[string]string{}
	for _, f := range s.Files {
		out[f.Path] = fmt.Sprintf("%04o %s", uint32(*f.Mode), f.Data())
	}
	return out
}

func TestIdentityAndMetaData(t *testing.T) {
	platformtest.Run(t, []platformtest.Case{
		{Name: "defaults", Doc: pod("", "", ""), Warns: []string{noNet},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "instanceID", s.InstanceID, "vm-1.ns")
				platformtest.Eq(t, "hostname", s.Hostname, "vm-1")
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceNoCloud)
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "")
				platformtest.Eq(t, "object", r.Object, "Virtlet Pod ns/vm-1")
			}},
		{Name: "not marked for Virtlet", Doc: strings.Replace(pod("", "", ""), "virtlet.cloud\n", "other\n", 1),
			Warns: []string{`metadata.annotations["kubernetes.io/target-runtime"]: is not "virtlet.cloud"`}},
		{Name: "image type, any case", Doc: pod("VirtletCloudInitImageType: ConfigDrive\nVirtletForceDHCPNetworkConfig: \"true\"\n", "", ""),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
			}},
		{Name: "bad image type", Doc: pod("VirtletCloudInitImageType: iso\n", "", ""),
			Errs: []string{`vm.yaml:8: metadata.annotations["VirtletCloudInitImageType"]: "iso": want nocloud or configdrive`}},
		{Name: "meta-data override", Doc: pod("VirtletCloudInitMetaData: |\n  instance-id: foobar\n  local-hostname: web.example.com\n  availability-zone: z1\n  tags: [a]\n", "", ""), Warns: []string{noNet},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "instanceID", s.InstanceID, "foobar")
				platformtest.Eq(t, "hostname", s.Hostname, "web")
				platformtest.Eq(t, "fqdn", s.FQDN, "web.example.com")
				platformtest.Eq(t, "metaData", s.CloudInit.MetaData, map[string]any{"availability-zone": "z1", "tags": []any{"a"}})
			}},
		{Name: "meta-data keys", Doc: pod("VirtletCloudInitMetaData: |\n  instance-id: 12\n  public-keys: [x]\n", "", ""),
			Errs: []string{`metadata.annotations["VirtletCloudInitMetaData"]: instance-id: want a string`, "public-keys: give SSH keys with VirtletSSHKeys or VirtletSSHKeySource (Virtlet writes this meta-data key over theirs)"}},
		{Name: "meta-data not a mapping", Doc: pod("VirtletCloudInitMetaData: \"[a\"\n", "", ""),
			Errs: []string{`metadata.annotations["VirtletCloudInitMetaData"]: not a YAML mapping`}},
		{Name: "unknown annotation and flag values", Doc: pod("VirtletSSHKeysSource: secret/x\nVirtletForceDHCPNetworkConfig: \"yes\"\nVirtletCloudInitUserDataOverwrite: \"1\"\n", "", ""),
			Errs: []string{`metadata.annotations["VirtletSSHKeysSource"]: not an annotation Virtlet knows`,
				`metadata.annotations["VirtletForceDHCPNetworkConfig"]: "yes": want "true" or "false"`,
				`metadata.annotations["VirtletCloudInitUserDataOverwrite"]: "1": want "true" or "false"`}},
		{Name: "containers", Doc: strings.Replace(pod("VirtletForceDHCPNetworkConfig: \"true\"\n", "", ""), "  containers:\n", "  containers:\n  - name: first\n    image: virtlet.cloud/a\n", 1),
			Warns: []string{"spec.containers[1]: ignored: Virtlet runs one VM per pod, from the first container"}},
	})
}

func TestSSHKeys(t *testing.T) {
	keys := object("Secret", "keys", "authorized_keys", keyB+"\n", "admin", keyA+"\n")
	platformtest.Run(t, []platformtest.Case{
		{Name: "annotation: one per line, trimmed", Doc: pod("VirtletSSHKeys: |\n  "+keyA+"\n\n     "+keyB+"   \n", "", ""), Warns: []string{noNet},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "keys", s.SSHAuthorizedKeys, []string{keyA, keyB})
			}},
		{Name: "source first, default key", Doc: pod("VirtletSSHKeySource: secret/keys\nVirtletSSHKeys: "+keyA+"\n", "", "", keys), Warns: []string{noNet},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "keys", s.SSHAuthorizedKeys, []string{keyB, keyA})
			}},
		{Name: "configmap with a key", Doc: pod("VirtletSSHKeySource: configmap/cm/admin\n", "", "", object("ConfigMap", "cm", "admin", keyA)), Warns: []string{noNet},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "keys", s.SSHAuthorizedKeys, []string{keyA})
			}},
		{Name: "overwrite drops the source's keys", Doc: pod("VirtletSSHKeySource: secret/keys\nVirtletSSHKeys: "+keyA+"\nVirtletCloudInitUserDataOverwrite: \"true\"\n", "", "", keys), Warns: []string{noNet},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "keys", s.SSHAuthorizedKeys, []string{keyA})
			}},
		{Name: "bad references", Doc: pod("VirtletSSHKeySource: pod/keys\n", "", ""),
			Errs: []string{`"pod/keys": the kind is configmap or secret, not "pod"`}},
		{Name: "bad form", Doc: pod("VirtletSSHKeySource: secret\n", "", ""),
			Errs: []string{`"secret": want configmap/NAME[/KEY] or secret/NAME[/KEY]`}},
		{Name: "missing key", Doc: pod("VirtletSSHKeySource: secret/keys/nope\n", "", "", keys),
			Errs: []string{`metadata.annotations["VirtletSSHKeySource"]: secret "keys" in namespace "ns" has no key "nope" (it has "admin", "authorized_keys")`}},
		{Name: "missing object", Doc: pod("VirtletSSHKeySource: configmap/nope\n", "", ""),
			Errs: []string{`configmap "nope" not found in namespace "ns"`}},
		{Name: "not a key", Doc: pod("VirtletSSHKeys: ssh-rsa nope\n", "", ""),
			Errs: []string{`vm.yaml:8: metadata.annotations["VirtletSSHKeys"]: not an SSH public key`}},
	})
}

func TestUserDataMerge(t *testing.T) {
	src := object("ConfigMap", "ud", "runcmd", "- echo from-source\n", "write_files", "- path: /a\n  content: a\n", "ntp", "enabled: true\nservers: [a]\n", "timezone", "UTC")
	ann := "VirtletCloudInitUserDataSource: configmap/ud\nVirtletCloudInitUserData: |\n  runcmd:\n  - echo from-annotation\n  ntp:\n    servers: [b]\n  timezone: Europe/Berlin\n"
	platformtest.Run(t, []platformtest.Case{
		{Name: "source, then annotation: maps merged, lists appended, scalars replaced", Doc: pod(ann, "", "", src), Warns: []string{noNet},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				ud := userData(t, s)
				platformtest.Eq(t, "runcmd", ud["runcmd"], any([]any{"echo from-source", "echo from-annotation"}))
				platformtest.Eq(t, "ntp", ud["ntp"], any(map[string]any{"enabled": true, "servers": []any{"a", "b"}}))
				platformtest.Eq(t, "timezone", ud["timezone"], any("Europe/Berlin"))
				platformtest.Eq(t, "merge_how", ud["merge_how"], any("dict(no_replace,recurse_array,recurse_str)+list(prepend)+str()"))
			}},
		{Name: "overwrite: the annotation alone", Doc: pod(ann+"VirtletCloudInitUserDataOverwrite: \"true\"\n", "", "", src), Warns: []string{noNet},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				ud := userData(t, s)
				platformtest.Eq(t, "runcmd", ud["runcmd"], any([]any{"echo from-annotation"}))
				if _, ok := ud["write_files"]; ok {
					t.Error("the source's write_files survived Overwrite")
				}
			}},
		{Name: "a source key that is not YAML", Doc: pod("VirtletCloudInitUserDataSource: secret/ud\n", "", "", object("Secret", "ud", "script", "#!/bin/sh\n: [\n")),
			Errs: []string{`metadata.annotations["VirtletCloudInitUserDataSource"]: secret "ud": key "script" is not YAML, so it cannot be a user-data key (Virtlet dropped it silently`}},
		{Name: "annotation not YAML", Doc: pod("VirtletCloudInitUserData: \"{a\"\n", "", ""),
			Errs: []string{`metadata.annotations["VirtletCloudInitUserData"]: not a YAML mapping`}},
		{Name: "encoding without a source key", Doc: pod("VirtletCloudInitUserDataSourceEncoding: base64\n", "", ""),
			Warns: []string{noNet, `"base64" has no effect without VirtletCloudInitUserDataSourceKey`}},
		{Name: "source with a kind/name/key", Doc: pod("VirtletCloudInitUserDataSource: configmap/ud/x\n", "", "", src),
			Errs: []string{`"configmap/ud/x": want configmap/NAME or secret/NAME`}},
	})
}

func TestWholeUserData(t *testing.T) {
	script := "#!/bin/sh\necho hi\n"
	src := object("Secret", "ud", "plain", script, "b64", base64.StdEncoding.EncodeToString([]byte(script)), "cc", "#cloud-config\nruncmd: [echo cc]\n", "bad", "!!")
	env := "env:\n- {name: A, value: b}\nvolumeMounts:\n- {name: data, mountPath: /data}\n- {name: cfg, mountPath: /etc/app}\n"
	vols := "- name: data\n  flexVolume: {driver: virtlet/flexvolume_driver, options: {type: qcow2}}\n- name: cfg\n  configMap: {name: cfg}\n"
	cfg := object("ConfigMap", "cfg", "app.conf", "x")
	mount := "if ! mountpoint /data; then mkdir -p /data && mount /dev/vdc1 /data; fi"
	platformtest.Run(t, []platformtest.Case{
		{Name: "source key, plain: the shebang survives", Doc: pod("VirtletCloudInitUserDataSource: secret/ud\nVirtletCloudInitUserDataSourceKey: plain\n", "", "", src), Warns: []string{noNet},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "userData", s.CloudInit.UserData, script)
				platformtest.Eq(t, "userDataOnly", s.CloudInit.UserDataOnly, true)
			}},
		{Name: "source key, base64", Doc: pod("VirtletCloudInitUserDataSource: secret/ud\nVirtletCloudInitUserDataSourceKey: b64\nVirtletCloudInitUserDataSourceEncoding: base64\n", "", "", src), Warns: []string{noNet},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "userData", s.CloudInit.UserData, script)
			}},
		{Name: "source key, not base64", Doc: pod("VirtletCloudInitUserDataSource: secret/ud\nVirtletCloudInitUserDataSourceKey: bad\nVirtletCloudInitUserDataSourceEncoding: base64\n", "", "", src),
			Errs: []string{`metadata.annotations["VirtletCloudInitUserDataSourceKey"]: key "bad" is not base64`}},
		{Name: "source key, bad encoding", Doc: pod("VirtletCloudInitUserDataSource: secret/ud\nVirtletCloudInitUserDataSourceKey: plain\nVirtletCloudInitUserDataSourceEncoding: gzip\n", "", "", src),
			Errs: []string{`metadata.annotations["VirtletCloudInitUserDataSourceEncoding"]: "gzip": want plain or base64`}},
		{Name: "source key missing", Doc: pod("VirtletCloudInitUserDataSource: secret/ud\nVirtletCloudInitUserDataSourceKey: nope\n", "", "", src),
			Errs: []string{`metadata.annotations["VirtletCloudInitUserDataSourceKey"]: secret "ud" in namespace "ns" has no key "nope"`}},
		{Name: "source key without a source", Doc: pod("VirtletCloudInitUserDataSourceKey: plain\n", "", ""),
			Errs: []string{`metadata.annotations["VirtletCloudInitUserDataSourceKey"]: needs VirtletCloudInitUserDataSource`}},
		{Name: "a whole #cloud-config joins the env, files and mounts", Doc: pod("VirtletCloudInitUserDataSource: secret/ud\nVirtletCloudInitUserDataSourceKey: cc\nVirtletForceDHCPNetworkConfig: \"true\"\n", env, vols, src, cfg),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "#cloud-config\nruncmd: [echo cc]\n")
				platformtest.Eq(t, "userDataOnly", s.CloudInit.UserDataOnly, false)
				platformtest.Eq(t, "files", files(s), map[string]string{
					"/etc/app/app.conf": "0644 x", "/etc/cloud/environment": "0644 A=b\n", "/etc/cloud/mount-volumes.sh": "0755 #!/bin/sh\n" + mount + "\n"})
				platformtest.Eq(t, "mounts", len(s.Mounts), 1)
			}},
		{Name: "script: alone, the marker replaced, the rest left out", Doc: pod("VirtletCloudInitUserDataScript: |\n  #!/bin/sh\n  echo start\n  @virtlet-mount-script@\nVirtletCloudInitUserData: \"a: 1\"\nVirtletForceDHCPNetworkConfig: \"true\"\n", env, vols, cfg),
			Warns: []string{`metadata.annotations["VirtletCloudInitUserData"]: ignored: VirtletCloudInitUserDataScript is the whole user data`,
				`metadata.annotations["VirtletCloudInitUserDataScript"]: the user data is this script alone, as in Virtlet: a guest without #cloud-config and MIME support (CirrOS) runs it as is, so nothing generated joins it and spec.volumes[1].configMap, spec.containers[0].env are not written`},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "userData", s.CloudInit.UserData, "#!/bin/sh\necho start\n#!/bin/sh\n"+mount+"\n\n")
				platformtest.Eq(t, "userDataOnly", s.CloudInit.UserDataOnly, true)
				platformtest.Eq(t, "files", len(s.Files), 0)
				platformtest.Eq(t, "mounts", len(s.Mounts), 0)
			}},
		{Name: "script without the marker", Doc: pod("VirtletCloudInitUserDataScript: \"#!/bin/sh\\n\"\nVirtletForceDHCPNetworkConfig: \"true\"\n", "volumeMounts:\n- {name: data, mountPath: /data}\n", vols),
			Warns: []string{"has no @virtlet-mount-script@: the flexvolumes are not mounted"}},
	})
}

func TestEnvAndVolumes(t *testing.T) {
	dhcp := "VirtletForceDHCPNetworkConfig: \"true\"\n"
	platformtest.Run(t, []platformtest.Case{
		{Name: "env quoted", Doc: pod(dhcp, "env:\n- {name: PLAIN, value: a.b/c:1}\n- {name: SPACE, value: hello world}\n- {name: QUOTE, value: \"it's \\\"x\\\" $HOME `id`\"}\n- {name: EMPTY, value: \"\"}\n- name: FROM_CM\n  valueFrom: {configMapKeyRef: {name: cm, key: k}}\n- name: FROM_SECRET\n  valueFrom: {secretKeyRef: {name: s, key: k}}\n", "",
			object("ConfigMap", "cm", "k", "v 1"), object("Secret", "s", "k", "v2")),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "environment", files(s)["/etc/cloud/environment"], "0644 PLAIN=a.b/c:1\nSPACE='hello world'\nQUOTE='it'\\''s \"x\" $HOME `id`'\nEMPTY=''\nFROM_CM='v 1'\nFROM_SECRET=v2\n")
			}},
		{Name: "env that cannot be known or written", Doc: pod(dhcp, "env:\n- name: NODE\n  valueFrom: {fieldRef: {fieldPath: spec.nodeName}}\n- {name: NL, value: \"a\\nb\"}\n- name: GONE\n  valueFrom: {secretKeyRef: {name: s, key: k}}\n", ""),
			Errs: []string{"spec.containers[0].env[0].valueFrom: not supported: only configMapKeyRef and secretKeyRef are known before the pod runs",
				"spec.containers[0].env[1]: the value has a newline or NUL, which an environment file cannot hold (Virtlet writes it unquoted: its next line becomes a line of the file of its own)",
				`spec.containers[0].env[2].valueFrom: secret "s" not found in namespace "ns"`}},
		{Name: "configmap and secret mounts", Doc: pod(dhcp, "volumeMounts:\n- {name: a, mountPath: /etc/a}\n- {name: b, mountPath: /etc/b}\n- {name: c, mountPath: /etc/c}\n",
			"- name: a\n  configMap: {name: cm}\n- name: b\n  secret: {secretName: s, defaultMode: 0600}\n- name: c\n  configMap:\n    name: cm\n    defaultMode: 0640\n    items:\n    - {key: k, path: sub/renamed}\n    - {key: bin, path: bin, mode: 0755}\n",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: ns}\ndata: {k: v}\nbinaryData: {bin: AAEC}\n", object("Secret", "s", "t", "secret\n")),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				got := map[string]string{}
				for _, f := range s.Files {
					got[f.Path] = fmt.Sprintf("%04o %q %s", uint32(*f.Mode), f.Data(), f.ContentBase64)
				}
				platformtest.Eq(t, "files", got, map[string]string{
					"/etc/a/k": `0644 "v" `, "/etc/a/bin": `0644 "\x00\x01\x02" AAEC`, "/etc/b/t": `0600 "secret\n" `,
					"/etc/c/sub/renamed": `0640 "v" `, "/etc/c/bin": `0755 "\x00\x01\x02" AAEC`})
			}},
		{Name: "mount problems", Doc: pod(dhcp, "volumeMounts:\n- {name: nope, mountPath: /x}\n- {name: c, mountPath: /c}\n- {name: f, mountPath: /f}\n- {name: u, mountPath: /u}\n- {name: e, mountPath: /e}\n",
			"- name: c\n  configMap: {name: cm, items: [{key: missing, path: m}]}\n- name: f\n  flexVolume: {driver: virtlet/flexvolume_driver, options: {type: nfs}}\n- name: u\n  flexVolume: {driver: virtlet/flexvolume_driver, options: {capacity: 1024MB}}\n- name: e\n  emptyDir: {}\n",
			object("ConfigMap", "cm", "k", "v")),
			Errs: []string{`spec.containers[0].volumeMounts[0].name: no volume "nope" in spec.volumes`,
				`spec.volumes[0].configMap.items[0].key: configmap "cm" in namespace "ns" has no key "missing"`,
				`spec.volumes[1].flexVolume.options.type: "nfs": Virtlet's flexvolumes are qcow2, raw or ceph (Virtlet refuses to start the pod: its CreateContainer fails)`,
				// Virtlet's ScanFlexVolumes defaults no type: "need to specify 'type'".
				`spec.volumes[2].flexVolume.options.type: required: Virtlet's flexvolumes are qcow2, raw or ceph, and Virtlet assumes none (Virtlet refuses to start the pod: its CreateContainer fails)`}},
		{Name: "flexvolumes and raw devices", Doc: pod(dhcp, "volumeMounts:\n- {name: q, mountPath: /q}\n- {name: r, mountPath: /r}\n- {name: e, mountPath: /e}\n- {name: g, mountPath: /g}\nvolumeDevices:\n- {name: blk, devicePath: /dev/blk}\n",
			"- name: q\n  flexVolume: {driver: virtlet/flexvolume_driver, options: {type: qcow2}}\n- name: r\n  flexVolume: {driver: virtlet/flexvolume_driver, options: {type: raw, path: /dev/vg/x}}\n- name: e\n  emptyDir: {}\n- name: blk\n  persistentVolumeClaim: {claimName: c}\n- name: g\n  flexVolume: {driver: other/driver}\n"),
			// Another driver's flexvolume is a directory on the node to
			// Virtlet, as an emptyDir is (GetFileSystemVolumes shares
			// both over 9p): ignored alike, and no vdX taken.
			Warns: []string{"spec.containers[0].volumeMounts[2]: ignored: only ConfigMap, Secret and Virtlet flexvolume mounts reach the VM",
				"spec.containers[0].volumeMounts[3]: ignored: only ConfigMap, Secret and Virtlet flexvolume mounts reach the VM",
				"spec.containers[0].volumeDevices: ignored: Virtlet links raw block volumes at the path the running domain gives them"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "mounts", s.Mounts, []spec.Mount{
					{Device: "/dev/vdc1", Path: "/q", Options: []string{"defaults", "nofail"}},
					{Device: "/dev/vdd", Path: "/r", Options: []string{"defaults", "nofail"}}})
				platformtest.Eq(t, "script", files(s)["/etc/cloud/mount-volumes.sh"], "0755 #!/bin/sh\nif ! mountpoint /q; then mkdir -p /q && mount /dev/vdc1 /q; fi\nif ! mountpoint /r; then mkdir -p /r && mount /dev/vdd /r; fi\n")
			}},
		{Name: "files from a data source", Doc: pod(dhcp+"VirtletFilesFromDataSource: secret/f\n", "", "",
			object("Secret", "f", "a", base64.StdEncoding.EncodeToString([]byte("A\n")), "a_path", "/etc/a", "b", "plain text", "b_path", "etc/../etc/b", "b_encoding", "plain")),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "files", files(s), map[string]string{"/etc/a": "0644 A\n", "/etc/b": "0644 plain text"})
			}},
		{Name: "files from a data source: problems", Doc: pod(dhcp+"VirtletFilesFromDataSource: configmap/f\n", "", "",
			object("ConfigMap", "f", "a", "!!", "a_path", "/a", "b", "x", "c", "x", "c_path", "/c", "c_encoding", "gzip")),
			Errs: []string{`configmap "f": key "a" is not base64 (set "a_encoding" to plain for text)`, `configmap "f": key "b" has no "b_path" giving its path`, `configmap "f": c_encoding is "gzip"; want base64 or plain`}},
		{Name: "no container", Doc: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: {kubernetes.io/target-runtime: virtlet.cloud, VirtletForceDHCPNetworkConfig: \"true\"}\nspec:\n  containers: []\n",
			Errs: []string{"spec.containers: required: the VM's container"}},
	})
}

func TestRecognizes(t *testing.T) {
	if !virtlet.Recognizes("v1", "Pod") || virtlet.Recognizes("v1", "Secret") || virtlet.Recognizes("apps/v1", "Pod") {
		t.Error("Recognizes")
	}
}
