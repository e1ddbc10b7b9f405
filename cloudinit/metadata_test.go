package cloudinit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

func TestMetaDataReadsBack(t *testing.T) {
	inst := loadSpec(t, fullSpec, nil)
	md, err := MetaData(inst)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	cloudinittest.Run(t, `
import json, sys
from cloudinit import util
json.dump(util.load_yaml(json.load(sys.stdin)), sys.stdout)
`, string(md), &got)
	want := map[string]any{
		"instance-id":    inst.Spec.InstanceID,
		"local-hostname": "web-1.prod.example.com",
		"public-keys":    []any{keyOps},
		"dsmode":         "local",
		"count":          3.0,
		"ratio":          0.5,
		"tags":           map[string]any{"env": "prod", "on": "yes"},
	}
	if a, b := jsonString(got), jsonString(want); a != b {
		t.Errorf("cloud-init reads\n%s\nwant\n%s", a, b)
	}

	cd, err := ConfigDriveMetaData(inst)
	if err != nil {
		t.Fatal(err)
	}
	var cdm map[string]any
	if err := json.Unmarshal(cd, &cdm); err != nil {
		t.Fatalf("%v\n%s", err, cd)
	}
	if cdm["uuid"] != inst.Spec.InstanceID || cdm["hostname"] != "web-1.prod.example.com" || cdm["name"] != "web-1" {
		t.Errorf("meta_data.json = %s", cd)
	}
	if keys, ok := cdm["public_keys"].(map[string]any); !ok || keys["0"] != keyOps {
		t.Errorf("public_keys = %#v", cdm["public_keys"])
	}
}

func jsonString(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

func TestConfigDriveMetaDataRefusesGeneratedKeys(t *testing.T) {
	// spec.Validate refuses these keys too; the renderer checks again for
	// library users who build an Instance in Go without validating it.
	inst := loadSpec(t, minimalSpec, nil)
	inst.Spec.CloudInit.MetaData = map[string]any{"uuid": "x", "launch_index": 2, "other": "fine"}
	_, err := ConfigDriveMetaData(inst)
	for _, want := range []string{"spec.cloudInit.metaData.launch_index: generated for ConfigDrive", "spec.cloudInit.metaData.uuid: generated for ConfigDrive from spec.instanceID"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

func TestVendorData(t *testing.T) {
	inst := loadSpec(t, minimalSpec, nil)
	if VendorData(inst) != nil {
		t.Error("vendor-data without spec.cloudInit.vendorData")
	}
	if b, err := ConfigDriveVendorData(inst); b != nil || err != nil {
		t.Error("vendor_data.json without spec.cloudInit.vendorData")
	}
	inst.Spec.CloudInit.VendorData = "#cloud-config\nruncmd: [\"echo <vendor> & co\"]\n"
	b, err := ConfigDriveVendorData(inst)
	if err != nil {
		t.Fatal(err)
	}
	var got any
	// cloud-init's own reading of the file (sources.convert_vendordata).
	cloudinittest.Run(t, `
import json, sys
from cloudinit import sources
json.dump(sources.convert_vendordata(json.loads(json.load(sys.stdin))), sys.stdout)
`, string(b), &got)
	if got != inst.Spec.CloudInit.VendorData {
		t.Errorf("cloud-init reads vendor data %q from %s", got, b)
	}
}
