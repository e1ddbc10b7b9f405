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

	"github.com/coreos/go-semver/semver"
	"github.com/coreos/ign-converter/translate/v23tov30"
	v23 "github.com/coreos/ignition/config/v2_3"

	"github.com/vminit/vminit/internal/testing/ignitiontest"
	"github.com/vminit/vminit/internal/testing/testtools"
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

type goldenCase struct {
	name, spec string
	opts       Options
	version    string // the spec version the config must have
	// adjust adds what a merged user config asks for to the guest the
	// spec describes.
	adjust func(*guest)
}

// goldenCases are compared with testdata/<name>.ign, and those of spec
// 3.3.0 or older (the newest Debian's Ignition 2.14 reads) are checked by
// the real ignition-validate and applied by the real ignition binary.
var goldenCases = []goldenCase{
	{name: "fcos-server", spec: "../examples/fcos-server.yaml", version: "3.0.0"},
	{name: "fcos-server-flatcar", spec: "../examples/fcos-server.yaml", opts: Options{Variant: Flatcar}, version: "3.0.0"},
	{name: "fcos-server-rhcos-2.2", spec: "../examples/fcos-server.yaml", opts: Options{Variant: RHCOS, Version: "2.2.0"}, version: "2.2.0"},
	{name: "fcos-server-flatcar-2.3", spec: "../examples/fcos-server.yaml", opts: Options{Variant: Flatcar, Version: "2.3.0"}, version: "2.3.0"},
	{name: "ubuntu-server-partial", spec: "../examples/ubuntu-server/instance.yaml", opts: Options{AllowPartial: true}, version: "3.0.0"},
	{name: "ubuntu-server-flatcar-partial", spec: "../examples/ubuntu-server/instance.yaml", opts: Options{Variant: Flatcar, AllowPartial: true}, version: "3.0.0"},
	{name: "dev-vm-partial", spec: "../examples/dev-vm.yaml", opts: Options{AllowPartial: true}, version: "3.0.0"},
	{name: "users", spec: "testdata/specs/users.yaml", version: "3.0.0"},
	{name: "users-flatcar-2.3", spec: "testdata/specs/users.yaml", opts: Options{Variant: Flatcar, Version: "2.3.0"}, version: "2.3.0"},
	{name: "files", spec: "testdata/specs/files.yaml", version: "3.0.0"},
	{name: "system", spec: "testdata/specs/system.yaml", version: "3.0.0"},
	{name: "system-3.3", spec: "testdata/specs/system.yaml", opts: Options{Version: "3.3.0"}, version: "3.3.0"},
	{name: "network-fcos", spec: "testdata/specs/network.yaml", version: "3.0.0"},
	{name: "network-flatcar", spec: "testdata/specs/network.yaml", opts: Options{Variant: Flatcar}, version: "3.0.0"},
	{name: "merge-config", spec: "testdata/specs/merge-config.yaml", version: "3.0.0", adjust: func(g *guest) {
		g.files["etc/motd"] = wantFile{data: strp("from the user's Ignition\n"), mode: 0o644, user: "root", group: "root"}
		g.files["etc/systemd/system/hello.service"] = wantFile{mode: 0o644, user: "root", group: "root"}
		g.presets["hello.service"] = "enable"
		g.users[DefaultUser].keys = append(g.users[DefaultUser].keys, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOcQfB+HkOOjJNE+kDUn8dHs94p8jX2ceyNdSdYS5bh alice@example.com")
	}},
	{name: "merge-butane", spec: "testdata/specs/merge-butane.yaml", version: "3.0.0", adjust: func(g *guest) {
		g.files["etc/motd"] = wantFile{data: strp("from Butane\n"), mode: 0o644, user: "root", group: "root"}
		g.files["etc/from-butane.conf"] = wantFile{data: strp("key = value\n"), mode: 0o640, user: "root", group: "root"}
		g.files["etc/systemd/system/butane-hello.service"] = wantFile{mode: 0o644, user: "root", group: "root"}
		g.dirs["var/lib/from-butane"] = wantFile{user: "root", group: "root"}
		g.presets["butane-hello.service"] = "enable"
	}},
	{name: "special-modes", spec: "testdata/specs/special-modes.yaml", version: "3.6.0"},
}

func (c goldenCase) path() string { return filepath.Join("testdata", c.name+".ign") }

// render renders a golden case, checking that rendering twice gives the
// same bytes.
func (c goldenCase) render(t *testing.T) *Result {
	t.Helper()
	res, err := Render(load(t, c.spec), c.opts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Render(load(t, c.spec), c.opts)
	if err != nil || !bytes.Equal(again.Config, res.Config) {
		t.Fatalf("two renderings differ (%v)", err)
	}
	if res.Version != c.version {
		t.Errorf("version %s, want %s", res.Version, c.version)
	}
	return res
}

// applicable reports whether Debian's Ignition 2.14 reads the case's
// config: spec 3.0.0 to 3.3.0.
func (c goldenCase) applicable() bool {
	v := semver.New(c.version)
	return v.Major == 3 && v.Minor <= 3
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			res := c.render(t)
			var pretty bytes.Buffer
			json.Indent(&pretty, res.Config, "", "  ")
			pretty.WriteByte('\n')
			if *update {
				if err := os.WriteFile(c.path(), pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(c.path())
			if err != nil {
				t.Fatalf("%v (go test ./ignition -update writes it)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Errorf("%s differs from the rendering (go test ./ignition -update rewrites it)", c.path())
			}
			if bytes.Contains(res.Config, []byte("{}")) || bytes.Contains(res.Config, []byte("null")) || bytes.Contains(res.Config, []byte("[]")) {
				t.Errorf("empty objects or nulls in the output:\n%s", res.Config)
			}
		})
	}
}

// TestIgnitionValidate runs Debian's ignition-validate (Ignition 2.14,
// specs up to 3.3.0) on every golden config it reads: exit 0, no output
// (no warnings either).
func TestIgnitionValidate(t *testing.T) {
	validate := testtools.Require(t, "ignition-validate")
	for _, c := range goldenCases {
		if !c.applicable() {
			continue
		}
		out, err := exec.Command(validate, c.path()).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("ignition-validate %s: %v\n%s", c.path(), err, out)
		}
	}
}

// TestIgnitionApplies applies every golden config Debian's Ignition reads
// with the real ignition binary, and checks the root it leaves against
// what the spec asks for: files with their content, modes and owners,
// units, drop-ins and presets, links, users with their groups, passwords
// and keys, and nothing else. Spec 2.x configs are first translated to 3.0
// with ign-converter, as Flatcar's Ignition does at boot.
func TestIgnitionApplies(t *testing.T) {
	for _, c := range goldenCases {
		config, err := os.ReadFile(c.path())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.version == "2.3.0":
			cfg, rpt, err := v23.Parse(config)
			if err != nil || len(rpt.Entries) > 0 {
				t.Fatalf("%s: %v %v", c.name, err, rpt)
			}
			up, err := v23tov30.Translate(cfg, nil)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if config, err = json.Marshal(up); err != nil {
				t.Fatal(err)
			}
		case !c.applicable():
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			inst := load(t, c.spec)
			variant := c.opts.Variant
			if variant == "" {
				variant = FCOS
			}
			g := expect(t, inst, variant)
			if c.adjust != nil {
				c.adjust(g)
			}
			root := ignitiontest.Apply(t, config)
			checkGuest(t, root, g)
		})
	}
}

func TestExamplesRenderForEveryVariant(t *testing.T) {
	for _, p := range []string{"../examples/fcos-server.yaml", "../examples/ubuntu-server/instance.yaml", "../examples/dev-vm.yaml"} {
		for _, v := range []Variant{FCOS, RHCOS, Flatcar} {
			if _, err := Render(load(t, p), Options{Variant: v, AllowPartial: true}); err != nil {
				t.Errorf("%s as %s: %v", p, v, err)
			}
		}
	}
}

func TestOptions(t *testing.T) {
	inst := load(t, "../examples/fcos-server.yaml")
	if _, err := Render(inst, Options{Variant: "coreos"}); err == nil || !strings.Contains(err.Error(), "unknown Ignition variant") {
		t.Errorf("unknown variant: %v", err)
	}
	for _, v := range []string{"3.7.0-experimental", "3.4.0-experimental", "2.4.0", "4.0.0", "x"} {
		if _, err := Render(inst, Options{Version: v}); err == nil || !strings.Contains(err.Error(), "want one of 2.2.0, 2.3.0, 3.0.0") {
			t.Errorf("version %q: %v", v, err)
		}
	}
}
