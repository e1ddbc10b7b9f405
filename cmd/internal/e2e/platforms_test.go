package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cmd/internal/cli"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/internal/testing/qemutest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// The platform examples (platform/testdata) built as a user builds them,
// with vminit build, and handed to the programs that consume them:
// cloud-init 22.4's datasource readers and modules, ignition-validate and
// the ignition binary, a POSIX shell, and the Linux kernel under QEMU.
// Each test asserts what its platform means by the example's fields.

const platformTestdata = "../../../platform/testdata/"

// The SSH keys of the examples.
const (
	keyOps   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@example.com"
	keyDev   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBJr6Yx5Wj7uGAGK3A3dbR4bXBE2Tb0R6wi3/3vMw8jQ dev@example.com"
	keyAdmin = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl admin@example.com"
)

// vminit runs the CLI in-process and returns its standard error.
func vminit(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := cli.Main(args, &out, &errb); code != cli.ExitOK {
		t.Fatalf("vminit %s: exit %d\n%s", strings.Join(args, " "), code, errb.String())
	}
	return errb.String()
}

// buildDir builds an example's seed as a directory (--fs dir).
func buildDir(t *testing.T, example string) string {
	t.Helper()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	dir := filepath.Join(t.TempDir(), "seed")
	vminit(t, append([]string{"build", platformTestdata + example, "-o", dir, "--fs", "dir"}, saltFor(example)...)...)
	return dir
}

// saltFor is --password-salt for an oVirt example, whose plain-text root
// password vminit hashes; the flag concerns oVirt bodies only.
func saltFor(example string) []string {
	if strings.HasPrefix(example, "ovirt") {
		return []string{"--password-salt", "examplesalt"}
	}
	return nil
}

// buildFile builds an example to out (its suffix says what) and reads it.
func buildFile(t *testing.T, example, name string, args ...string) (string, []byte) {
	t.Helper()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	p := filepath.Join(t.TempDir(), name)
	vminit(t, append(append([]string{"build", platformTestdata + example, "-o", p}, saltFor(example)...), args...)...)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, data
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// check reports got unless it equals want (compared as JSON, as the
// readers' values come from it).
func check(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// files is what cloud-init's write_files makes of a final config, by path.
func files(t *testing.T, config map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range cloudinittest.ReadFirstBoot(t, config).Files {
		out[f.Path] = string(f.Content)
	}
	return out
}

// validateIgnition runs Debian's ignition-validate on a config.
func validateIgnition(t *testing.T, config []byte) {
	t.Helper()
	validate := testtools.Require(t, "ignition-validate")
	p := filepath.Join(t.TempDir(), "config.ign")
	if err := os.WriteFile(p, config, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(validate, p).CombinedOutput(); err != nil {
		t.Fatalf("ignition-validate: %v\n%s", err, out)
	}
}

// applyIgnition builds an Ignition example's config, has ignition-validate
// check it and the ignition binary apply it, and returns the config and
// the root it was applied to.
func applyIgnition(t *testing.T, example string) ([]byte, string) {
	t.Helper()
	_, cfg := buildFile(t, example, "config.ign")
	validateIgnition(t, cfg)
	return cfg, ignitiontest.Apply(t, cfg)
}

// checkDrive checks that an Ignition example's default seed image is a
// config drive carrying its config as user_data.
func checkDrive(t *testing.T, example string, cfg []byte) {
	t.Helper()
	drive := buildDir(t, example)
	check(t, "config drive user_data", string(readFile(t, filepath.Join(drive, "openstack/latest/user_data"))), string(cfg))
}

// shellValues sources an environment file with a POSIX shell (its
// command line), in an empty environment, and returns the variables'
// values as the shell sees them.
func shellValues(t *testing.T, shell []string, env []byte, names ...string) []string {
	t.Helper()
	testtools.RequireFile(t, shell[0])
	p := filepath.Join(t.TempDir(), "environment")
	if err := os.WriteFile(p, env, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `. "$1"; shift; for n; do eval "printf '%s\0' \"\${$n}\""; done`
	args := append(append(slices.Clone(shell[1:]), "-c", script, "sh", p), names...)
	cmd := exec.Command(shell[0], args...)
	cmd.Env = []string{}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", shell, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// chrootRun runs script with /bin/sh in a chroot of root holding a static
// busybox and stub programs (name: shell script), the way the guest runs
// first-boot commands, and returns the script's output.
func chrootRun(t *testing.T, root, script string, stubs map[string]string) (string, error) {
	t.Helper()
	busybox := testtools.RequireFile(t, "/bin/busybox")
	if os.Geteuid() != 0 {
		testtools.Missing(t, "running first-boot commands in a chroot needs root")
	}
	for _, d := range []string{"bin", "usr/bin", "run", "tmp", "etc"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	bb := readFile(t, busybox)
	if err := os.WriteFile(filepath.Join(root, "bin/busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range []string{"sh", "mkdir", "mv", "cat", "rm", "test", "[", "ls", "touch", "printf", "echo"} {
		os.Symlink("busybox", filepath.Join(root, "bin", applet))
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(root, "usr/bin", name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "tmp/script"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chroot", root, "/bin/sh", "/tmp/script")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// writeRoot writes cloud-init's write_files of a final config under root.
func writeRoot(t *testing.T, root string, config map[string]any) {
	t.Helper()
	for _, f := range cloudinittest.ReadFirstBoot(t, config).Files {
		p := filepath.Join(root, f.Path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, f.Content, os.FileMode(f.Perms)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestKubeVirtExamplesConsumers(t *testing.T) {
	t.Run("configdrive from Secrets, keys one per line, tagged NIC", func(t *testing.T) {
		dir := buildDir(t, "kubevirt-configdrive.yaml")
		rb := cloudinittest.ReadSeed(t, cloudinittest.ConfigDriveReader, dir, map[string]string{"52:54:00:12:34:01": "eth0"})
		// The VM controller's firmware UUID: uuid5(KubeVirt's namespace
		// 6a1a24a1-4061-4607-8bf4-a3963d0c5895, "web-1").
		check(t, "instance-id", rb.InstanceID, "c6d9770f-afd4-5f89-9d1a-28d1dc62c4b9")
		check(t, "hostname", rb.Hostname, "web-1")
		// KubeVirt passes the Secret value as one entry; cloud-init would
		// then authorise one broken "key" holding both lines.
		check(t, "public keys", rb.Keys, []string{keyOps, keyDev})
		check(t, "meta_data instance_id", rb.Metadata["instance_id"], "web-1.prod")
		check(t, "meta_data instance_type", rb.Metadata["instance_type"], "u1.medium")
		check(t, "meta_data devices", rb.Metadata["devices"], []any{map[string]any{"address": "0000:02:01.0", "bus": "pci", "mac": "52:54:00:12:34:01", "tags": []any{"frontend"}, "type": "nic"}})
		check(t, "user data, as KubeVirt writes it", string(rb.UserData), "#cloud-config\npackages: [nginx]\nruncmd:\n- systemctl enable --now nginx\n")
		check(t, "final config", rb.Config, map[string]any{"packages": []any{"nginx"}, "runcmd": []any{"systemctl enable --now nginx"}})
		check(t, "network", rb.Network["eth0"], cloudinittest.Interface{Type: "physical", MAC: "52:54:00:12:34:01", Addresses: []string{"192.0.2.10/24"}})
	})
	t.Run("nocloud VMI with a script and netplan", func(t *testing.T) {
		rb := cloudinittest.ReadSeed(t, cloudinittest.NoCloudReader, buildDir(t, "kubevirt-nocloud-vmi.yaml"), nil)
		check(t, "instance-id (the firmware UUID)", rb.InstanceID, "5d307ca9-b3ef-428c-8861-06e72d69f223")
		check(t, "hostname (spec.hostname)", rb.Hostname, "db-0")
		check(t, "instance-type", rb.Metadata["instance-type"], "u1.small")
		// The script alone, as KubeVirt writes it: what a guest that reads
		// no MIME (CirrOS) runs.
		check(t, "user data", string(rb.UserData), "#!/bin/sh\necho hello > /run/hello\n")
		check(t, "part types", rb.PartTypes, []string{"text/x-shellscript"})
		check(t, "network-config", rb.NetworkConfig, map[string]any{"version": 2, "ethernets": map[string]any{"enp1s0": map[string]any{"dhcp4": true}}})
	})
	for _, ex := range []string{"kubevirt-seed-secret-fixed.yaml"} {
		t.Run(ex, func(t *testing.T) {
			rb := cloudinittest.ReadSeed(t, cloudinittest.NoCloudReader, buildDir(t, ex), nil)
			// v1alpha2: KubeVirt of its time wrote <name>.<namespace>.
			check(t, "instance-id", rb.InstanceID, "testvm-nocloud.default")
			check(t, "hostname", rb.Hostname, "testvm-nocloud")
			check(t, "final config", rb.Config, map[string]any{"password": "atomic", "ssh_pwauth": true, "chpasswd": map[string]any{"expire": false}})
		})
	}
	t.Run("Ignition annotation", func(t *testing.T) {
		cfg, root := applyIgnition(t, "kubevirt-seed-ignition-fixed.yaml")
		check(t, "/etc/hostname", string(readFile(t, filepath.Join(root, "etc/hostname"))), "myvm1\n")
		if keys := readFile(t, filepath.Join(root, "home/core/.ssh/authorized_keys.d/ignition")); !bytes.Contains(keys, []byte("kboumedh@bumblefoot")) {
			t.Errorf("core's keys:\n%s", keys)
		}
		// The default delivery: the config drive Fedora CoreOS's kubevirt
		// platform reads, carrying the same config.
		checkDrive(t, "kubevirt-seed-ignition-fixed.yaml", cfg)
	})
}

func TestVirtletExamplesConsumers(t *testing.T) {
	t.Run("the documented pod", func(t *testing.T) {
		rb := cloudinittest.ReadSeed(t, cloudinittest.NoCloudReader, buildDir(t, "virtlet-seed.yaml"), nil)
		check(t, "instance-id (VirtletCloudInitMetaData)", rb.InstanceID, "foobar")
		check(t, "hostname", rb.Hostname, "ubuntu-vm")
		check(t, "keys: the Secret's, then the annotation's", rb.Keys, []string{
			"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKdHSjb7Nyf0G6fL3z4LzkzN3pTpFsVtkbtmxg2tXCEm from-secret@example.com",
			"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user1@example.com",
			"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBJr6Yx5Wj7uGAGK3A3dbR4bXBE2Tb0R6wi3/3vMw8jQ user2@example.com"})
		check(t, "users (VirtletCloudInitUserData)", rb.Config["users"], []any{map[string]any{"name": "cloudy", "gecos": "Magic Cloud App Daemon User", "inactive": true, "system": true}})
		var paths []string
		for _, f := range cloudinittest.ReadFirstBoot(t, rb.Config).Files {
			paths = append(paths, f.Path)
		}
		// Virtlet's order: the user's write_files (the data source's), then
		// the generated ones.
		check(t, "write_files", paths, []string{"/foobar.txt", "/etc/foobar/some-file-from-configmap.conf", "/etc/baz/a-file-taken-from-secrets.conf",
			"/etc/cloud/environment", "/etc/cloud/mount-volumes.sh", "/etc/systemd/system/var-lib-docker.mount", "/etc/systemd/system/var-lib-postgresql.mount", "/etc/systemd/system/cephdata.mount"})
		fs := files(t, rb.Config)
		check(t, "secret file", fs["/etc/baz/a-file-taken-from-secrets.conf"], "# some secret content\n")
		// The env file: Virtlet wrote GREETING=hello world, which a shell
		// reads as running "world" with GREETING=hello.
		for _, sh := range [][]string{{"/bin/sh"}, {"/bin/busybox", "sh"}} {
			vals := shellValues(t, sh, []byte(fs["/etc/cloud/environment"]), "GREETING", "QUOTE")
			check(t, strings.Join(sh, " ")+" reads /etc/cloud/environment", vals, []string{"hello world", `it's "quoted"`})
		}
		// The mount script parses, and mounts Virtlet's devices.
		script := fs["/etc/cloud/mount-volumes.sh"]
		if out, err := exec.Command("/bin/sh", "-n", "-c", script).CombinedOutput(); err != nil {
			t.Errorf("mount-volumes.sh: %v %s", err, out)
		}
		for _, want := range []string{"mount /dev/vdc1 /var/lib/docker", "mount /dev/vdd /var/lib/postgresql", "mount /dev/vde /cephdata"} {
			if !strings.Contains(script, want) {
				t.Errorf("mount-volumes.sh lacks %q:\n%s", want, script)
			}
		}
		// Virtlet's documented inactive: true is no string (cloud-init
		// wants a number of days): cloud-init warns about that alone.
		if err := cloudinittest.Schema(t, rb.UserData); err != nil && !strings.Contains(err.Error(), "users.0: {'gecos': 'Magic Cloud App Daemon User', 'inactive': True") {
			t.Errorf("cloud-init schema: %v", err)
		}
	})
	t.Run("configdrive with a base64 script and keys", func(t *testing.T) {
		rb := cloudinittest.ReadSeed(t, cloudinittest.ConfigDriveReader, buildDir(t, "virtlet-configdrive-script.yaml"), nil)
		check(t, "instance-id", rb.InstanceID, "cirros-vm.vms")
		// Virtlet wrote public-keys, which cloud-init ignores under
		// openstack/latest: its keys never arrived.
		check(t, "keys (public_keys)", rb.Keys, []string{keyAdmin})
		check(t, "user data: the script, shebang kept", string(rb.UserData), "#!/bin/sh\necho hello > /run/hello\n")
		check(t, "part types", rb.PartTypes, []string{"text/x-shellscript"})
	})
	t.Run("CirrOS: the mount script as the user data", func(t *testing.T) {
		rb := cloudinittest.ReadSeed(t, cloudinittest.NoCloudReader, buildDir(t, "virtlet-cirros-script.yaml"), nil)
		script := "#!/bin/sh\nif ! mountpoint '/mnt/data dir'; then mkdir -p '/mnt/data dir' && mount /dev/vdc1 '/mnt/data dir'; fi\n"
		check(t, "user data", string(rb.UserData), script)
		check(t, "keys", rb.Keys, []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user1@example.com"})
		check(t, "hostname (meta-data)", rb.Hostname, "cirros-vm")
		// Run it as the guest would, with mount stubs: the quoting holds.
		root := t.TempDir()
		out, err := chrootRun(t, root, script, map[string]string{
			"mountpoint": "exit 1\n", "mount": `printf '%s|' "$@" > /run/mount.log` + "\n"})
		if err != nil {
			t.Fatalf("the script: %v\n%s", err, out)
		}
		check(t, "mount's arguments", string(readFile(t, filepath.Join(root, "run/mount.log"))), "/dev/vdc1|/mnt/data dir|")
		if fi, err := os.Stat(filepath.Join(root, "mnt/data dir")); err != nil || !fi.IsDir() {
			t.Errorf("mount point: %v", err)
		}
	})
}

func TestOVirtExamplesConsumers(t *testing.T) {
	t.Run("cloud-init guest", func(t *testing.T) {
		rb := cloudinittest.ReadSeed(t, cloudinittest.ConfigDriveReader, buildDir(t, "ovirt-cloudinit.xml"), nil)
		check(t, "instance-id (the VM's id, not a random one)", rb.InstanceID, "0c3b1b2e-5b6d-4c0f-9f55-6a6e1f3c2b11")
		check(t, "local-hostname", rb.Hostname, "centos-web.example.com")
		check(t, "availability_zone", rb.Metadata["availability_zone"], "nova")
		c := rb.Config
		// The custom script's runcmd merged by cloud-init's rules; oVirt's
		// own keys kept beside it (oVirt appended the text: duplicate keys).
		for k, v := range map[string]any{
			"runcmd": []any{"echo from-custom-script > /run/custom"}, "disable_root": false, "ssh_pwauth": true,
			"chpasswd": map[string]any{"expire": false}, "ssh_deletekeys": true, "timezone": "Europe/Berlin",
			"hostname": "centos-web", "fqdn": "centos-web.example.com",
		} {
			check(t, k, c[k], v)
		}
		// user_name is the only account: oVirt's user: renames the
		// image's default user, so vminit lists no "default".
		users, _ := c["users"].([]any)
		if len(users) != 1 {
			t.Fatalf("users %v", users)
		}
		admin := users[0].(map[string]any)
		check(t, "admin", []any{admin["name"], admin["lock_passwd"], admin["ssh_authorized_keys"]}, []any{"admin", false, []any{keyOps}})
		if h, _ := admin["hashed_passwd"].(string); !strings.HasPrefix(h, "$6$rounds=4096$") {
			t.Errorf("hashed_passwd %q", h)
		}
		if _, plain := c["password"]; plain {
			t.Error("a plain-text password in the user data")
		}
		// network_data.json matched by the NIC's MAC (oVirt wrote its name).
		check(t, "network", rb.Network["eth0"], cloudinittest.Interface{Type: "physical", MAC: "56:6f:1a:2b:00:01", Addresses: []string{"192.0.2.20/24"}})
	})
	t.Run("RHCOS with a plain password", func(t *testing.T) {
		_, root := applyIgnition(t, "ovirt-rhcos-password.xml")
		check(t, "/etc/hostname", string(readFile(t, filepath.Join(root, "etc/hostname"))), "rhcos-1\n")
		// The hash crypt(3) makes of the password with the salt: what the
		// guest's login checks it against.
		var want string
		cloudinittest.Run(t, `
import crypt, json, sys, warnings
warnings.simplefilter("ignore")
json.dump(crypt.crypt("changeme", "$6$examplesalt"), sys.stdout)
`, nil, &want)
		if shadow := readFile(t, filepath.Join(root, "etc/shadow")); !bytes.Contains(shadow, []byte("core:"+want+":")) {
			t.Errorf("core's shadow entry is not crypt(changeme, $6$examplesalt) = %s:\n%s", want, shadow)
		}
		if keys := readFile(t, filepath.Join(root, "home/core/.ssh/authorized_keys.d/ignition")); !bytes.Contains(keys, []byte(keyOps)) {
			t.Errorf("core's keys:\n%s", keys)
		}
	})
	t.Run("the seed document's Ignition custom_script", func(t *testing.T) {
		cfg, root := applyIgnition(t, "ovirt-seed-ignition.json")
		check(t, "/etc/hostname", string(readFile(t, filepath.Join(root, "etc/hostname"))), "fcosvm\n")
		if shadow := readFile(t, filepath.Join(root, "etc/shadow")); !bytes.Contains(shadow, []byte("core:$y$j9T$skCa2x5kFis7p58gYjz3C1$ykelHfCckRToZKAVYK7GDdLOCi3pcF2WMioI.vmYkj5:")) {
			t.Errorf("core's shadow entry:\n%s", shadow)
		}
		// oVirt's delivery: config-2 with the config as user_data.
		checkDrive(t, "ovirt-seed-ignition.json", cfg)
	})
}

// capiStubs are the programs CAPI's first-boot commands call, as stubs
// that record what they saw: kubeadm checks its configuration file and
// that the sentinel is not there yet, and fails when asked to.
func capiStubs(config string, fail bool) map[string]string {
	kubeadm := `echo "kubeadm $*" >> /run/order
[ -f ` + config + ` ] || { echo "no ` + config + `"; exit 2; }
[ -e /run/cluster-api/bootstrap-success.complete ] && { echo "sentinel before kubeadm"; exit 2; }
`
	if fail {
		kubeadm += "exit 1\n"
	} else {
		kubeadm += "exit 0\n"
	}
	return map[string]string{
		"kubeadm":   kubeadm,
		"systemctl": `echo "systemctl $*" >> /run/order` + "\n",
		"envsubst":  "cat\n",
	}
}

func TestCAPIExamplesConsumers(t *testing.T) {
	t.Run("cloud-config", func(t *testing.T) {
		dir := buildDir(t, "capi-kubeadmconfig.yaml")
		rb := cloudinittest.ReadSeed(t, cloudinittest.NoCloudReader, dir, nil)
		if err := cloudinittest.Schema(t, rb.UserData); err != nil {
			t.Errorf("cloud-init schema: %v", err)
		}
		fs := files(t, rb.Config)
		check(t, "azure.json (contentFrom)", fs["/etc/kubernetes/azure.json"], `{"cloud": "AzurePublicCloud"}`)
		check(t, "motd (base64)", fs["/etc/motd"], "Hello from Cluster API\n")
		var join map[string]any
		if err := yaml.Unmarshal([]byte(fs["/run/kubeadm/kubeadm-join-config.yaml"]), &join); err != nil || join["kind"] != "JoinConfiguration" || join["apiVersion"] != "kubeadm.k8s.io/v1beta4" {
			t.Errorf("kubeadm-join-config.yaml: %v %v", err, join)
		}
		check(t, "ntp", rb.Config["ntp"], map[string]any{"enabled": true, "servers": []any{"0.pool.ntp.org", "1.pool.ntp.org"}})
		// diskSetup becomes spec.storage, rendered with
		// cloud-init's defaults written out: CABPK's layout: true is one
		// partition of the whole disk, [[100, 83]] (cloud-init's own layout
		// code finds the two equal: platform/capi
		// TestSpecStoragePartitionsAsCABPK), overwrite false and partition
		// "any" are what cc_disk_setup assumes when they are absent.
		check(t, "disk_setup", rb.Config["disk_setup"], map[string]any{"/dev/sdb": map[string]any{"layout": []any{[]any{100, 83}}, "overwrite": false, "table_type": "gpt"}})
		check(t, "fs_setup", rb.Config["fs_setup"], []any{map[string]any{"device": "/dev/sdb1", "filesystem": "ext4", "label": "etcd_disk", "overwrite": false, "partition": "any"}})

		// cloud-init's runcmd script, run as the guest runs it.
		fb := cloudinittest.ReadFirstBoot(t, rb.Config)
		for _, fail := range []bool{false, true} {
			root := t.TempDir()
			writeRoot(t, root, rb.Config)
			out, err := chrootRun(t, root, fb.Runcmd, capiStubs("/run/kubeadm/kubeadm-join-config.yaml", fail))
			if err != nil {
				t.Fatalf("runcmd: %v\n%s", err, out)
			}
			check(t, "order", string(readFile(t, filepath.Join(root, "run/order"))),
				"systemctl daemon-reload\nsystemctl enable --now var-lib-etcddisk.mount\nkubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n")
			_, sentinel := os.Stat(filepath.Join(root, "run/cluster-api/bootstrap-success.complete"))
			if (sentinel == nil) == fail {
				t.Errorf("kubeadm failing %v: the sentinel is there: %v", fail, sentinel == nil)
			}
			for _, f := range []string{"run/pre", "run/post"} {
				if _, err := os.Stat(filepath.Join(root, f)); err != nil {
					t.Errorf("%s: %v (runcmd runs every command, as under CAPI)", f, err)
				}
			}
		}
		pre, kubeadm, post := strings.Index(fb.Runcmd, "echo pre"), strings.Index(fb.Runcmd, "kubeadm join"), strings.Index(fb.Runcmd, "echo post")
		if !(pre < kubeadm && kubeadm < post) || pre < 0 {
			t.Errorf("runcmd order:\n%s", fb.Runcmd)
		}
	})
	t.Run("Ignition", func(t *testing.T) {
		cfg, root := applyIgnition(t, "capi-ignition.yaml")
		checkDrive(t, "capi-ignition.yaml", cfg)
		kubeadmYML := readFile(t, filepath.Join(root, "etc/kubeadm.yml"))
		if !bytes.Contains(kubeadmYML, []byte("kind: JoinConfiguration")) || !bytes.Contains(kubeadmYML, []byte("name: $${COREOS_EC2_HOSTNAME}")) {
			t.Errorf("/etc/kubeadm.yml:\n%s", kubeadmYML)
		}
		// additionalConfig's drop-in, merged by Ignition's rules: the
		// literal block's text as YAML gives it, final newline included.
		check(t, "drop-in", string(readFile(t, filepath.Join(root, "etc/systemd/system/kubeadm.service.d/10-flatcar.conf"))),
			"[Unit]\nRequires=containerd.service\nAfter=containerd.service\n")
		// CABPK's contract: kubeadm.service runs /etc/kubeadm.sh while
		// /etc/kubeadm.yml exists, and the script moves it away.
		unit := string(readFile(t, filepath.Join(root, "etc/systemd/system/kubeadm.service")))
		if !strings.Contains(unit, "ConditionPathExists=/etc/kubeadm.yml\n") || !strings.Contains(unit, "ExecStart=/bin/bash /etc/kubeadm.sh\n") {
			t.Errorf("kubeadm.service:\n%s", unit)
		}
		script := string(readFile(t, filepath.Join(root, "etc/kubeadm.sh")))
		out, err := chrootRun(t, root, script, capiStubs("/etc/kubeadm.yml", false))
		if err != nil {
			t.Fatalf("kubeadm.sh: %v\n%s", err, out)
		}
		check(t, "order", string(readFile(t, filepath.Join(root, "run/order"))), "kubeadm join --config /etc/kubeadm.yml\n")
		check(t, "sentinel", string(readFile(t, filepath.Join(root, "run/cluster-api/bootstrap-success.complete"))), "success\n")
		if _, err := os.Stat(filepath.Join(root, "etc/kubeadm.yml")); err == nil {
			t.Error("/etc/kubeadm.yml left in place: kubeadm.service would run again next boot")
		}
		// CAPI's own spec version, on request: spec 2.3 (checked by
		// Ignition 0.35's parser in the build; Debian's ignition reads 3.x
		// only), with the same files on the root filesystem.
		_, cfg23 := buildFile(t, "capi-ignition.yaml", "capi.ign", "--ignition-version", "2.3.0")
		for _, want := range []string{`"version":"2.3.0"`, `"path":"/etc/kubeadm.yml"`, `"filesystem":"root"`} {
			if !bytes.Contains(cfg23, []byte(want)) {
				t.Errorf("the spec 2.3 config lacks %s", want)
			}
		}
		sub, mv, kubeadm := strings.Index(script, "envsubst"), strings.Index(script, "mv /etc/kubeadm.yml.tmp"), strings.Index(script, "kubeadm join")
		if !(0 <= sub && sub < mv && mv < kubeadm) {
			t.Errorf("kubeadm.sh order:\n%s", script)
		}
	})
	t.Run("Ignition with diskSetup", func(t *testing.T) {
		cfg, root := applyIgnition(t, "capi-ignition-disk.yaml")
		var c struct {
			Storage struct {
				Disks       []map[string]any `json:"disks"`
				Filesystems []map[string]any `json:"filesystems"`
			} `json:"storage"`
		}
		json.Unmarshal(cfg, &c)
		check(t, "disks", c.Storage.Disks, []map[string]any{{"device": "/dev/vdb", "wipeTable": true, "partitions": []any{map[string]any{"number": 1, "sizeMiB": 0, "startMiB": 0, "wipePartitionEntry": true}}}})
		check(t, "filesystems", c.Storage.Filesystems, []map[string]any{{"device": "/dev/vdb1", "format": "ext4", "label": "etcd_disk", "wipeFilesystem": true, "options": []any{"-E", "lazy_itable_init=1"}}})
		unit := string(readFile(t, filepath.Join(root, "etc/systemd/system/var-lib-etcddisk.mount")))
		if !strings.Contains(unit, "What=/dev/disk/by-label/etcd_disk\n") {
			t.Errorf("mount unit:\n%s", unit)
		}
	})
}

// TestPlatformMediaMountedByTheKernel attaches every example's image (the
// seeds, the config drives carrying Ignition, KubeVirt's sysprep disc) to
// one QEMU guest, whose kernel mounts each; every file it reads must be
// the file built. Each image carries the label its guest's agent looks
// for, as util-linux's blkid (what cloud-init and udev ask) reads it; the
// sysprep disc's, unique in the boot, is also found by the guest's findfs.
func TestPlatformMediaMountedByTheKernel(t *testing.T) {
	blkid := testtools.Require(t, "blkid")
	type image struct {
		example, label string
		dir            string
	}
	var imgs []image
	for _, ex := range []struct{ file, label string }{
		{"kubevirt-configdrive.yaml", "config-2"}, {"kubevirt-nocloud-vmi.yaml", "cidata"},
		{"kubevirt-seed-ignition-fixed.yaml", "config-2"}, {"kubevirt-sysprep.yaml", "unattendCD"},
		{"virtlet-seed.yaml", "cidata"}, {"virtlet-configdrive-script.yaml", "config-2"}, {"virtlet-cirros-script.yaml", "cidata"},
		{"ovirt-cloudinit.xml", "config-2"}, {"ovirt-seed-ignition.json", "config-2"}, {"ovirt-rhcos-password.xml", "config-2"},
		{"capi-kubeadmconfig.yaml", "cidata"}, {"capi-ignition.yaml", "config-2"},
	} {
		imgs = append(imgs, image{example: ex.file, label: ex.label, dir: buildDir(t, ex.file)})
	}
	var probe qemutest.Probe
	for _, img := range imgs {
		iso, _ := buildFile(t, img.example, "seed.iso")
		out, err := exec.Command(blkid, "-o", "value", "-s", "LABEL", iso).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != img.label {
			t.Errorf("%s: blkid reads label %q (%v), want %q", img.example, got, err, img.label)
		}
		m := qemutest.Mount{Image: iso, View: qemutest.ISO9660}
		if img.label == "unattendCD" {
			m.Label = img.label // findfs stops at the first device with a label: only unique ones
		}
		probe.Mounts = append(probe.Mounts, m)
	}
	// KubeVirt's own delivery of its Ignition annotation: QEMU's fw_cfg.
	ign, _ := buildFile(t, "kubevirt-seed-ignition-fixed.yaml", "config.ign")
	probe.FwCfg = map[string]string{"opt/com.coreos/config": ign}
	rep := qemutest.Inspect(t, probe)
	check(t, "fw_cfg opt/com.coreos/config", string(rep.FwCfg["opt/com.coreos/config"]), string(readFile(t, ign)))
	for i, img := range imgs {
		fsys := rep.FS[i]
		t.Run(img.example, func(t *testing.T) {
			if probe.Mounts[i].Label != "" && !fsys.LabelFound {
				t.Errorf("no device labelled %s (findfs %q, device %s)", img.label, fsys.LabelDevice, fsys.Device)
			}
			want := map[string][]byte{}
			filepath.WalkDir(img.dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					rel, _ := filepath.Rel(img.dir, p)
					want[filepath.ToSlash(rel)] = readFile(t, p)
				}
				return nil
			})
			got := fsys.Regular()
			var gotPaths, wantPaths []string
			for p := range got {
				gotPaths = append(gotPaths, p)
			}
			for p, data := range want {
				wantPaths = append(wantPaths, p)
				if g, ok := got[p]; ok && !bytes.Equal(g, data) {
					t.Errorf("%s: the kernel read other bytes than built", p)
				}
			}
			sort.Strings(gotPaths)
			sort.Strings(wantPaths)
			if !slices.Equal(gotPaths, wantPaths) {
				t.Errorf("the kernel sees %v, want %v", gotPaths, wantPaths)
			}
		})
	}
}
