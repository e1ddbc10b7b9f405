package check_test

import (
	"strings"
	"testing"

	"github.com/vminit/vminit/check"
	"github.com/vminit/vminit/spec"
)

// TestUserDataOnlyIgnored: user data cloud-init ignores, given as the whole
// user-data (what a platform delivered: KubeVirt's quick-start "Hi."), is
// built as given, with a warning that cloud-init will ignore it.
func TestUserDataOnlyIgnored(t *testing.T) {
	inst, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: vm}\nspec:\n  cloudInit:\n    userDataOnly: true\n    userData: \"Hi.\\n\"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	rep := check.Instance(inst, check.Target{})
	if !rep.OK() {
		t.Fatalf("refused: %v", rep.Errors)
	}
	if ud, _ := rep.Seed.Lookup("user-data"); string(ud) != "Hi.\n" {
		t.Errorf("user-data %q, want it as given", ud)
	}
	if len(rep.Warnings) != 1 || !strings.HasPrefix(rep.Warnings[0].Error(), "spec.cloudInit.userData: cloud-init does not recognise this data") || !strings.Contains(rep.Warnings[0].Error(), "delivered as given") {
		t.Errorf("warnings %v, want one saying cloud-init ignores the user data", rep.Warnings)
	}
}
