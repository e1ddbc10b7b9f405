package capi_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/internal/testing/testtools"
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
		{Name: "neither: a worker's join, which needs discovery", Doc: "apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata: {name: x}\nspec: {files: [{path: /a, content: b}]}\n", Opts: with(platform.Options{}, worker),
			Errs: []string{"vm.yaml:4: spec.joinConfiguration.discovery: the machine of KubeadmConfig \"x\" joins its cluster, and kubeadm join has no bootstrapToken.apiServerEndpoint"}},
		{Name: "Ignition: /etc/kubeadm.yml, the sentinel's directory made", Doc: kc(ign + "preKubeadmCommands: [echo pre]\npostKubeadmCommands: [echo post]\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "agent", s.Agent, spec.AgentIgnition)
				platformtest.Eq(t, "variant", s.Ignition.Variant, spec.VariantFlatcar)
				platformtest.Eq(t, "datasource", s.Datasource, spec.DatasourceConfigDrive)
				platformtest.Eq(t, "commands", len(s.Commands), 0)
				f := fileMap(s)
				platformtest.Eq(t, "files", len(f), 2)
				if !strings.HasPrefix(f[capi.IgnitionConfigPath], "0600  false ---\napiVersion: kubeadm.k8s.io/v1beta4\n") {
					t.Errorf("%s: %s", capi.IgnitionConfigPath, f[capi.IgnitionConfigPath])
				}
				// CABPK's kubeadm.service runs /etc/kubeadm.sh, as its
				// template renders it (its blanks included).
				platformtest.Eq(t, capi.KubeadmScript, f[capi.KubeadmScript], "0700  false #!/bin/bash\nset -e\n\necho pre\n\n"+
					"kubeadm join --config /etc/kubeadm.yml \nmkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\n"+
					"mv /etc/kubeadm.yml /tmp/\n\necho post\n")
				platformtest.Eq(t, "units", len(s.Units), 1)
				u := s.Units[0]
				platformtest.Eq(t, "unit", u.Name+" "+fmt.Sprint(*u.Enabled), "kubeadm.service true")
				for _, want := range []string{"ConditionPathExists=/etc/kubeadm.yml\n", "Type=oneshot\nExecStart=/bin/bash /etc/kubeadm.sh\n", "WantedBy=multi-user.target\n"} {
					if !strings.Contains(u.Content, want) {
						t.Errorf("kubeadm.service lacks %q:\n%s", want, u.Content)
					}
				}
			}},
		{Name: "Ignition: init, no verbosity", Doc: strings.Replace(initCfg, "  verbosity: 5\n", "  format: ignition\n", 1),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				if !strings.Contains(fileMap(s)[capi.KubeadmScript], "\nkubeadm init --config /etc/kubeadm.yml \nmkdir") {
					t.Errorf("%s", fileMap(s)[capi.KubeadmScript])
				}
			}},
		{Name: "Ignition: verbosity, a command of several lines", Doc: kc(ign + "verbosity: 3\npreKubeadmCommands: [\"a\\nb\\n\"]\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, capi.KubeadmScript, fileMap(s)[capi.KubeadmScript], "0700  false #!/bin/bash\nset -e\n\na\nb\n\n\n"+
					"kubeadm join --config /etc/kubeadm.yml --v 3\nmkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\n"+
					"mv /etc/kubeadm.yml /tmp/\n")
			}},
		{Name: "format", Doc: kc("format: shell\n"), Errs: []string{`vm.yaml:10: spec.format: "shell": want cloud-config or ignition (Cluster API refuses this object)`}},
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
					// CAPI lists no "default": the image's default user is not created.
					platformtest.Eq(t, "noDefaultUser", s.CloudInit.NoDefaultUser, true)
				}},
			{Name: "no users: the image's default user", Doc: kc(""),
				Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
					platformtest.Eq(t, "noDefaultUser", s.CloudInit.NoDefaultUser, false)
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
					platformtest.Eq(t, "units", s.Units[1:], []spec.Unit{{Name: "ntpd.service", Enabled: &tr}})
				}},
			{Name: "inactive", Doc: kc(ign + "users: [{name: a, inactive: true}]\n"), Errs: []string{"vm.yaml:11: spec.users[0].inactive: Ignition cannot create an expired account (CABPK's Ignition drops inactive, and the account stays usable)"}},
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
			// Each names its line and what CABPK's Ignition does with it.
			Errs: []string{"vm.yaml:13: spec.diskSetup.partitions[0].diskLayout: partitions in percent of the disk: Ignition sizes partitions in MiB",
				"(CABPK's Ignition ignores diskLayout and leaves the disk without these partitions)",
				`vm.yaml:14: spec.diskSetup.partitions[1].diskLayout[0].partitionType: "LinuxExtended": an MBR type`, "(CABPK's Ignition ignores partition types)",
				`vm.yaml:17: spec.diskSetup.filesystems[0].partition: "auto": cloud-init searches the disk`, "(CABPK's Ignition ignores partition and formats the whole device)",
				"vm.yaml:18: spec.diskSetup.filesystems[1].replaceFS: cloud-init's replace_fs", "(CABPK's Ignition ignores it)",
				"vm.yaml:19: spec.diskSetup.filesystems[2].device: required: Ignition formats a device it is given (CABPK writes the file system without one, which Ignition refuses)"}},
		{Name: "Ignition: MBR written as GPT", Doc: kc(ign + "diskSetup:\n  partitions:\n  - {device: /dev/sdd, layout: true, tableType: mbr}\n"),
			Warns: []string{`spec.diskSetup.partitions[0].tableType: "mbr": Ignition writes GPT partition tables only`}},
	})
}

func TestAdditionalConfig(t *testing.T) {
	add := func(cfg string) string {
		return kc(ign + "ignition:\n  containerLinuxConfig:\n    additionalConfig: |\n" + platformtest.Indent(cfg, 6))
	}
	butane := func(want string) func(*testing.T, *spec.Spec, *platform.Result) {
		return func(t *testing.T, s *spec.Spec, r *platform.Result) {
			platformtest.Eq(t, "butane", s.Ignition.Butane, "variant: flatcar\nversion: 1.0.0\n"+want)
		}
	}
	platformtest.Run(t, []platformtest.Case{
		{Name: "a Container Linux Config, read as Butane flatcar", Doc: add("systemd:\n  units:\n  - name: a.service\n    enable: true\n"),
			Check: butane("systemd:\n  units:\n    - name: a.service\n      enabled: true\n")},
		{Name: "Butane as given", Doc: add("variant: flatcar\nversion: 1.1.0\nstorage:\n  files:\n  - path: /etc/x\n    contents: {inline: y}\n"),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "butane", s.Ignition.Butane, "variant: flatcar\nversion: 1.1.0\nstorage:\n  files:\n  - path: /etc/x\n    contents: {inline: y}")
			}},
		{Name: "Butane: an unused key is an error", Doc: add("variant: flatcar\nversion: 1.1.0\nstorage:\n  files:\n  - path: /etc/x\n    contents: {remote: {url: \"https://example.com/x\"}}\n"),
			Errs: []string{"vm.yaml:19: spec.ignition.containerLinuxConfig.additionalConfig: column 24: storage.files[0].contents.remote: a key Butane does not use: the guest would not get what it says"}},
		{Name: "strict", Doc: kc(ign + "ignition:\n  containerLinuxConfig:\n    strict: true\n    additionalConfig: \"systemd: {}\"\n"),
			Warns: []string{"strict: build with --strict"}},
		// CAPO's flatcar-sysext template fetches its sysext files so.
		{Name: "contents.remote: the source, compression and verification", Doc: add(`storage:
  files:
  - path: /etc/sysupdate.d/noop.conf
    mode: 0644
    contents:
      remote:
        url: https://extensions.flatcar.org/extensions/noop.conf
        compression: gzip
        verification: {hash: {function: sha512, sum: abc}}
`), Check: butane(`storage:
  files:
    - path: /etc/sysupdate.d/noop.conf
      mode: 0644
      contents:
        source: https://extensions.flatcar.org/extensions/noop.conf
        compression: gzip
        verification:
          hash: sha512-abc
      overwrite: true
`)},
		// CAPD's ignition e2e and CAPV's ignition template write so.
		{Name: "filesystem: root, append, links and directories", Doc: add(`storage:
  files:
  - {filesystem: root, path: /a, contents: {inline: x}, overwrite: false}
  - {path: /b, append: true, contents: {inline: y}}
  links:
  - {filesystem: root, path: /c, target: /a, hard: false}
  directories:
  - {filesystem: root, path: /d, mode: 0700}
`), Check: butane(`storage:
  files:
    - path: /a
      contents:
        inline: x
      overwrite: false
    - path: /b
      append:
        - inline: y
  links:
    - path: /c
      target: /a
      hard: false
  directories:
    - path: /d
      mode: 0700
`)},
		{Name: "filesystems, partitions, networkd, users' create", Doc: add(`storage:
  disks:
  - device: /dev/vdb
    partitions: [{number: 1, size: 1GiB, start: 2048KiB}]
  filesystems:
  - name: data
    mount: {device: /dev/vdb1, format: ext4, create: {force: true, options: [-L, x]}}
networkd:
  units:
  - {name: 00-eth0.network, contents: "[Match]\nName=eth0\n"}
passwd:
  users:
  - name: u
    create: {shell: /bin/zsh}
ignition:
  config:
    append: [{source: "https://example.com/a.ign"}]
`), Check: butane(`storage:
  disks:
    - device: /dev/vdb
      partitions:
        - number: 1
          size_mib: 1024
          start_mib: 2
  filesystems:
    - device: /dev/vdb1
      format: ext4
      wipe_filesystem: true
      options: [-L, x]
  files:
    - path: /etc/systemd/network/00-eth0.network
      mode: 420
      overwrite: true
      contents:
        inline: "[Match]\nName=eth0\n"
passwd:
  users:
    - name: u
      shell: /bin/zsh
ignition:
  config:
    merge:
      - source: "https://example.com/a.ign"
`)},
		{Name: "unknown key: ignored with a warning, as CABPK's transpiler does", Doc: add("systemd:\n  unit: []\n"),
			Warns: []string{"vm.yaml:15: spec.ignition.containerLinuxConfig.additionalConfig: column 11: systemd.unit: not a Container Linux Config key: ignored"}},
		{Name: "unknown key, strict: refused, as CABPK does", Doc: kc(ign + "ignition:\n  containerLinuxConfig:\n    strict: true\n    additionalConfig: |\n      systemd:\n        unit: []\n"),
			Errs: []string{"vm.yaml:16: spec.ignition.containerLinuxConfig.additionalConfig: column 11: systemd.unit: not a Container Linux Config key, which CABPK refuses with strict: true"}},
		{Name: "version", Doc: add("version: 1\n"), Errs: []string{`vm.yaml:14: spec.ignition.containerLinuxConfig.additionalConfig: column 18: version: "1": CABPK's transpiler refuses a version other than 0`}},
		{Name: "what would change the guest and has no translation", Doc: add(`etcd:
  name: x
storage:
  files:
  - {filesystem: oem, path: /a}
  - {path: /b, contents: {local: b}}
  - {path: /c, contents: {remote: {compression: gzip}}}
  filesystems:
  - {name: oem, path: /usr/share/oem}
  disks:
  - {device: /dev/vdb, partitions: [{size: 10}]}
`), Errs: []string{
			"vm.yaml:14: spec.ignition.containerLinuxConfig.additionalConfig: column 9: etcd: CABPK's transpiler writes it as etcd-member.service's drop-in",
			`vm.yaml:18: spec.ignition.containerLinuxConfig.additionalConfig: column 26: storage.files[0].filesystem: "oem": a file system CABPK's transpiler mounts`,
			"vm.yaml:19: spec.ignition.containerLinuxConfig.additionalConfig: column 35: storage.files[1].contents.local: CABPK's transpiler has no files directory",
			"vm.yaml:20: spec.ignition.containerLinuxConfig.additionalConfig: column 43: storage.files[2].contents.remote.url: required: without it CABPK's transpiler writes the file empty",
			"vm.yaml:22: spec.ignition.containerLinuxConfig.additionalConfig: column 25: storage.filesystems[0].path: a file system Ignition mounts",
			`vm.yaml:24: spec.ignition.containerLinuxConfig.additionalConfig: column 52: storage.disks[0].partitions[0].size: "10": want a size in whole MiB`,
		}},
		{Name: "not YAML", Doc: add("a: [\n"), Errs: []string{"spec.ignition.containerLinuxConfig.additionalConfig: not YAML"}},
	})
}

// TestAdditionalConfigValidates renders CLC additionalConfigs as the
// corpus' templates write them into Ignition configs and checks them with
// the real ignition-validate, and that kubeadm.service keeps CABPK's unit
// with the template's drop-in merged into it.
func TestAdditionalConfigValidates(t *testing.T) {
	validate := testtools.Require(t, "ignition-validate")
	doc := kc(ign + `ignition:
  containerLinuxConfig:
    additionalConfig: |
      storage:
        files:
        - path: /etc/sysupdate.d/noop.conf
          filesystem: root
          mode: 0644
          contents:
            remote:
              url: https://extensions.flatcar.org/extensions/noop.conf
              verification: {hash: {function: sha512, sum: ` + strings.Repeat("0", 128) + `}}
        - {path: /etc/motd, append: true, contents: {inline: hi}}
      systemd:
        units:
        - name: kubeadm.service
          enabled: true
          dropins:
          - name: 10-flatcar.conf
            contents: |
              [Unit]
              After=coreos-metadata.service
              [Service]
              EnvironmentFile=/run/metadata/flatcar
`)
	r, err := platformtest.Convert(t, doc, platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ignition.Render(r.Instance, ignition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.ign")
	if err := os.WriteFile(path, res.Config, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(validate, path).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("ignition-validate: %v\n%s\n%s", err, out, res.Config)
	}
	var cfg struct {
		Storage struct {
			Files []struct {
				Path     string
				Contents struct {
					Source       *string
					Verification struct{ Hash *string }
				}
				Append []struct{ Source *string }
			}
		}
		Systemd struct {
			Units []struct {
				Name     string
				Contents *string
				Dropins  []struct{ Name, Contents string }
			}
		}
	}
	if err := json.Unmarshal(res.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range cfg.Storage.Files {
		files[f.Path] = fmt.Sprint(deref(f.Contents.Source), " ", deref(f.Contents.Verification.Hash), " ", len(f.Append))
	}
	platformtest.Eq(t, "noop.conf", files["/etc/sysupdate.d/noop.conf"], "https://extensions.flatcar.org/extensions/noop.conf sha512-"+strings.Repeat("0", 128)+" 0")
	platformtest.Eq(t, "motd", files["/etc/motd"], "  1")
	var units []string
	for _, u := range cfg.Systemd.Units {
		if u.Name == capi.KubeadmUnit {
			units = append(units, fmt.Sprint(strings.Contains(deref(u.Contents), "ExecStart=/bin/bash /etc/kubeadm.sh"), u.Dropins))
		}
	}
	platformtest.Eq(t, "kubeadm.service", units, []string{"true [{10-flatcar.conf [Unit]\nAfter=coreos-metadata.service\n[Service]\nEnvironmentFile=/run/metadata/flatcar\n}]"})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
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

// TestFileDecodedLimit: gzip content that decompresses past 64 MiB is an
// error naming the limit, not a file cut at 64 MiB.
func TestFileDecodedLimit(t *testing.T) {
	big := base64.StdEncoding.EncodeToString([]byte(gz(strings.Repeat("a", 64<<20+1))))
	platformtest.Run(t, []platformtest.Case{
		{Name: "past the limit", Doc: kc("files:\n- {path: /big, content: " + big + ", encoding: gzip+base64}\n"),
			Errs: []string{"spec.files[0].encoding: too large: it decompresses to more than 67108864 bytes"}},
	})
}

// TestDiskSetupAsSpecStorage: a cloud-config diskSetup that fits the spec
// becomes spec.storage (rendered to disk_setup and fs_setup by the
// cloud-init renderer, checked by its schema), CAPZ's etcd disk among
// them; one that does not (MBR, a cloud-init alias, replaceFS) stays
// CABPK's own keys, whole.
func TestDiskSetupAsSpecStorage(t *testing.T) {
	yes := true
	platformtest.Run(t, []platformtest.Case{
		{Name: "CAPZ's etcd disk", Doc: kc(`diskSetup:
  partitions:
  - {device: /dev/disk/azure/scsi1/lun0, layout: true, overwrite: false, tableType: gpt}
  - {device: /dev/sdc, diskLayout: [{percentage: 30, partitionType: LinuxSwap}, {percentage: 50}], overwrite: true, tableType: gpt}
  - {device: /dev/sdd, layout: false}
  filesystems:
  - {device: /dev/disk/azure/scsi1/lun0, filesystem: ext4, label: etcd_disk, extraOpts: [-E, "lazy_itable_init=1,lazy_journal_init=1"]}
  - {device: /dev/sdc, partition: "1", filesystem: swap, label: swap}
  - {device: /dev/sdc, partition: "2", filesystem: xfs, label: data, overwrite: true}
  - {device: /dev/sdd, partition: none, filesystem: ext4}
mounts:
- [LABEL=etcd_disk, /var/lib/etcddisk]
`),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "storage", s.Storage, &spec.Storage{
					Disks: []spec.Disk{
						{Device: "/dev/disk/azure/scsi1/lun0", Partitions: []spec.Partition{{Number: 1, Type: "linux"}}},
						{Device: "/dev/sdc", WipeTable: true, Partitions: []spec.Partition{{Number: 1, Size: "30%", Type: "swap"}, {Number: 2, Type: "linux"}}},
					},
					Filesystems: []spec.Filesystem{
						{Device: "/dev/disk/azure/scsi1/lun0", Partition: 1, Format: "ext4", Label: "etcd_disk", Options: []string{"-E", "lazy_itable_init=1,lazy_journal_init=1"}},
						{Device: "/dev/sdc", Partition: 1, Format: "swap", Label: "swap"},
						{Device: "/dev/sdc", Partition: 2, Format: "xfs", Label: "data", WipeFilesystem: yes},
						{Device: "/dev/sdd", Format: "ext4", WipeFilesystem: yes},
					},
				})
				if ud := userDoc(t, s); ud["disk_setup"] != nil || ud["fs_setup"] != nil {
					t.Errorf("disk_setup or fs_setup left in the user data: %v", ud)
				}
				cc, err := cloudinit.CloudConfig(r.Instance)
				if err != nil {
					t.Fatal(err)
				}
				if findings, err := cloudinit.CheckSchema(cc); err != nil || len(findings) > 0 {
					t.Errorf("CheckSchema: %v %v\n%s", findings, err, cc)
				}
			}},
		{Name: "an alias and replaceFS stay CABPK's keys", Doc: kc(`diskSetup:
  partitions:
  - {device: /dev/disk/azure/scsi1/lun0, layout: true, overwrite: false, tableType: gpt}
  filesystems:
  - {device: /dev/disk/azure/scsi1/lun0, filesystem: ext4, label: etcd_disk}
  - {device: ephemeral0.1, filesystem: ext4, label: ephemeral0, replaceFS: ntfs}
`),
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				if s.Storage != nil {
					t.Errorf("storage %v; want none", s.Storage)
				}
				if ud := userDoc(t, s); ud["disk_setup"] == nil || len(ud["fs_setup"].([]any)) != 2 {
					t.Errorf("user data %v; want CABPK's disk_setup and both fs_setup entries", ud)
				}
			}},
	})
}
