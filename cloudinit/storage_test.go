package cloudinit

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// storageCases are specs with spec.storage and their golden cloud-config.
var storageCases = map[string]string{
	"data-disk": "../examples/data-disk.yaml",
	"shares":    "testdata/storage/shares.yaml",
	"vfat":      "testdata/storage/vfat.yaml",
}

// TestStorageGolden renders spec.storage to disk_setup, fs_setup,
// growpart, resize_rootfs, swap and the swap units, the same bytes twice,
// valid by cloud-init 22.4's schema (CheckSchema) and by the real
// `cloud-init schema`.
func TestStorageGolden(t *testing.T) {
	for name, p := range storageCases {
		t.Run(name, func(t *testing.T) {
			inst, err := spec.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := CloudConfig(inst)
			if err != nil {
				t.Fatal(err)
			}
			if again, err := CloudConfig(inst); err != nil || !bytes.Equal(again, cc) {
				t.Fatalf("two renderings differ (%v)", err)
			}
			golden := filepath.Join("testdata", "storage", name+".cloud-config")
			if *update {
				if err := os.WriteFile(golden, cc, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil || !bytes.Equal(cc, want) {
				t.Errorf("%s differs from the rendering (go test ./cloudinit -run TestStorageGolden -update rewrites it): %v\n%s", golden, err, cc)
			}
			if findings, err := CheckSchema(cc); err != nil || len(findings) > 0 {
				t.Errorf("CheckSchema: %v %v", findings, err)
			}
			if err := cloudinittest.Schema(t, cc); err != nil {
				t.Errorf("cloud-init schema: %v", err)
			}
		})
	}
}

// TestStorageWipeFilesystemFalse: without wipeFilesystem, fs_setup keeps
// what a device holds (overwrite false, partition "any": an existing
// filesystem of the format is reused, a device holding anything else is
// skipped); with it, the device is formatted whatever it holds.
func TestStorageWipeFilesystemFalse(t *testing.T) {
	var cfg struct {
		FSSetup []map[string]any `yaml:"fs_setup"`
	}
	for p, want := range map[string][]map[string]any{
		"../examples/data-disk.yaml": {
			{"device": "/dev/vdb1", "filesystem": "ext4", "label": "data", "partition": "any", "overwrite": false, "extra_opts": []any{"-m", "0"}},
			{"device": "/dev/vdc", "filesystem": "swap", "label": "swap", "partition": "any", "overwrite": false},
		},
		"testdata/storage/shares.yaml": {
			{"device": "/dev/disk/by-id/virtio-data-part1", "filesystem": "swap", "partition": "any", "overwrite": false},
			{"device": "/dev/disk/by-id/virtio-data-part2", "filesystem": "xfs", "label": "scratch", "partition": "none", "overwrite": true, "extra_opts": []any{"-f"}},
		},
		// mkfs.fat takes its label with -n, not the -L cloud-init gives
		// every mkfs: a cmd, which cloud-init runs after the same checks.
		"testdata/storage/vfat.yaml": {
			{"device": "/dev/vdb1", "filesystem": "vfat", "label": "SHARED", "partition": "any", "overwrite": false, "cmd": "mkfs.fat -n %(label)s -F 32 %(device)s"},
		},
	} {
		inst, err := spec.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := CloudConfig(inst)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(cc, &cfg); err != nil {
			t.Fatal(err)
		}
		if got, wantS := yamlString(t, cfg.FSSetup), yamlString(t, want); got != wantS {
			t.Errorf("%s: fs_setup\n%s\nwant\n%s", p, got, wantS)
		}
	}
}

func yamlString(t *testing.T, v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStorageCloudInitCannot: what disk_setup cannot express is an error
// naming the field, every one at once.
func TestStorageCloudInitCannot(t *testing.T) {
	doc := `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: x}
spec:
  storage:
    disks:
      - device: /dev/vdb
        partitions:
          - {number: 2, label: boot, size: 512MiB, type: esp}
          - {number: 1, size: 1GiB}
      - device: /dev/vdc
        partitions:
          - {size: 40%}
          - {size: 50%}
      - device: /dev/vdd
        wipeTable: true
`
	_, err := CloudConfig(loadSpec(t, doc, nil))
	got := ""
	if err != nil {
		got = err.Error()
	}
	for _, want := range []string{
		"spec.storage.disks[0].partitions[0].number: 2: cloud-init's disk_setup numbers partitions in their order, so this one would be 1",
		"spec.storage.disks[0].partitions[0].label: cloud-init's disk_setup cannot name a partition",
		"spec.storage.disks[0].partitions[0].size: cloud-init's disk_setup sizes partitions only as a share of the disk",
		`spec.storage.disks[0].partitions[0].type: "esp": cloud-init's disk_setup takes only the types with a numeric sgdisk code`,
		"spec.storage.disks[0].partitions[1].number: 1: cloud-init's disk_setup numbers partitions in their order, so this one would be 2",
		"spec.storage.disks[1].partitions[1].size: cloud-init's disk_setup gives the last partition the rest of the disk",
		"spec.storage.disks[2].wipeTable: cloud-init's disk_setup cannot clear a partition table",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q", want)
		}
	}
	if t.Failed() {
		t.Log(got)
	}
}

// TestStorageOverrides: a user-data fs_setup that replaces the one
// spec.storage generates is reported, naming the spec field lost.
func TestStorageOverrides(t *testing.T) {
	doc := `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: x}
spec:
  storage:
    filesystems: [{device: /dev/vdb, format: ext4}]
  cloudInit:
    userData: |
      #cloud-config
      fs_setup: [{device: /dev/vdc, filesystem: xfs}]
`
	errs, err := Overrides(loadSpec(t, doc, nil))
	if err != nil || len(errs) != 1 || !strings.Contains(errs[0].Message, "fs_setup (user-data line 2) replaces the fs_setup that spec.storage.filesystems generates") {
		t.Errorf("overrides: %v %v", errs, err)
	}
}

// TestSwapFileOverwritesWhatIsThere is why spec.storage.swap.path refuses
// system and device paths (spec's checkSwapPath): cloud-init's own
// cc_mounts, given a swap file at a path where a file already is (and is
// not active swap), formats it with mkswap over its content. Run on a
// file of the test's own.
func TestSwapFileOverwritesWhatIsThere(t *testing.T) {
	cloudinittest.Require(t)
	for _, tool := range []string{"fallocate", "mkswap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s: %v", tool, err)
		}
	}
	path := filepath.Join(t.TempDir(), "passwd")
	content := strings.Repeat("root:x:0:0:root:/root:/bin/bash\n", 200)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cloudinittest.Run(t, `
import json, sys
from cloudinit.config import cc_mounts
cc_mounts.setup_swapfile(fname=json.load(sys.stdin), size=1 << 20)
`, path, nil)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the file is gone: %v", err)
	}
	// mkswap writes its header over the first page (4 KiB): what was
	// there is gone, and the file is swap.
	if page := string(got[:4096]); strings.Contains(page, "root:x:0:0") || !strings.Contains(page, "SWAPSPACE2") {
		t.Errorf("cc_mounts left the file's first page as it was (%d bytes): the spec's refusal would guard nothing", len(got))
	}
}
