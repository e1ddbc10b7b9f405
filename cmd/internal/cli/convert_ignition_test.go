package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `vminit convert config.ign --to spec` recognises an Ignition config: the
// spec carries it (agent ignition, spec.ignition.config) and builds the
// same files back; a 2.x config too.
func TestConvertIgnitionConfigToSpec(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, config string }{
		{"v3", `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/from-ign","contents":{"source":"data:,hello"}}]}}`},
		{"v2", `{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/from-ign","mode":420,"contents":{"source":"data:,hello"}}]}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(dir, c.name+".ign")
			os.WriteFile(in, []byte(c.config), 0o600)
			specFile := filepath.Join(dir, c.name+".yaml")
			if code, _, stderr := run(t, "convert", in, "--to", "spec", "-o", specFile); code != ExitOK {
				t.Fatalf("convert: exit %d: %s", code, stderr)
			}
			spec, _ := os.ReadFile(specFile)
			if !strings.Contains(string(spec), "agent: ignition") {
				t.Errorf("spec:\n%s", spec)
			}
			out := filepath.Join(dir, c.name+"-out.ign")
			if code, _, stderr := run(t, "build", specFile, "-o", out); code != ExitOK {
				t.Fatalf("build: exit %d: %s\n%s", code, stderr, spec)
			}
			built, _ := os.ReadFile(out)
			if !strings.Contains(string(built), `"path":"/etc/from-ign"`) || !strings.Contains(string(built), "data:,hello") {
				t.Errorf("built:\n%s", built)
			}
		})
	}
}
