package ignition

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testtools"
	"github.com/vminit/vminit/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const ignitionBinary = "/usr/lib/dracut/modules.d/30ignition/ignition"

func load(t testing.TB, p string) *spec.Instance {
	t.Helper()
	inst, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// goldenCases are the configs compared with testdata/*.ign and checked by
// the real ignition-validate and ignition binaries.
var goldenCases = []struct {
	name, spec string
	opts       Options
}{
	{"fcos-server", "../examples/fcos-server.yaml", Options{}},
	{"fcos-server-flatcar", "../examples/fcos-server.yaml", Options{Variant: Flatcar}},
	{"ubuntu-server-partial", "../examples/ubuntu-server/instance.yaml", Options{AllowPartial: true}},
	{"ubuntu-server-flatcar-partial", "../examples/ubuntu-server/instance.yaml", Options{Variant: Flatcar, AllowPartial: true}},
	{"dev-vm-partial", "../examples/dev-vm.yaml", Options{AllowPartial: true}},
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Render(load(t, c.spec), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			var pretty bytes.Buffer
			json.Indent(&pretty, res.Config, "", "  ")
			pretty.WriteByte('\n')
			golden := filepath.Join("testdata", c.name+".ign")
			if *update {
				os.MkdirAll("testdata", 0o755)
				if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./ignition -update)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Errorf("%s differs from the rendering (go test ./ignition -update rewrites it)", golden)
			}
			again, _ := Render(load(t, c.spec), c.opts)
			if !bytes.Equal(again.Config, res.Config) {
				t.Error("two renderings differ")
			}
		})
	}
}

// TestIgnitionValidate runs Debian's ignition-validate (Ignition 2.14,
// specs up to 3.3) on every golden config.
func TestIgnitionValidate(t *testing.T) {
	validate := testtools.Require(t, "ignition-validate")
	for _, c := range goldenCases {
		golden := filepath.Join("testdata", c.name+".ign")
		out, err := exec.Command(validate, golden).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("ignition-validate %s: %v\n%s", golden, err, out)
		}
	}
}

// applyIgnition runs the real ignition binary's fetch and files stages on
// config into a fresh root, the way the initramfs does on first boot, and
// returns the root.
func applyIgnition(t *testing.T, config []byte) string {
	t.Helper()
	bin := testtools.RequireFile(t, ignitionBinary)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	// A minimal root: the account databases useradd edits, and the core
	// user every CoreOS image has.
	for name, content := range map[string]string{
		"etc/passwd":         "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n",
		"etc/group":          "root:x:0:\nwheel:x:10:\nadm:x:4:\nsudo:x:27:\ncore:x:1000:\n",
		"etc/shadow":         "root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n",
		"etc/gshadow":        "root:*::\nwheel:*::\nadm:*::\nsudo:*::\ncore:!::\n",
		"etc/selinux/config": "SELINUXTYPE=targeted\n", // Debian's build relabels
		// As on Fedora CoreOS and Flatcar: useradd gives each user a group
		// of its own, which "owner: alice:alice" names.
		"etc/login.defs":  "USERGROUPS_ENAB yes\nUID_MIN 1000\nGID_MIN 1000\nSYS_UID_MIN 201\nSYS_GID_MIN 201\n",
		"home/core/.keep": "",
	} {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(root, "etc/shadow"), 0o600)
	// Ignition writes authorized_keys with the user's filesystem uid, so
	// the root must be traversable (t.TempDir is 0700) and home/core owned
	// by core, as on a real image.
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chown(filepath.Join(root, "home/core"), 1000, 1000)
	// A no-op setfiles first in PATH stands in for SELinux relabelling,
	// which needs a policy this machine does not have.
	stub := filepath.Join(dir, "bin")
	os.Mkdir(stub, 0o755)
	os.WriteFile(filepath.Join(stub, "setfiles"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	cfg := filepath.Join(dir, "config.ign")
	os.WriteFile(cfg, config, 0o644)
	for _, stage := range []string{"fetch", "files"} {
		cmd := exec.Command(bin, "-platform", "file", "-stage", stage, "-root", root, "-log-to-stdout",
			"-config-cache", filepath.Join(dir, "cache.json"), "-state-file", filepath.Join(dir, "state"))
		cmd.Env = append(os.Environ(), "IGNITION_CONFIG_FILE="+cfg, "PATH="+stub+":"+os.Getenv("PATH"))
		done := make(chan struct{})
		timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
		out, err := cmd.CombinedOutput()
		timer.Stop()
		close(done)
		if err != nil {
			t.Fatalf("ignition -stage %s: %v\n%s", stage, err, lastLines(out, 30))
		}
	}
	return root
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestIgnitionApplies applies the FCOS example with the real ignition
// binary and checks the tree it leaves.
func TestIgnitionApplies(t *testing.T) {
	res, err := Render(load(t, "../examples/fcos-server.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	root := applyIgnition(t, res.Config)
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Error(err)
		}
		return string(b)
	}
	mode := func(p string) os.FileMode {
		st, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Error(err)
			return 0
		}
		return st.Mode()
	}
	for p, want := range map[string]string{
		"etc/hostname":               "fcos-1\n",
		"etc/motd.d/vminit":          "fcos-1: managed by vminit.\n",
		"var/srv/app/env":            "LISTEN=:8080\n",
		"etc/sudoers.d/vminit-alice": "alice ALL=(ALL) NOPASSWD:ALL\n",
	} {
		if got := read(p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	for p, want := range map[string]os.FileMode{
		"var/srv/app/env":            0o600,
		"etc/sudoers.d/vminit-alice": 0o440,
		"etc/vminit/first-boot.sh":   0o700,
		"etc/NetworkManager/system-connections/vminit-nic0.nmconnection": 0o600,
	} {
		if got := mode(p).Perm(); got != want {
			t.Errorf("%s mode %v, want %v", p, got, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(root, "etc/localtime")); err != nil || l != "../usr/share/zoneinfo/Europe/Berlin" {
		t.Errorf("etc/localtime -> %q, %v", l, err)
	}
	for _, p := range []string{"etc/systemd/system/app.service", "etc/systemd/system/zincati.service.d/10-delay.conf",
		`etc/systemd/system/var-srv-data.mount`, "etc/systemd/system/vminit-first-boot.service", "etc/systemd/network/10-vminit-nic0.link"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Error(err)
		}
	}
	preset := read("etc/systemd/system-preset/20-ignition.preset")
	for _, u := range []string{"enable app.service", "enable var-srv-data.mount", "enable vminit-first-boot.service"} {
		if !strings.Contains(preset, u) {
			t.Errorf("preset lacks %q:\n%s", u, preset)
		}
	}
	if passwd := read("etc/passwd"); !strings.Contains(passwd, "alice:x:") {
		t.Errorf("alice not in passwd:\n%s", passwd)
	}
	if g := read("etc/group"); !strings.Contains(g, "wheel:x:10:alice") {
		t.Errorf("alice not in wheel:\n%s", g)
	}
	st, err := os.Stat(filepath.Join(root, "var/srv/app/env"))
	if err == nil {
		// useradd gave alice the next free uid after core's.
		if uid := fileUID(st); uid != 1001 {
			t.Errorf("var/srv/app/env owned by uid %d, want alice's 1001", uid)
		}
	}
	keys := read("home/alice/.ssh/authorized_keys.d/ignition")
	if !strings.Contains(keys, "alice@example.com") {
		t.Errorf("alice's keys: %q", keys)
	}
	if core := read("home/core/.ssh/authorized_keys.d/ignition"); !strings.Contains(core, "ops@example.com") {
		t.Errorf("core's keys: %q", core)
	}
	nm := read("etc/NetworkManager/system-connections/vminit-nic0.nmconnection")
	for _, want := range []string{"interface-name=nic0", "mac-address=52:54:00:12:34:01", "method=manual", "address1=192.0.2.20/24", "gateway=192.0.2.1", "dns=192.0.2.53;", "dns-search=example.com;"} {
		if !strings.Contains(strings.ToLower(nm), strings.ToLower(want)) {
			t.Errorf("keyfile lacks %q:\n%s", want, nm)
		}
	}
}

func TestVersionSelection(t *testing.T) {
	inst := load(t, "../examples/fcos-server.yaml")
	res, err := Render(inst, Options{})
	if err != nil || res.Version != "3.0.0" {
		t.Fatalf("default version %q, %v; want the lowest, 3.0.0", res.Version, err)
	}
	for _, v := range Versions() {
		res, err := Render(inst, Options{Version: v})
		if err != nil || res.Version != v || !strings.Contains(string(res.Config), `"version":"`+v+`"`) {
			t.Errorf("forced %s: %v %v", v, res, err)
		}
	}
	if _, err := Render(inst, Options{Version: "3.7.0-experimental"}); err == nil {
		t.Error("an experimental version was accepted")
	}
	// setuid bits are honoured only from spec 3.6.
	m := spec.Mode(0o4755)
	inst.Spec.Files = append(inst.Spec.Files, spec.File{Path: "/usr/local/bin/x", Mode: &m})
	if res, err := Render(inst, Options{}); err != nil || res.Version != "3.6.0" {
		t.Errorf("setuid file: version %v, %v; want 3.6.0", res, err)
	}
	_, err = Render(inst, Options{Version: "3.3.0"})
	if err == nil || !strings.Contains(err.Error(), "needs Ignition spec 3.6.0") {
		t.Errorf("setuid file forced to 3.3.0: %v", err)
	}
}

func TestUserConfigAndButaneMerge(t *testing.T) {
	inst := load(t, "../examples/fcos-server.yaml")
	inst.Spec.Ignition.Config = `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","overwrite":true,"contents":{"source":"data:,override%0A"}}]}}`
	inst.Spec.Ignition.Butane = "variant: fcos\nversion: 1.1.0\nstorage:\n  files:\n    - path: /etc/from-butane\n      contents:\n        inline: hi\n"
	res, err := Render(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != "3.4.0" {
		t.Errorf("version %s, want the user config's 3.4.0", res.Version)
	}
	cfg := string(res.Config)
	if !strings.Contains(cfg, "data:,override%0A") || strings.Contains(cfg, "data:,fcos-1%0A") {
		t.Errorf("the user's /etc/hostname did not win the merge:\n%s", cfg)
	}
	if !strings.Contains(cfg, "/etc/from-butane") {
		t.Errorf("the Butane file is missing:\n%s", cfg)
	}
	inst.Spec.Ignition.Butane = "variant: fcos\nversion: 1.1.0\nstorage:\n  filez: []\n"
	if _, err := Render(inst, Options{Strict: true}); err == nil || !strings.Contains(err.Error(), "spec.ignition.butane") {
		t.Errorf("an unused Butane key under Strict: %v", err)
	}
	if res, err := Render(inst, Options{}); err != nil || len(res.Warnings) == 0 {
		t.Errorf("an unused Butane key without Strict: %v, warnings %v", err, res)
	}
}

func TestUnsupportedFeatures(t *testing.T) {
	inst := load(t, "../examples/ubuntu-server/instance.yaml")
	_, err := Render(inst, Options{})
	if err == nil || !strings.Contains(err.Error(), "spec.packages: Ignition cannot install packages") {
		t.Errorf("packages without AllowPartial: %v", err)
	}
	res, err := Render(inst, Options{AllowPartial: true})
	if err != nil || len(res.Warnings) == 0 {
		t.Errorf("AllowPartial: %v, %v", res, err)
	}
}

// BenchmarkRender renders and validates: Typical is a small config (a
// default-user key, a user with sudo, two files, a unit, one command);
// Large is the FCOS example (network keyfile, mounts, 9 files).
func BenchmarkRender(b *testing.B) {
	typical := load(b, "../examples/fcos-server.yaml")
	typical.Spec.Network, typical.Spec.Mounts, typical.Spec.Timezone = nil, nil, ""
	typical.Spec.Units = typical.Spec.Units[:1]
	typical.Spec.Commands = typical.Spec.Commands[:1]
	for _, c := range []struct {
		name string
		inst *spec.Instance
	}{{"Typical", typical}, {"Large", load(b, "../examples/fcos-server.yaml")}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(c.inst, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
