package kubevirt_test

import (
	"testing"

	"github.com/vminit/vminit/internal/testing/cbitest"
	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// TestWindowsCloudInitVolume: a Windows VM's cloud-init volume is
// cloudbase-init's (spec.agent), named by what says Windows in the object;
// cloudbase-init's own NoCloud service reads the disk vminit builds for it
// and runs its user data with the executor the format names.
func TestWindowsCloudInitVolume(t *testing.T) {
	const ps = "#ps1_sysnative\nWrite-Output from-kubevirt\n"
	win := func(meta string) string {
		return "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: win-1\n  namespace: ns\n" + meta +
			"  template:\n    spec:\n      domain:\n        devices: {}\n      volumes:\n      - name: ci\n        cloudInitNoCloud: {userData: \"#ps1_sysnative\\nWrite-Output from-kubevirt\\n\"}\n"
	}
	agent := func(want string) func(*testing.T, *spec.Spec, *platform.Result) {
		return func(t *testing.T, s *spec.Spec, _ *platform.Result) {
			platformtest.Eq(t, "agent", s.Agent, want)
			platformtest.Eq(t, "user data", s.CloudInit.UserData, ps)
		}
	}
	platformtest.Run(t, []platformtest.Case{
		{Name: "windows preference", Doc: win("spec:\n  preference: {name: windows.2k22}\n"), Check: agent(spec.AgentCloudbaseInit)},
		{Name: "common template's OS label", Doc: win("  labels: {os.template.kubevirt.io/win2k22: \"true\"}\nspec:\n"), Check: agent(spec.AgentCloudbaseInit)},
		{Name: "no Windows hint", Doc: win("spec:\n  preference: {name: fedora}\n"), Check: agent(spec.AgentCloudInit),
			Warns: []string{"cloud-init ignores it", "it is Windows user data (#ps1, which cloudbase-init runs with its PowershellSysnative executor): a Windows VM says so with a windows* preference"}},
	})

	r, err := platformtest.Convert(t, win("spec:\n  preference: {name: windows.2k22}\n"), platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := cbitest.ReadInstance(t, r.Instance, media.VFAT, cbitest.NoCloudVFAT)
	if got.HostName != "win-1" || got.InstanceID != r.Instance.Spec.InstanceID {
		t.Errorf("host name %q, instance id %q", got.HostName, got.InstanceID)
	}
	if len(got.Executed) != 1 || got.Executed[0].Executor != "PowershellSysnative" || got.Executed[0].Script != ps {
		t.Errorf("executed %q", got.Executed)
	}
}
