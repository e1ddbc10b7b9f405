package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCloudbaseInitUserData: convert and validate know cloudbase-init's
// own user-data formats. Before spec.agent cloudbase-init, #ps1, rem cmd
// and EC2's tags were read as platform objects and refused.
func TestCloudbaseInitUserData(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"ps1":        "#ps1\nWrite-Output hi\n",
		"ps1_x86":    "#ps1_x86\nWrite-Output hi\n",
		"cmd":        "rem cmd\necho hi\n",
		"powershell": "<powershell>\nWrite-Output hi\n</powershell>\n",
		"script":     "<script>\necho hi\n</script>\n",
	} {
		t.Run(name, func(t *testing.T) {
			ud := filepath.Join(dir, name+".txt")
			if err := os.WriteFile(ud, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, name+".yaml")
			if code, _, stderr := run(t, "convert", ud, "--to", "spec", "--name", "win-"+strings.ReplaceAll(name, "_", "-"), "-o", out); code != ExitOK {
				t.Fatalf("convert: exit %d: %s", code, stderr)
			}
			got, _ := os.ReadFile(out)
			if !strings.Contains(string(got), "agent: cloudbase-init") {
				t.Errorf("spec:\n%s", got)
			}
			if code, stdout, stderr := run(t, "validate", out); code != ExitOK || !strings.Contains(stdout, "cloudbase-init: nocloud seed") {
				t.Errorf("validate: exit %d: %s%s", code, stdout, stderr)
			}
			if code, _, stderr := run(t, "convert", ud, "--to", "ignition"); code != ExitInvalid || !strings.Contains(stderr, "Windows user data") {
				t.Errorf("convert --to ignition: exit %d: %s", code, stderr)
			}
		})
	}
}

// TestCloudbaseInitValidate: the Windows example builds; what
// cloudbase-init cannot do is an error naming the field and its line.
func TestCloudbaseInitValidate(t *testing.T) {
	const ex = "../../../examples/windows-server.yaml"
	for _, ds := range []string{"nocloud", "configdrive"} {
		if code, stdout, stderr := run(t, "validate", ex, "--datasource", ds); code != ExitOK || !strings.Contains(stdout, "cloudbase-init: "+ds+" seed") {
			t.Errorf("validate --datasource %s: exit %d: %s%s", ds, code, stdout, stderr)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: win-x}\nspec:\n  agent: cloudbase-init\n  packages: [git]\n  users:\n    - {name: ops, passwordHash: \"$6$salt$abc\", sudo: \"ALL=(ALL) ALL\"}\n  cloudInit:\n    userData: |\n      #cloud-config\n      apt: {}\n"
	if err := os.WriteFile(bad, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "validate", bad)
	for _, want := range []string{
		"bad.yaml:6: spec.packages: not for a cloudbase-init guest",
		"bad.yaml:8: spec.users[0].passwordHash: not for a cloudbase-init guest",
		"bad.yaml:8: spec.users[0].sudo: not for a cloudbase-init guest",
		"spec.cloudInit.userData: #cloud-config line 2: apt: cloudbase-init has no module for it",
	} {
		if code != ExitInvalid || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, want %q in:\n%s", code, want, stderr)
		}
	}
}
