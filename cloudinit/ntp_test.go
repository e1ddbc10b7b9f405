package cloudinit

import (
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// TestNTP: spec.ntp is cc_ntp's ntp key, enabled, which cloud-init 22.4's
// schema accepts.
func TestNTP(t *testing.T) {
	inst := loadSpec(t, "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: dev}\nspec:\n  ntp: {servers: [192.0.2.123, ntp1.example.com], pools: [pool.ntp.org]}\n", nil)
	cc, err := CloudConfig(inst)
	if err != nil {
		t.Fatal(err)
	}
	want := "ntp:\n  enabled: true\n  servers: [192.0.2.123, ntp1.example.com]\n  pools: [pool.ntp.org]\n"
	if !strings.Contains(string(cc), want) {
		t.Errorf("cloud-config:\n%s\nwant:\n%s", cc, want)
	}
	if err := cloudinittest.Schema(t, cc); err != nil {
		t.Errorf("%v\n%s", err, cc)
	}
}
