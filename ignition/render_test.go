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

	"github.com/vminit/vminit/internal/ignitiontest"
	"github.com/vminit/vminit/internal/testtools"
	"github.com/vminit/vminit/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

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

// TestIgnitionApplies applies the FCOS example with the real ignition
// binary and checks the tree it leaves.
func TestIgnitionApplies(t *testing.T) {
	res, err := Render(load(t, "../examples/fcos-server.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	root := ignitiontest.Apply(t, res.Config)
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
