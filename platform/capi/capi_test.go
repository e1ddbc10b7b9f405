package capi_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/capi"
	"github.com/vminit/vminit/spec"
)

const keyA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl a@example.com"

// kc is a v1beta2 KubeadmConfig md-0 in namespace ns joining a cluster,
// with more spec fields (indented as spec's) and more documents.
func kc(fields string, more ...string) string {
	doc := "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata:\n  name: md-0\n  namespace: ns\nspec:\n" +
		"  joinConfiguration:\n    discovery:\n      bootstrapToken: {apiServerEndpoint: \"192.0.2.1:6443\", token: abcdef.0123456789abcdef, unsafeSkipCAVerification: true}\n" +
		platformtest.Indent(fields, 2)
	for _, m := range more {
		doc += "---\n" + m
	}
	return doc
}

const ign = "format: ignition\n"

func secret(name string, kv ...string) string {
	s := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: ns\ndata:\n", name)
	for i := 0; i+1 < len(kv); i += 2 {
		s += fmt.Sprintf("  %s: %s\n", kv[i], base64.StdEncoding.EncodeToString([]byte(kv[i+1])))
	}
	return s
}

func gz(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.String()
}

func fileMap(s *spec.Spec) map[string]string {
	out := map[string]string{}
	for _, f := range s.Files {
		out[f.Path] = fmt.Sprintf("%04o %s %v %s", uint32(*f.Mode), f.Owner, f.Append, f.Data())
	}
	return out
}

func shells(cs []spec.Command) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Shell)
	}
	return out
}

func userDoc(t *testing.T, s *spec.Spec) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s.CloudInit.UserData), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFiles(t *testing.T) {
	platformtest.Run(t, []platformtest.Case{
		{Name: "content, encodings, owner, permissions, append", Doc: kc(`files:
- {path: /etc/plain, content: "plain\n", owner: "root:adm", permissions: "0640"}
- {path: /etc/b64, content: YjY0Cg==, encoding: base64}
- {path: /etc/gzb64, content: `+base64.StdEncoding.EncodeToString([]byte(gz("gz+b64\n")))+`, encoding: gzip+base64}
- {path: /etc/gz, contentFrom: {secret: {name: s, key: gz}}, encoding: gzip}
- {path: /etc/from, contentFrom: {secret: {name: s, key: k}}, append: true}
`, secret("s", "gz", gz("gzip\n"), "k", "from secret\n")),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				got := fileMap(s)
				for p, want := range map[string]string{
					"/etc/plain": "0640 root:adm false plain\n", "/etc/b64": "0644  false b64\n", "/etc/gzb64": "0644  false gz+b64\n",
					"/etc/gz": "0644  false gzip\n", "/etc/from": "0644  true from secret\n",
				} {
					platformtest.Eq(t, p, got[p], want)
				}
			}},
		{Name: "problems", Doc: kc(`files:
- {path: /a, content: x, contentFrom: {secret: {name: s, key: k}}}
- {path: /b, contentFrom: {secret: {name: nope, key: k}}}
- {path: /c, contentFrom: {secret: {name: s, key: nope}}}
- {path: /d, content: "!!", encoding: base64}
- {path: /e, content: plain, encoding: gzip}
- {path: /f, content: x, permissions: "0999"}
- {path: /g, content: "{{ ds.meta_data.hostname }}", contentFormat: Template}
- {path: /h, content: x, encoding: rot13}
`, secret("s", "k", "v")),
			Errs: []string{"spec.files[0]: sets both content and contentFrom",
				`spec.files[1].contentFrom.secret.name: secret "nope" not found in namespace "ns"`,
				`spec.files[2].contentFrom.secret.key: secret "s" in namespace "ns" has no key "nope"`,
				"spec.files[3].encoding: illegal base64", "spec.files[4].encoding: not gzip",
				`spec.files[5].permissions: "0999": want an octal mode`,
				"spec.files[6].contentFormat: not supported: Template content is rendered by Cluster API's controller",
				`spec.files[7].encoding: "rot13": want base64, gzip or gzip+base64`}},
	})
}

func TestKubeadm(t *testing.T) {
	initCfg := "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata: {name: cp-0}\nspec:\n" +
		"  clusterConfiguration:\n    certificateValidityPeriodDays: 365\n    apiServer: {extraArgs: [{name: audit-log-maxage, value: \"30\"}]}\n" +
		"  initConfiguration:\n    nodeRegistration: {name: cp-0}\n  verbosity: 5\n"
	platformtest.Run(t, []platformtest.Case{
		{Name: "join: config, commands and the sentinel in CAPI's order", Doc: kc("preKubeadmCommands: [echo pre1, echo pre2]\npostKubeadmCommands: [echo post]\nbootCommands: [echo boot]\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "commands", shells(s.Commands), []string{"echo pre1", "echo pre2",
					"kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && echo success > /run/cluster-api/bootstrap-success.complete", "echo post"})
				platformtest.Eq(t, "bootCommands", shells(s.BootCommands), []string{"echo boot"})
				f := fileMap(s)
				platformtest.Eq(t, "join config", f[capi.JoinConfigPath], "0640 root:root false ---\napiVersion: kubeadm.k8s.io/v1beta4\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 192.0.2.1:6443\n    token: abcdef.0123456789abcdef\n    unsafeSkipCAVerification: true\nkind: JoinConfiguration\n")
				if !strings.HasPrefix(f["/run/cluster-api/placeholder"], "0640 root:root false This placeholder file") {
					t.Errorf("placeholder %q", f["/run/cluster-api/placeholder"])
				}
				platformtest.Eq(t, "hostname", s.Hostname, "md-0")
				platformtest.Eq(t, "object", r.Object, "Cluster API KubeadmConfig ns/md-0")
			}},
		{Name: "init: cluster and init configuration, version, verbosity", Doc: initCfg, Opts: platform.Options{KubernetesVersion: "v1.35.1"},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "kubeadm", shells(s.Commands), []string{"kubeadm init --config /run/kubeadm/kubeadm.yaml --v 5 && echo success > /run/cluster-api/bootstrap-success.complete"})
				cfg := fileMap(s)[capi.InitConfigPath]
				for _, want := range []string{"kind: ClusterConfiguration", "kubernetesVersion: v1.35.1", "certificateValidityPeriod: 8760h0m0s", "kind: InitConfiguration", "name: cp-0", "name: audit-log-maxage"} {
					if !strings.Contains(cfg, want) {
						t.Errorf("kubeadm.yaml lacks %q:\n%s", want, cfg)
					}
				}
				if strings.Contains(cfg, "Days") {
					t.Errorf("CAPI's days left in kubeadm's v1beta4:\n%s", cfg)
				}
			}},
		{Name: "default version", Doc: initCfg,
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				if !strings.Contains(fileMap(s)[capi.InitConfigPath], "kubernetesVersion: "+capi.DefaultKubernetesVersion) {
					t.Error("no default version")
				}
			}},
		{Name: "init and join", Doc: strings.Replace(initCfg, "  verbosity: 5\n", "  joinConfiguration: {nodeRegistration: {name: x}}\n", 1),
			Warns: []string{"spec.joinConfiguration: not used: the object also has an init configuration"}},
		{Name: "neither: a join, which needs discovery", Doc: "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata: {name: x}\nspec: {files: [{path: /a, content: b}]}\n",
			Errs: []string{"vm.yaml:4: spec.joinConfiguration.discovery: the machine of KubeadmConfig \"x\" joins its cluster, and kubeadm join has no bootstrapToken.apiServerEndpoint"}},
		{Name: "Ignition: /etc/kubeadm.yml, the sentinel's directory made", Doc: kc(ign + "preKubeadmCommands: [echo pre]\npostKubeadmCommands: [echo post]\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "agent", s.Agent, spec.AgentIgnition)
				platformtest.Eq(t, "variant", s.Ignition.Variant, spec.VariantFlatcar)
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
				platformtest.Eq(t, "commands", shells(s.Commands), []string{"echo pre",
					"kubeadm join --config /etc/kubeadm.yml && mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete", "echo post"})
				f := fileMap(s)
				if _, ok := f[capi.IgnitionConfigPath]; !ok || len(f) != 1 {
					t.Errorf("files %v", f)
				}
			}},
		{Name: "format", Doc: kc("format: shell\n"), Errs: []string{`spec.format: "shell": want cloud-config or ignition`}},
		{Name: "ignition options with cloud-config", Doc: kc("ignition: {containerLinuxConfig: {additionalConfig: \"a: b\"}}\n"),
			Errs: []string{`vm.yaml:10: spec.ignition: set with format "cloud-config": the ignition options apply only to format: ignition`}},
	})
}

func TestUsersNTPMounts(t *testing.T) {
	t.Run("cloud-config", func(t *testing.T) {
		platformtest.Run(t, []platformtest.Case{
			{Name: "users", Doc: kc(`users:
- {name: capv, gecos: "Cluster API admin", groups: "wheel, docker", homeDir: /home/c, shell: /bin/bash, primaryGroup: capv, sudo: "ALL=(ALL) NOPASSWD:ALL", lockPassword: false, passwd: "$6$a$b", sshAuthorizedKeys: ["`+keyA+`"]}
- {name: ops, passwdFrom: {secret: {name: pw, key: hash}}}
- {name: old, inactive: true}
`, secret("pw", "hash", "$6$salt$hash\n")),
				Warns: []string{"spec.users[2].inactive: the account is locked instead", "spec.users[1].lockPassword: unset: the password is locked, as cloud-init's default"},
				Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
					f, tr := false, true
					platformtest.Eq(t, "users", s.Users, []spec.User{
						{Name: "capv", Gecos: "Cluster API admin", Groups: []string{"wheel", "docker"}, HomeDir: "/home/c", Shell: "/bin/bash", PrimaryGroup: "capv",
							Sudo: "ALL=(ALL) NOPASSWD:ALL", LockPassword: &f, PasswordHash: "$6$a$b", SSHAuthorizedKeys: []string{keyA}},
						{Name: "ops", PasswordHash: "$6$salt$hash", LockPassword: &tr},
						{Name: "old", LockPassword: &tr}})
				}},
			{Name: "user problems", Doc: kc("users:\n- {name: a, passwd: x, passwdFrom: {secret: {name: pw, key: k}}}\n- {name: b, passwdFrom: {secret: {name: nope, key: k}}}\n"),
				Errs: []string{"spec.users[0]: sets both passwd and passwdFrom", `spec.users[1].passwdFrom.secret.name: secret "nope" not found`}},
			{Name: "ntp and mounts", Doc: kc("ntp: {enabled: true, servers: [a.pool.ntp.org]}\nmounts:\n- [LABEL=data, /data, ext4, \"defaults,noatime\", \"0\", \"2\"]\n- [/dev/vdc, /srv]\n"),
				Warns: []string{"spec.mounts[0]: the dump and pass fields are ignored"},
				Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
					platformtest.Eq(t, "ntp", userDoc(t, s)["ntp"], any(map[string]any{"enabled": true, "servers": []any{"a.pool.ntp.org"}}))
					platformtest.Eq(t, "mounts", s.Mounts, []spec.Mount{{Device: "LABEL=data", Path: "/data", Type: "ext4", Options: []string{"defaults", "noatime"}}, {Device: "/dev/vdc", Path: "/srv"}})
				}},
			{Name: "short mount", Doc: kc("mounts: [[/dev/vdc]]\n"), Errs: []string{"spec.mounts[0]: want at least a device and a mount point"}},
		})
	})
	t.Run("ignition", func(t *testing.T) {
		platformtest.Run(t, []platformtest.Case{
			{Name: "ntp", Doc: kc(ign + "ntp: {enabled: true, servers: [a, b]}\n"),
				Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
					platformtest.Eq(t, "ntp.conf", fileMap(s)["/etc/ntp.conf"], "0644  false server a iburst\nserver b iburst\n")
					tr := true
					platformtest.Eq(t, "units", s.Units, []spec.Unit{{Name: "ntpd.service", Enabled: &tr}})
				}},
			{Name: "inactive", Doc: kc(ign + "users: [{name: a, inactive: true}]\n"), Errs: []string{"spec.users[0].inactive: Ignition cannot create an expired account"}},
			{Name: "a password stays usable, as CAPI's Ignition leaves it", Doc: kc(ign + "users: [{name: a, passwd: \"$6$s$h\"}]\n"),
				Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
					platformtest.Eq(t, "lockPassword", *s.Users[0].LockPassword, false)
				}},
		})
	})
}

func TestDiskSetup(t *testing.T) {
	disks := `diskSetup:
  partitions:
  - {device: /dev/sdb, layout: true, overwrite: true, tableType: gpt}
  - {device: /dev/sdc, diskLayout: [{percentage: 100, partitionType: LVM}]}
  - {device: /dev/nvme1n1, layout: false}
  filesystems:
  - {device: /dev/sdb, partition: "1", filesystem: ext4, label: etcd_disk, overwrite: false, extraOpts: ["-E", "lazy_itable_init=1"]}
  - {device: /dev/nvme1n1, partition: "2", filesystem: xfs, label: data}
  - {device: /dev/sdd, partition: none, filesystem: swap, label: swap}
mounts:
- [etcd_disk, /var/lib/etcd]
`
	platformtest.Run(t, []platformtest.Case{
		{Name: "cloud-config: disk_setup and fs_setup", Doc: kc("diskSetup:\n  partitions:\n  - {device: /dev/sdb, diskLayout: [{percentage: 30, partitionType: LinuxSwap}, {percentage: 70}], overwrite: false, tableType: mbr}\n  filesystems:\n  - {device: /dev/sdb, partition: auto, filesystem: ext4, label: data, replaceFS: ntfs, extraOpts: [-m, \"0\"]}\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				ud := userDoc(t, s)
				platformtest.Eq(t, "disk_setup", ud["disk_setup"], any(map[string]any{"/dev/sdb": map[string]any{"table_type": "mbr", "layout": []any{[]any{30, "82"}, 70}, "overwrite": false}}))
				platformtest.Eq(t, "fs_setup", ud["fs_setup"], any([]any{map[string]any{"device": "/dev/sdb", "partition": "auto", "filesystem": "ext4", "label": "data", "replace_fs": "ntfs", "extra_opts": []any{"-m", "0"}}}))
			}},
		{Name: "Ignition: storage.disks and storage.filesystems", Doc: kc(ign + disks),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				var cfg map[string]any
				if err := json.Unmarshal([]byte(s.Ignition.Config), &cfg); err != nil {
					t.Fatal(err)
				}
				want := `{"disks":[{"device":"/dev/sdb","partitions":[{"number":1,"sizeMiB":0,"startMiB":0,"wipePartitionEntry":true}],"wipeTable":true},` +
					`{"device":"/dev/sdc","partitions":[{"number":1,"sizeMiB":0,"startMiB":0,"typeGuid":"E6D6D379-F507-44C2-A23C-238F2A3DF928"}]},{"device":"/dev/nvme1n1"}],` +
					`"filesystems":[{"device":"/dev/sdb1","format":"ext4","label":"etcd_disk","options":["-E","lazy_itable_init=1"],"wipeFilesystem":false},` +
					`{"device":"/dev/nvme1n1p2","format":"xfs","label":"data"},{"device":"/dev/sdd","format":"swap","label":"swap"}]}`
				got, _ := json.Marshal(cfg["storage"])
				platformtest.Eq(t, "storage", string(got), want)
				platformtest.Eq(t, "mount", s.Mounts, []spec.Mount{{Device: "LABEL=etcd_disk", Path: "/var/lib/etcd"}})
			}},
		{Name: "Ignition: what it cannot express", Doc: kc(ign + `diskSetup:
  partitions:
  - {device: /dev/sdb, diskLayout: [{percentage: 50}, {percentage: 50}]}
  - {device: /dev/sdc, diskLayout: [{percentage: 100, partitionType: LinuxExtended}]}
  - {device: /dev/sdd, layout: true, tableType: mbr}
  filesystems:
  - {device: /dev/sdb, partition: auto, filesystem: ext4}
  - {device: /dev/sdb, partition: "1", filesystem: ext4, replaceFS: ntfs}
  - {filesystem: ext4}
`),
			Errs: []string{"spec.diskSetup.partitions[0].diskLayout: partitions in percent of the disk: Ignition sizes partitions in MiB",
				`spec.diskSetup.partitions[1].diskLayout[0].partitionType: "LinuxExtended": an MBR type`,
				`spec.diskSetup.filesystems[0].partition: "auto": cloud-init searches the disk`,
				"spec.diskSetup.filesystems[1].replaceFS: cloud-init's replace_fs",
				"spec.diskSetup.filesystems[2].device: required"}},
		{Name: "Ignition: MBR written as GPT", Doc: kc(ign + "diskSetup:\n  partitions:\n  - {device: /dev/sdd, layout: true, tableType: mbr}\n"),
			Warns: []string{`spec.diskSetup.partitions[0].tableType: "mbr": Ignition writes GPT partition tables only`}},
	})
}

func TestAdditionalConfig(t *testing.T) {
	add := func(cfg string) string {
		return kc(ign + "ignition:\n  containerLinuxConfig:\n    additionalConfig: |\n" + platformtest.Indent(cfg, 6))
	}
	platformtest.Run(t, []platformtest.Case{
		{Name: "a Container Linux Config, read as Butane flatcar", Doc: add("systemd:\n  units:\n  - name: a.service\n    enabled: true\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "butane", s.Ignition.Butane, "variant: flatcar\nversion: 1.0.0\nsystemd:\n  units:\n  - name: a.service\n    enabled: true")
			}},
		{Name: "Butane as given", Doc: add("variant: flatcar\nversion: 1.1.0\nstorage:\n  files:\n  - path: /etc/x\n    contents: {inline: y}\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "butane", s.Ignition.Butane, "variant: flatcar\nversion: 1.1.0\nstorage:\n  files:\n  - path: /etc/x\n    contents: {inline: y}")
			}},
		{Name: "strict", Doc: kc(ign + "ignition:\n  containerLinuxConfig:\n    strict: true\n    additionalConfig: \"systemd: {}\"\n"),
			Warns: []string{"strict: build with --strict"}},
		{Name: "CLC-only section", Doc: add("etcd:\n  name: x\n"), Errs: []string{"etcd: a Container Linux Config section that Butane's flatcar variant replaced"}},
		{Name: "CLC filesystem key", Doc: add("storage:\n  files:\n  - {filesystem: root, path: /a}\n"), Errs: []string{"storage.files[0].filesystem: a Container Linux Config key"}},
		{Name: "not YAML", Doc: add("a: [\n"), Errs: []string{"spec.ignition.containerLinuxConfig.additionalConfig: not YAML"}},
	})
}

func TestVersionsAndKinds(t *testing.T) {
	platformtest.Run(t, []platformtest.Case{
		{Name: "v1beta1 KubeadmConfig", Doc: `apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfig
metadata: {name: old}
spec:
  joinConfiguration:
    nodeRegistration:
      kubeletExtraArgs: {cloud-provider: external}
  useExperimentalRetryJoin: false
  postKubeadmCommands: [echo post]
`, Opts: discovery,
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				cfg := fileMap(s)[capi.JoinConfigPath]
				if !strings.Contains(cfg, "- name: cloud-provider\n    value: external") {
					t.Errorf("v1beta1's map of kubelet args not converted to v1beta2's list:\n%s", cfg)
				}
				platformtest.Eq(t, "last command", s.Commands[len(s.Commands)-1].Shell, "echo post")
			}},
		{Name: "v1beta1 template", Doc: "apiVersion: bootstrap.cluster.x-k8s.io/v1beta1\nkind: KubeadmConfigTemplate\nmetadata: {name: t}\nspec:\n  template:\n    spec:\n      joinConfiguration: {nodeRegistration: {name: node-1}}\n",
			Opts: with(discovery, func(o *platform.Options) { o.Machine = "t-1" }),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "object", r.Object, "Cluster API KubeadmConfigTemplate default/t")
			}},
		{Name: "template paths", Doc: "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfigTemplate\nmetadata: {name: t}\nspec:\n  template:\n    spec:\n      joinConfiguration: {nodeRegistration: {name: node-1}}\n      files: [{path: /a, content: x, permissions: \"9\"}]\n",
			Errs: []string{`vm.yaml:8: spec.template.spec.files[0].permissions: "9": want an octal mode`}},
		{Name: "unknown field", Doc: kc("preKubeadmCommand: [x]\n"), Errs: []string{"vm.yaml:10: spec.preKubeadmCommand: unknown field"}},
	})
	for _, c := range []struct {
		apiVersion, kind string
		want             bool
	}{
		{"bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig", true}, {"bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfigTemplate", true},
		{"bootstrap.cluster.x-k8s.io/v1alpha4", "KubeadmConfig", false}, {"bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane", false},
	} {
		if got := capi.Recognizes(c.apiVersion, c.kind); got != c.want {
			t.Errorf("Recognizes(%s, %s) = %v", c.apiVersion, c.kind, got)
		}
	}
}
