package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/testtools"
)

// isoFiles extracts an ISO image with xorriso, as a guest's kernel would
// mount it, and returns its directory, its files by name and its volume
// label (isoinfo).
func isoFiles(t *testing.T, iso string) (string, map[string][]byte, string) {
	t.Helper()
	xorriso, isoinfo := testtools.Require(t, "xorriso"), testtools.Require(t, "isoinfo")
	dir := t.TempDir()
	if out, err := exec.Command(xorriso, "-osirrox", "on", "-indev", iso, "-extract", "/", dir).CombinedOutput(); err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	files := map[string][]byte{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		files[e.Name()], _ = os.ReadFile(filepath.Join(dir, e.Name()))
	}
	out, err := exec.Command(isoinfo, "-d", "-i", iso).Output()
	if err != nil {
		t.Fatalf("isoinfo: %v", err)
	}
	label := ""
	for l := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(l, "Volume id: "); ok {
			label = strings.TrimSpace(v)
		}
	}
	return dir, files, label
}

// TestBuildUserDataAsCloudLocalds walks a cloud-localds user's first try
// (build once refused raw user data): `vminit build USER-DATA
// [META-DATA] [--network-config F] -o seed.iso` writes the seed
// cloud-localds (cloud-image-utils) writes from the same files — the same
// files with the same bytes, the label cidata, cloud-localds's meta-data
// when none is given — and cloud-init 22.4's own NoCloud code reads it.
func TestBuildUserDataAsCloudLocalds(t *testing.T) {
	localds := testtools.Require(t, "cloud-localds")
	testtools.Require(t, "genisoimage") // cloud-localds's
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cloudConfig, err := os.ReadFile(filepath.Join(repoRoot, "examples", "user-data"))
	if err != nil {
		t.Fatal(err)
	}
	ud := write("user-data", string(cloudConfig))
	script := write("script", "#!/bin/sh\necho hello > /run/hello\n")
	md := write("meta-data", "instance-id: web-1\nlocal-hostname: web-1\n")
	nc := write("network-config", "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n")

	for _, tc := range []struct {
		name            string
		ours, localds   []string
		instanceID      string
		network, config bool
	}{
		{"user-data alone", []string{ud}, []string{ud}, "iid-local01", false, true},
		{"meta-data and network-config", []string{ud, md, "--network-config", nc}, []string{"-N", nc, "OUT", ud, md}, "web-1", true, true},
		{"a script", []string{script, md}, []string{"OUT", script, md}, "web-1", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, theirs := filepath.Join(t.TempDir(), "seed.iso"), filepath.Join(t.TempDir(), "seed.iso")
			if code, _, stderr := run(t, append([]string{"build", "-o", ours}, tc.ours...)...); code != ExitOK {
				t.Fatalf("build: exit %d\n%s", code, stderr)
			}
			args := tc.localds
			if i := slices.Index(args, "OUT"); i >= 0 {
				args = slices.Replace(slices.Clone(args), i, i+1, theirs)
			} else {
				args = append([]string{theirs}, args...)
			}
			if out, err := exec.Command(localds, args...).CombinedOutput(); err != nil {
				t.Fatalf("cloud-localds %v: %v\n%s", args, err, out)
			}
			seedDir, got, label := isoFiles(t, ours)
			_, want, wantLabel := isoFiles(t, theirs)
			if label != wantLabel || label != "cidata" {
				t.Errorf("label %q, cloud-localds's %q", label, wantLabel)
			}
			for name := range mergeKeys(got, want) {
				if !bytes.Equal(got[name], want[name]) {
					t.Errorf("%s: ours %q, cloud-localds's %q", name, got[name], want[name])
				}
			}
			s := cloudinittest.ReadSeed(t, cloudinittest.NoCloudReader, seedDir, nil)
			if s.InstanceID != tc.instanceID || (s.NetworkConfig != nil) != tc.network {
				t.Errorf("cloud-init reads instance-id %q, network-config %v", s.InstanceID, s.NetworkConfig)
			}
			if tc.config && s.Config["hostname"] != "web-1" {
				t.Errorf("cloud-init's final config: %v", s.Config)
			}
			if !tc.config && !slices.Contains(s.PartTypes, "text/x-shellscript") {
				t.Errorf("cloud-init reads the script as %v", s.PartTypes)
			}
		})
	}
}

func mergeKeys(a, b map[string][]byte) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// TestBuildUserDataChecks: what cloud-localds would copy blindly and
// cloud-init then mishandles is named, with its file, key and line, and
// nothing is written; a spec's flags are refused; a YAML document that is
// neither a spec nor user data says what makes user data and which
// command converts it.
func TestBuildUserDataChecks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	bad := write("bad", "#cloud-config\nusers:\n  - name: x\n    sudo: 5\npackages: nginx\n")
	noID := write("md", "local-hostname: x\n")
	plain := write("plain", "hostname: x\nusers: []\n")
	out := filepath.Join(dir, "seed.iso")

	code, _, stderr := run(t, "build", bad, "-o", out)
	if code != ExitOK || !strings.Contains(stderr, "warning: "+bad+": cloud-init's schema: users[0].sudo (line 4)") ||
		!strings.Contains(stderr, bad+": cloud-init's schema: packages (line 5): got string, want array") {
		t.Errorf("schema findings are warnings: %d\n%s", code, stderr)
	}
	os.Remove(out)
	if code, _, stderr := run(t, "build", bad, "-o", out, "--strict"); code != ExitInvalid || !strings.Contains(stderr, "users[0].sudo (line 4)") || !strings.Contains(stderr, "packages (line 5)") {
		t.Errorf("--strict: every finding an error: %d\n%s", code, stderr)
	}
	if code, _, stderr := run(t, "build", bad, noID, "-o", out); code != ExitInvalid || !strings.Contains(stderr, noID+": no instance-id") {
		t.Errorf("meta-data without instance-id: %d\n%s", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused seed was written")
	}
	if code, _, stderr := run(t, "build", bad, "-o", out, "--datasource", "configdrive"); code != ExitUsage || !strings.Contains(stderr, "--datasource concern a spec (vminit convert") {
		t.Errorf("a spec's flag: %d\n%s", code, stderr)
	}
	if code, _, stderr := run(t, "build", filepath.Join(repoRoot, "examples", "dev-vm.yaml"), "-o", out, "--network-config", noID); code != ExitUsage || !strings.Contains(stderr, "spec.network") {
		t.Errorf("--network-config with a spec: %d\n%s", code, stderr)
	}
	if code, _, stderr := run(t, "build", plain, "-o", out); code != ExitInvalid || !strings.Contains(stderr, "starts with #cloud-config or #!") || !strings.Contains(stderr, "vminit convert USER-DATA --to spec") {
		t.Errorf("YAML that is neither: %d\n%s", code, stderr)
	}
}
