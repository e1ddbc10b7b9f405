package run

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/lib/qemu"
	"github.com/vminit/vminit/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func loadSpec(t *testing.T, path string) *spec.Instance {
	t.Helper()
	inst, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestQEMUArgs pins QEMU's command line for each delivery, with fixed
// paths and ports: the golden files in testdata/args are what a reviewer
// checks against QEMU's documentation (and the boot tests run them).
func TestQEMUArgs(t *testing.T) {
	dev := loadSpec(t, "../../../examples/dev-vm.yaml")
	bonded := loadSpec(t, "../../../examples/ubuntu-server/instance.yaml")
	fcos := loadSpec(t, "../../../examples/fcos-server.yaml")
	disk := files{qemu: "/usr/bin/qemu-system-x86_64", disk: "/tmp/run/overlay.qcow2", diskFormat: "qcow2", qmp: "/tmp/run/qmp.sock"}
	with := func(f files, set func(*files)) files { set(&f); return f }
	for _, c := range []struct {
		name string
		o    Options
		f    files
	}{
		{"nocloud-iso", Options{Instance: dev, Image: "debian.qcow2"}, with(disk, func(f *files) { f.seed = "/tmp/run/seed.iso" })},
		{"nocloud-vfat", Options{Instance: dev, Image: "debian.qcow2", Media: "vfat"}, with(disk, func(f *files) { f.seed = "/tmp/run/seed.img" })},
		{"configdrive", Options{Instance: dev, Image: "debian.qcow2", Datasource: "configdrive"}, with(disk, func(f *files) { f.seed = "/tmp/run/seed.iso" })},
		{"ssh-port", Options{Instance: dev, Image: "debian.qcow2", SSHPort: 2222, Memory: "1G", CPUs: 1}, with(disk, func(f *files) { f.seed = "/tmp/run/seed.iso" })},
		{"bond-nics", Options{Instance: bonded, Image: "debian.qcow2", NICs: 2}, with(disk, func(f *files) { f.seed = "/tmp/run/seed.iso" })},
		{"kernel", Options{Instance: dev, Image: "root.ext4", Kernel: "/boot/vmlinuz", Initrd: "/boot/initrd.img", Append: "root=/dev/vda rw console=ttyS0"}, with(disk, func(f *files) { f.seed = "/tmp/run/seed.iso" })},
		{"serve-ec2", Options{Instance: dev, Image: "debian.qcow2", Serve: true}, with(disk, func(f *files) {
			f.relay = "/tmp/run/metadata.sock"
		})},
		{"serve-openstack", Options{Instance: dev, Image: "debian.qcow2", Serve: true, Dialect: "openstack"}, with(disk, func(f *files) {
			f.relay = "/tmp/run/metadata.sock"
		})},
		{"serve-nocloud", Options{Instance: dev, Image: "debian.qcow2", Serve: true, Dialect: "nocloud", SSHPort: 2222}, with(disk, func(f *files) { f.relay = "/tmp/run/metadata.sock" })},
		{"ignition-fwcfg", Options{Instance: fcos, Image: "fcos.qcow2"}, with(disk, func(f *files) { f.fwCfg = "/tmp/run/config.ign" })},
		{"ignition-configdrive", Options{Instance: fcos, Image: "fcos.qcow2", Datasource: "configdrive"}, with(disk, func(f *files) { f.seed = "/tmp/run/seed.iso" })},
		{"disks", Options{Instance: dev, Image: "debian.qcow2", Disks: []string{"10GiB", "data,1.qcow2"}}, with(disk, func(f *files) {
			f.seed = "/tmp/run/seed.iso"
			f.extra = []extraDisk{{"/tmp/run/disk1.raw", "raw"}, {"/srv/data,1.qcow2", "qcow2"}}
		})},
		{"ignition-serve-aws", Options{Instance: fcos, Image: "fcos.qcow2", Serve: true}, with(disk, func(f *files) {
			f.relay = "/tmp/run/metadata.sock"
		})},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := configure(c.o)
			if err != nil {
				t.Fatal(err)
			}
			cfg.accel = qemu.TCGArgs
			if cfg.Serve {
				cfg.servedInstance() // as Start does: it may name NIC 0's MAC
			}
			got := strings.Join(cfg.args(c.f), "\n") + "\n"
			golden := filepath.Join("testdata", "args", c.name+".txt")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestQEMUArgs -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("QEMU arguments changed (go test -run TestQEMUArgs -update, then review the diff):\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestConfigureListsEveryProblem checks that bad options are refused
// together, each named.
func TestConfigureListsEveryProblem(t *testing.T) {
	dev := loadSpec(t, "../../../examples/dev-vm.yaml")
	_, err := configure(Options{Instance: dev, Disks: []string{""}, Memory: "lots", CPUs: -1, Datasource: "fwcfg", Media: "floppy", Accel: "xen", Dialect: "ec2", Initrd: "i"})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"image:", "initrd/append:", "disk: empty", `memory "lots"`, "cpus -1", `datasource "fwcfg": cloud-init reads nocloud or configdrive`, `media "floppy"`, `accel "xen"`, `dialect "ec2": it needs serve`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	fcos := loadSpec(t, "../../../examples/fcos-server.yaml")
	if _, err := configure(Options{Instance: fcos, Image: "x", Serve: true, Dialect: "nocloud"}); err == nil || !strings.Contains(err.Error(), "ignition reads aws or openstack") {
		t.Errorf("Ignition with the nocloud dialect: %v", err)
	}
	// A Windows guest is refused, all at once with the rest (it was a panic:
	// there is no datasource to default to).
	win := loadSpec(t, "../../../examples/windows-server.yaml")
	if _, err := configure(Options{Instance: win, Image: "x", Serve: true}); err == nil || !strings.Contains(err.Error(), `spec.agent "cloudbase-init": vminit run boots cloud-init and ignition guests`) {
		t.Errorf("a cloudbase-init spec: %v", err)
	}
}

func TestNICMACsFollowTheSpec(t *testing.T) {
	bonded := loadSpec(t, "../../../examples/ubuntu-server/instance.yaml")
	if got := strings.Join(nicMACs(bonded.Spec.Network, 0), " "); got != "52:54:00:12:34:01 52:54:00:12:34:02" {
		t.Errorf("bond example: %q", got)
	}
	if got := nicMACs(nil, 1); len(got) != 2 || got[0] != "" {
		t.Errorf("no network, one extra NIC: %q", got)
	}
}
