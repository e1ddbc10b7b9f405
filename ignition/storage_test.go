package ignition

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// storageCases render spec.storage; golden like goldenCases, but not
// applied by TestIgnitionApplies: the disks stage needs a guest's disks.
var storageCases = []goldenCase{
	{name: "storage-data-disk", spec: "../examples/data-disk.yaml", opts: Options{Variant: FCOS}, version: "3.2.0"},
	{name: "storage-data-disk-flatcar", spec: "../examples/data-disk.yaml", opts: Options{Variant: Flatcar}, version: "3.0.0"},
	{name: "storage", spec: "testdata/specs/storage.yaml", version: "3.0.0"},
}

// TestStorageGolden renders spec.storage to storage.disks and
// storage.filesystems, the swap units and the root partition's resize,
// the same bytes twice, at the lowest version that expresses it, valid by
// the real ignition-validate.
func TestStorageGolden(t *testing.T) {
	validate := testtools.Require(t, "ignition-validate")
	for _, c := range storageCases {
		t.Run(c.name, func(t *testing.T) {
			res := c.render(t)
			var pretty bytes.Buffer
			json.Indent(&pretty, res.Config, "", "  ")
			pretty.WriteByte('\n')
			if *update {
				if err := os.WriteFile(c.path(), pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(c.path())
			if err != nil || !bytes.Equal(pretty.Bytes(), want) {
				t.Errorf("%s differs from the rendering (go test ./ignition -run TestStorageGolden -update rewrites it): %v\n%s", c.path(), err, pretty.Bytes())
			}
			out, err := exec.Command(validate, c.path()).CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("ignition-validate %s: %v\n%s", c.path(), err, out)
			}
		})
	}
}

// TestStorageWipeFilesystemFalse: a filesystem without wipeFilesystem is
// rendered with wipeFilesystem: false written out, the rule Ignition
// applies (keep a filesystem of the format, fail rather than format
// anything else), the same as cloud-init's overwrite: false.
func TestStorageWipeFilesystemFalse(t *testing.T) {
	res, err := Render(load(t, "../examples/data-disk.yaml"), Options{Variant: Flatcar})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Storage struct {
			Filesystems []map[string]any `json:"filesystems"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(res.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if fss := cfg.Storage.Filesystems; len(fss) != 2 || fss[0]["wipeFilesystem"] != false || fss[1]["wipeFilesystem"] != false || fss[0]["device"] != "/dev/vdb1" {
		t.Errorf("filesystems %v; want both with wipeFilesystem false, the first on /dev/vdb1", fss)
	}
}

// TestStorageIgnitionCannot: what Ignition cannot express is an error
// naming the field (a warning, dropped, with AllowPartial), and a
// version too old for growRoot names it.
func TestStorageIgnitionCannot(t *testing.T) {
	inst := specFrom(t, `spec:
  storage:
    disks:
      - device: /dev/vdb
        partitions: [{size: 40%}, {size: rest}]
    growRoot: false
    swap: {path: /swapfile, size: 1GiB}
`)
	_, err := Render(inst, Options{})
	got := ""
	if err != nil {
		got = err.Error()
	}
	for _, want := range []string{
		`spec.storage.disks[0].partitions[0].size: Ignition sizes partitions in MiB, not as a share of the disk`,
		`spec.storage.swap: Ignition makes swap only on a device`,
		`spec.storage.growRoot: Fedora CoreOS, RHCOS and Flatcar grow the root filesystem on first boot themselves`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
	res, err := Render(inst, Options{AllowPartial: true})
	if err != nil || len(res.Warnings) != 3 || bytes.Contains(res.Config, []byte(`"disks"`)) {
		t.Errorf("AllowPartial: %v, %v", res, err)
	}

	inst = load(t, "../examples/data-disk.yaml")
	_, err = Render(inst, Options{Version: "3.1.0"})
	if err == nil || !strings.Contains(err.Error(), "spec.storage.growRoot: needs Ignition spec 3.2.0 or newer, and 3.1.0 was requested") {
		t.Errorf("growRoot at 3.1.0: %v", err)
	}
}

// TestStorageSwapUnitConflict: a swap unit is claimed like any file.
func TestStorageSwapUnitConflict(t *testing.T) {
	inst := specFrom(t, `spec:
  storage:
    filesystems: [{device: /dev/vdc, format: swap}]
  files:
    - {path: /etc/systemd/system/dev-vdc.swap, content: x}
`)
	if _, err := Render(inst, Options{}); err == nil || !strings.Contains(err.Error(), "/etc/systemd/system/dev-vdc.swap is already written by spec.storage.filesystems[0]") {
		t.Errorf("conflict: %v", err)
	}
}

// TestStorageDiskWithNothingToDo: a disk without partitions or
// wipeTable renders nothing, as in the cloud-init rendering.
func TestStorageDiskWithNothingToDo(t *testing.T) {
	res, err := Render(specFrom(t, "spec:\n  storage:\n    disks: [{device: /dev/vdb}]\n"), Options{})
	if err != nil || bytes.Contains(res.Config, []byte(`"disks"`)) {
		t.Errorf("%s, %v", res.Config, err)
	}
}
