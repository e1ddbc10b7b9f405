package ignition

import (
	"encoding/json"
	"strings"
	"testing"

	v22 "github.com/coreos/ignition/config/v2_2"
	v23 "github.com/coreos/ignition/config/v2_3"

	"github.com/vminit/vminit/spec"
)

// specFrom decodes, defaults and validates a spec document.
func specFrom(t testing.TB, doc string) *spec.Instance {
	t.Helper()
	inst, _, err := spec.Decode([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: t-1}\n" + doc))
	if err != nil {
		t.Fatal(err)
	}
	inst.Default()
	if err := inst.Validate(); err != nil {
		t.Fatal(err)
	}
	return inst
}

func TestForcedVersions(t *testing.T) {
	inst := load(t, "../examples/fcos-server.yaml")
	for _, v := range Versions() {
		variant := FCOS
		if strings.HasPrefix(v, "2.") {
			variant = Flatcar
		}
		res, err := Render(inst, Options{Version: v, Variant: variant})
		if err != nil {
			t.Errorf("forced %s: %v", v, err)
			continue
		}
		var head struct{ Ignition struct{ Version string } }
		json.Unmarshal(res.Config, &head)
		if res.Version != v || head.Ignition.Version != v {
			t.Errorf("forced %s: Result.Version %s, config says %s", v, res.Version, head.Ignition.Version)
		}
	}
	// Fedora CoreOS never read spec 2.
	if _, err := Render(inst, Options{Version: "2.3.0"}); err == nil || !strings.Contains(err.Error(), "Fedora CoreOS reads only Ignition spec 3") {
		t.Errorf("2.3.0 for fcos: %v", err)
	}
}

// TestLegacyOutputParses checks the 2.x configs with Ignition 0.35's own
// parsers for the exact version: no error, no warning.
func TestLegacyOutputParses(t *testing.T) {
	inst := load(t, "testdata/specs/users.yaml")
	res, err := Render(inst, Options{Variant: RHCOS, Version: "2.2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, rpt, err := v22.Parse(res.Config); err != nil || len(rpt.Entries) > 0 {
		t.Errorf("2.2.0: %v %v", err, rpt)
	}
	res, err = Render(inst, Options{Variant: Flatcar, Version: "2.3.0"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, rpt, err := v23.Parse(res.Config)
	if err != nil || len(rpt.Entries) > 0 || cfg.Ignition.Version != "2.3.0" {
		t.Errorf("2.3.0: %v %v %q", err, rpt, cfg.Ignition.Version)
	}
	// Spec 2 names the filesystem of every file.
	for _, f := range cfg.Storage.Files {
		if f.Filesystem != "root" {
			t.Errorf("%s: filesystem %q", f.Path, f.Filesystem)
		}
	}
}

// TestSpecialModeBits: setuid, setgid and sticky bits need spec 3.6.0.
func TestSpecialModeBits(t *testing.T) {
	inst := load(t, "testdata/specs/special-modes.yaml")
	res, err := Render(inst, Options{})
	if err != nil || res.Version != "3.6.0" {
		t.Fatalf("version %v, %v; want 3.6.0", res, err)
	}
	for _, v := range []string{"3.5.0", "3.0.0", "2.3.0"} {
		_, err := Render(inst, Options{Version: v, Variant: Flatcar})
		if err == nil || !strings.HasPrefix(err.Error(), "spec.files[0].mode: needs Ignition spec 3.6.0") || !strings.Contains(err.Error(), "4755 has setuid") {
			t.Errorf("forced %s: %v", v, err)
		}
	}
}

// TestUserConfigVersion: a user config is emitted at the lowest version
// that expresses what it uses, whatever version it declares; a forced
// version below that is an error naming the version and the key.
func TestUserConfigVersion(t *testing.T) {
	for _, c := range []struct {
		name, config, lowest, why string
	}{
		{"3.0 features declared 3.6", `{"ignition":{"version":"3.6.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,x"}}]}}`, "3.0.0", ""},
		{"a proxy", `{"ignition":{"version":"3.1.0","proxy":{"httpsProxy":"https://proxy.example.com:3128"}}}`, "3.1.0", "proxy"},
		{"deleting a user", `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"games","shouldExist":false}]}}`, "3.2.0", "shouldExist"},
		{"kernel arguments", `{"ignition":{"version":"3.3.0"},"kernelArguments":{"shouldExist":["quiet"]}}`, "3.3.0", "kernelArguments"},
		{"an S3 access point", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"arn:aws:s3:us-west-1:123456789012:accesspoint/test/object/some/path"}}]}}`, "3.4.0", "$.storage.files.0.contents.source"},
		{"a setuid file", `{"ignition":{"version":"3.6.0"},"storage":{"files":[{"path":"/usr/local/bin/x","mode":2541,"contents":{"source":"data:,x"}}]}}`, "3.6.0", "$.storage.files.0.mode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			inst := load(t, "../examples/fcos-server.yaml")
			inst.Spec.Ignition.Config = c.config
			res, err := Render(inst, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Version != c.lowest {
				t.Errorf("version %s, want %s", res.Version, c.lowest)
			}
			if c.lowest == "3.0.0" {
				return
			}
			below := map[string]string{"3.1.0": "3.0.0", "3.2.0": "3.1.0", "3.3.0": "3.2.0", "3.4.0": "3.3.0", "3.6.0": "3.5.0"}[c.lowest]
			_, err = Render(inst, Options{Version: below})
			if err == nil || !strings.HasPrefix(err.Error(), "spec.ignition.config: needs Ignition spec "+c.lowest+" or newer, and "+below+" was requested") || !strings.Contains(err.Error(), c.why) {
				t.Errorf("forced %s: %v", below, err)
			}
		})
	}
}

func TestUserConfigErrors(t *testing.T) {
	for _, c := range []struct{ name, config, want string }{
		{"experimental", `{"ignition":{"version":"3.7.0-experimental"}}`, "spec.ignition.config: Ignition spec 3.7.0-experimental: want a stable 3.x version"},
		{"spec 2 beyond spec 3", `{"ignition":{"version":"2.3.0"},"networkd":{"units":[{"name":"a.network","contents":"x"}]}}`, "spec.ignition.config: the spec 2.3.0 config cannot be translated to spec 3"},
		{"invalid", `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"relative"}]}}`, "spec.ignition.config: line 1 col 61: path not absolute ($.storage.files.0.path)"},
		{"not JSON", `{"ignition": `, "spec.ignition.config: "},
		{"a file through the generated link", `{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/localtime/x"}]}}`, "spec.ignition: merged with the generated config, it does not validate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			inst := load(t, "../examples/fcos-server.yaml")
			inst.Spec.Ignition.Config = c.config
			_, err := Render(inst, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
			if err != nil && spec.AsErrors(err) == nil {
				t.Errorf("not a spec.Errors: %T", err)
			}
		})
	}
}

// TestMergeRules: the user's config is the child in Ignition's merge, so
// its values win, keyed lists merge by key, and warnings carry positions.
func TestMergeRules(t *testing.T) {
	inst := load(t, "../examples/fcos-server.yaml")
	inst.Spec.Ignition.Config = `{"ignition":{"version":"3.2.0"},
"storage":{"files":[{"path":"/etc/hostname","overwrite":true,"contents":{"source":"data:,override%0A"}}]},
"systemd":{"units":[{"name":"app.service","enabled":false}]},
"bogus": 1}`
	res, err := Render(inst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(res.Config)
	if !strings.Contains(cfg, "data:,override%0A") || strings.Contains(cfg, "data:,fcos-1%0A") {
		t.Errorf("the user's /etc/hostname did not win:\n%s", cfg)
	}
	var parsed struct {
		Systemd struct {
			Units []struct {
				Name     string
				Enabled  *bool
				Contents string
			}
		}
	}
	json.Unmarshal(res.Config, &parsed)
	for _, u := range parsed.Systemd.Units {
		if u.Name == "app.service" && (u.Enabled == nil || *u.Enabled || u.Contents == "") {
			t.Errorf("app.service: the child's enabled should win and the parent's contents stay: %+v", u)
		}
	}
	if res.Version != "3.0.0" {
		t.Errorf("version %s", res.Version)
	}
	if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "spec.ignition.config: line 4 col 1: unused key bogus ($.bogus)") {
		t.Errorf("warnings %q", res.Warnings)
	}
	if _, err := Render(inst, Options{Strict: true}); err == nil || !strings.Contains(err.Error(), "unused key bogus") {
		t.Errorf("Strict: %v", err)
	}
}

func TestButane(t *testing.T) {
	for _, c := range []struct {
		name, butane string
		opts         Options
		err, warning string
	}{
		{name: "unused key", butane: "variant: fcos\nversion: 1.4.0\nstorage:\n  filez: []\n", warning: "spec.ignition.butane: line 4 col 3: unused key filez ($.storage.filez)"},
		{name: "unused key, strict", butane: "variant: fcos\nversion: 1.4.0\nstorage:\n  filez: []\n", opts: Options{Strict: true}, err: "spec.ignition.butane: line 4 col 3: unused key filez ($.storage.filez)"},
		{name: "bad YAML", butane: "variant: fcos\nversion: 1.4.0\nstorage: [\n", err: "spec.ignition.butane: "},
		{name: "no variant", butane: "version: 1.4.0\n", err: "spec.ignition.butane: "},
		{name: "unknown version", butane: "variant: fcos\nversion: 9.0.0\n", err: "spec.ignition.butane: "},
		{name: "experimental", butane: "variant: fcos\nversion: 1.7.0-experimental\n", err: "spec.ignition.butane"},
		{name: "local file without FilesDir", butane: "variant: fcos\nversion: 1.4.0\nstorage:\n  files:\n    - path: /etc/x\n      contents:\n        local: x.conf\n", err: "spec.ignition.butane"},
		{name: "flatcar Butane for fcos", butane: "variant: flatcar\nversion: 1.0.0\n", warning: `spec.ignition.butane: Butane variant "flatcar" is meant for flatcar guests`},
		{name: "flatcar Butane for flatcar", butane: "variant: flatcar\nversion: 1.0.0\n", opts: Options{Variant: Flatcar}},
		{name: "openshift raw for rhcos", butane: "variant: openshift\nversion: 4.14.0\nmetadata: {name: x, labels: {machineconfiguration.openshift.io/role: worker}}\nstorage:\n  files:\n    - path: /etc/x\n      contents: {inline: x}\n", opts: Options{Variant: RHCOS}},
	} {
		t.Run(c.name, func(t *testing.T) {
			inst := load(t, "../examples/fcos-server.yaml")
			inst.Spec.Ignition.Butane = c.butane
			res, err := Render(inst, c.opts)
			switch {
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("got %v, want an error with %q", err, c.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			got := strings.Join(res.Warnings, "\n")
			if c.warning == "" && got != "" || !strings.Contains(got, c.warning) {
				t.Errorf("warnings %q, want %q", got, c.warning)
			}
		})
	}
}

func TestButaneFilesDir(t *testing.T) {
	inst := load(t, "../examples/fcos-server.yaml")
	inst.Spec.Ignition.Butane = "variant: fcos\nversion: 1.4.0\nstorage:\n  files:\n    - path: /etc/hosts.txt\n      contents:\n        local: hosts.txt\n"
	res, err := Render(inst, Options{FilesDir: "testdata/specs/files"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Config), `"path":"/etc/hosts.txt"`) {
		t.Errorf("the local file is missing:\n%s", res.Config)
	}
}

// TestLegacyLimits: a forced 2.x version refuses what spec 3.0 cannot say.
func TestLegacyLimits(t *testing.T) {
	inst := load(t, "../examples/fcos-server.yaml")
	inst.Spec.Ignition.Config = `{"ignition":{"version":"3.3.0"},"kernelArguments":{"shouldExist":["quiet"]}}`
	_, err := Render(inst, Options{Variant: Flatcar, Version: "2.3.0"})
	if err == nil || err.Error() != "spec.ignition.config: needs Ignition spec 3.3.0, and spec 2.3.0 is made from spec 3.0.0: at $.kernelArguments: unused key kernelArguments (spec 3.0.0)" {
		t.Errorf("kernel arguments in 2.3.0: %v", err)
	}
}
