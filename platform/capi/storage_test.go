package capi_test

import (
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// TestSpecStoragePartitionsAsCABPK: the partitions spec.storage renders
// for a diskSetup are the ones CABPK's disk_setup makes, as cloud-init
// 22.4's own code lays them out (get_partition_layout) and types them
// (exec_mkpart_gpt's sgdisk code), device by device.
func TestSpecStoragePartitionsAsCABPK(t *testing.T) {
	doc := kc(`diskSetup:
  partitions:
  - {device: /dev/disk/azure/scsi1/lun0, layout: true, overwrite: false, tableType: gpt}
  - {device: /dev/sdc, diskLayout: [{percentage: 30, partitionType: LinuxSwap}, {percentage: 50}], overwrite: true, tableType: gpt}
  - {device: /dev/sdd, diskLayout: [{percentage: 20, partitionType: Linux}, {percentage: 80, partitionType: LinuxSwap}], tableType: gpt}
`)
	// CABPK's disk_setup for the same diskSetup, as its template writes it.
	cabpk := map[string]any{
		"/dev/disk/azure/scsi1/lun0": true,
		"/dev/sdc":                   []any{[]any{30, "82"}, 50},
		"/dev/sdd":                   []any{[]any{20, "83"}, []any{80, "82"}},
	}
	var vm map[string]any
	platformtest.Run(t, []platformtest.Case{{Name: "CAPZ and layouts", Doc: doc, Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
		cc, err := cloudinit.CloudConfig(r.Instance)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			DiskSetup map[string]struct {
				Layout any `yaml:"layout"`
			} `yaml:"disk_setup"`
		}
		if err := yaml.Unmarshal(cc, &cfg); err != nil {
			t.Fatal(err)
		}
		vm = map[string]any{}
		for dev, d := range cfg.DiskSetup {
			vm[dev] = d.Layout
		}
	}}})
	if vm == nil {
		return
	}
	var got map[string][2]any
	cloudinittest.Run(t, `
import json, sys
from cloudinit.config import cc_disk_setup
def made(layout):
    size = 1 << 30
    return [[("8300" if t is None else str(t).ljust(4, "0")), span] for t, span in cc_disk_setup.get_partition_layout("gpt", size, layout)]
pairs = json.load(sys.stdin)
json.dump({dev: [made(p["cabpk"]), made(p["vminit"])] for dev, p in pairs.items()}, sys.stdout)
`, map[string]map[string]any{
		"/dev/disk/azure/scsi1/lun0": {"cabpk": cabpk["/dev/disk/azure/scsi1/lun0"], "vminit": vm["/dev/disk/azure/scsi1/lun0"]},
		"/dev/sdc":                   {"cabpk": cabpk["/dev/sdc"], "vminit": vm["/dev/sdc"]},
		"/dev/sdd":                   {"cabpk": cabpk["/dev/sdd"], "vminit": vm["/dev/sdd"]},
	}, &got)
	for dev, p := range got {
		platformtest.Eq(t, dev, p[1], p[0])
	}
}
