package platform_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cbitest"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/spec"
)

// corpusResult converts the corpus file dir/name, which holds one VM.
func corpusResult(t *testing.T, dir, name string) *platform.Result {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "corpus", dir, name))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := convert.Read(t.Context(), name, data, platform.Options{Name: "win"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("%d VMs", len(rs))
	}
	return rs[0]
}

// TestCorpusWindows: the platforms' own published Windows VMs, read as
// each platform delivers them. KubeVirt's user guide's sysprep volume: its
// answer file passed through, its passes and components named.
// KubeVirt's example VM with the windows preference: its cloud-init volume
// is cloudbase-init's, whose own NoCloud service reads the disk and runs
// its script with the executor the script names.
func TestCorpusWindows(t *testing.T) {
	t.Run("kubevirt sysprep", func(t *testing.T) {
		r := corpusResult(t, "kubevirt", "ug-startup-scripts-L912.yaml")
		ws := strings.Join(r.Warnings, "\n")
		for _, w := range []string{
			"autounattend.xml passed through as KubeVirt delivers it, on the disc labelled unattendCD",
			"windowsPE (Microsoft-Windows-International-Core-WinPE, Microsoft-Windows-PnpCustomizationsWinPE, Microsoft-Windows-Setup)",
			"not checked: each component's settings",
		} {
			if !strings.Contains(ws, w) {
				t.Errorf("warnings lack %q:\n%s", w, ws)
			}
		}
	})
	t.Run("kubevirt windows preference", func(t *testing.T) {
		r := corpusResult(t, "kubevirt", "kubevirt-vm-cirros-clarge-windows.yaml")
		if r.Instance == nil || r.Instance.Spec.Agent != spec.AgentCloudbaseInit {
			t.Fatalf("instance %+v", r.Instance)
		}
		got := cbitest.ReadInstance(t, r.Instance, media.ISO9660, cbitest.NoCloudISO)
		if got.InstanceID != r.Instance.Spec.InstanceID || got.HostName != r.Instance.Spec.Hostname {
			t.Errorf("instance id %q, host name %q", got.InstanceID, got.HostName)
		}
		if len(got.Executed) != 1 || got.Executed[0].Executor != "Bash" || got.Executed[0].Script != r.Instance.Spec.CloudInit.UserData {
			t.Errorf("executed %q", got.Executed)
		}
	})
}
