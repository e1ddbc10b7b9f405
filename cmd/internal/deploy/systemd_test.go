package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// TestSystemdUnits walks README.md's "One host" as a reader does: the
// binary's origin is said (make dist, the .deb, go build) and the path
// it installs from is the one make dist writes; every unit it installs is
// in systemd/; and systemd itself reads the units without a complaint
// (`systemd-analyze verify`: keys, sections, the commands' paths), the
// template as the instance the README enables, the server's binary
// standing in for /usr/bin/vminit, which only the install provides.
func TestSystemdUnits(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, host, _ := strings.Cut(string(readme), "## One host: systemd")
	host, _, _ = strings.Cut(host, "\n## ")
	for _, want := range []string{"make dist", "dist/vminit-linux-amd64", "dpkg -i dist/vminit_", "go build", "install -m 0755 ../dist/vminit-linux-amd64 /usr/bin/vminit",
		"systemctl enable --now vminit-mds-address@virbr0", ".network"} {
		if !strings.Contains(host, want) {
			t.Errorf("README.md's systemd steps lack %q (where the binary comes from, how the address stays)", want)
		}
	}
	installed := regexp.MustCompile(`systemd/[\w@.-]+\.service`).FindAllString(host, -1)
	if len(installed) < 2 {
		t.Errorf("README.md's systemd steps install %v, want the server's unit and the address's", installed)
	}
	for _, u := range installed {
		if _, err := os.Stat(u); err != nil {
			t.Errorf("README.md installs %s: %v", u, err)
		}
	}

	analyze := testtools.Require(t, "systemd-analyze")
	dir := t.TempDir()
	units, _ := filepath.Glob("systemd/*.service")
	var args []string
	for _, u := range units {
		data, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.ReplaceAll(string(data), "/usr/bin/vminit ", "/bin/true "))
		name := strings.Replace(filepath.Base(u), "@.", "@virbr0.", 1)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, filepath.Join(dir, name))
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, args...)...).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %v: %v\n%s", units, err, out)
	}
}
