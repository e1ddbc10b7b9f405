package ignition

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"
	ignparse "github.com/coreos/ignition/v2/config/shared/parse"
	types "github.com/coreos/ignition/v2/config/v3_0/types"
	"github.com/coreos/ignition/v2/config/v3_6"
	"github.com/coreos/ignition/v2/config/validate"
	vpath "github.com/coreos/vcontext/path"
	"github.com/coreos/vcontext/report"
)

// validateConfigs are configs with problems of every kind the validators
// find (bad paths, URLs, hashes, units, duplicates across merged lists,
// modes), in several versions.
var validateConfigs = []string{
	`{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"relative"},{"path":"/a","contents":{"source":"bogus:x","verification":{"hash":"sha512-12"}}},{"path":"/a"}],"links":[{"path":"/l"}]},"passwd":{"users":[{"name":"u"},{"name":"u"}]}}`,
	`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/x","mode":2541}],"directories":[{"path":"/x"}]},"systemd":{"units":[{"name":"a.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n"},{"name":"bad","contents":"[Unit"}]}}`,
	`{"ignition":{"version":"3.6.0"},"kernelArguments":{"shouldExist":["a","a"]},"storage":{"luks":[{"name":"x","device":"/dev/x"}]}}`,
	`{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"http://x"},{"source":"http://x"}],"replace":{"source":"ftp://x"}},"security":{"tls":{"certificateAuthorities":[{"source":"data:,x"},{}]}},"proxy":{"httpProxy":"x","noProxy":["a","a"]}},"storage":{"disks":[{"device":"/dev/sda","partitions":[{"number":1},{"number":1,"label":"x"},{"label":"x"}]}],"raid":[{"name":"r","level":"raid1","devices":["/dev/a","/dev/a"]}],"filesystems":[{"device":"/dev/a","format":"xfs","path":"rel","mountOptions":["a","a"]}],"luks":[{"name":"l","device":"/dev/a","clevis":{"tang":[{"url":"bogus"}],"threshold":3}}]},"systemd":{"units":[{"name":"a@b.service","enabled":true},{"name":"a@.service","contents":"[Service]\nExecStart=/bin/true\n","dropins":[{"name":"x.conf"},{"name":"x.conf","contents":"[Unit"}]}]},"passwd":{"users":[{"name":"u","sshAuthorizedKeys":["k","k"],"groups":["g","g"]}],"groups":[{"name":"g"},{"name":"g"}]}}`,
	// What the quiet tests leave to the validators: a unit enabled without
	// an [Install] option, contents and drop-ins that do not parse, an
	// unknown unit extension, a template instance, data URLs that do not
	// decode, an unknown compression, a hash without a source.
	`{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/a","contents":{"source":"data:,%zz"}},{"path":"/b","contents":{"source":"data:;base64,YQ=","compression":"xz"}},{"path":"/c","contents":{"verification":{"hash":"sha512-00"}}},{"path":"/d","contents":{"source":"data:,ok%0A"}}]},"systemd":{"units":[{"name":"a.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\n"},{"name":"b.service","contents":"[Unit"},{"name":"c.bogus","contents":"[Unit]\nA=b\n"},{"name":"d.service","contents":"[Unit]\nA=b\n","dropins":[{"name":"x.conf","contents":"[Unit]\nNoEquals\n"},{"name":"y.txt","contents":"[Unit]\nA=b\n"}]},{"name":"e@f.service","enabled":true},{"name":"e@.service","contents":"[Service]\nExecStart=/bin/true\n"}]}}`,
}

// TestValidateStructIsIgnitions: the cached walk gives exactly the
// entries of vcontext's walk with Ignition's two validators, in the same
// order, and the entries of Ignition's own ValidateWithContext (which
// runs the validators one after the other), on valid and invalid configs
// of every version.
func TestValidateStructIsIgnitions(t *testing.T) {
	configs := slices.Clone(validateConfigs)
	for _, c := range goldenCases {
		if c.version[0] == '3' {
			b, err := os.ReadFile(c.path())
			if err != nil {
				t.Fatal(err)
			}
			configs = append(configs, string(b))
		}
	}
	for i, raw := range configs {
		var head struct{ Ignition struct{ Version string } }
		json.Unmarshal([]byte(raw), &head)
		for _, v := range stable3() {
			cfg := reflect.New(v.config).Interface()
			if err := json.Unmarshal([]byte(raw), cfg); err != nil {
				t.Fatal(err)
			}
			checkValidateStruct(t, reflect.ValueOf(cfg).Elem().Interface())
		}
		if i < len(validateConfigs) {
			cfg := versionConfig(t, head.Ignition.Version)
			json.Unmarshal([]byte(raw), cfg)
			if len(validateStruct(reflect.ValueOf(cfg).Elem().Interface()).Entries) == 0 {
				t.Errorf("config %d should have problems", i)
			}
		}
	}
}

func versionConfig(t testing.TB, v string) any {
	sv, ok := lookupVersion(v)
	if !ok || sv.legacy {
		t.Fatalf("version %q", v)
	}
	return reflect.New(sv.config).Interface()
}

func checkValidateStruct(t testing.TB, cfg any) {
	t.Helper()
	entries := func(r report.Report) []string {
		var out []string
		for _, e := range r.Entries {
			out = append(out, e.String())
		}
		return out
	}
	got := entries(validateStruct(cfg))
	if want := entries(vcontextValidate(cfg)); !slices.Equal(got, want) {
		t.Errorf("%T:\nours    %q\nvcontext %q", cfg, got, want)
	}
	want := entries(validate.ValidateWithContext(cfg, nil))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%T:\nours     %q\nIgnition %q", cfg, got, want)
	}
}

// FuzzValidateStruct holds the cached walk to vcontext's walk and to
// Ignition's ValidateWithContext on arbitrary configs of every version.
func FuzzValidateStruct(f *testing.F) {
	for _, c := range validateConfigs {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, sv := range stable3() {
			cfg := reflect.New(sv.config).Interface()
			if json.Unmarshal(raw, cfg) != nil {
				return
			}
			checkValidateStruct(t, reflect.ValueOf(cfg).Elem().Interface())
		}
	})
}

// TestValidateStructOtherTypes: types the cached walk does not know are
// left to vcontext's walk.
func TestValidateStructOtherTypes(t *testing.T) {
	type withMap struct {
		Files map[string]types.File `json:"files"`
		Any   any                   `json:"any"`
	}
	v := withMap{Files: map[string]types.File{"a": {Node: types.Node{Path: "relative"}}}, Any: types.Node{Path: "relative"}}
	if walkerOf(reflect.TypeOf(v)).exact {
		t.Error("a map and an interface should not be walked")
	}
	checkValidateStruct(t, v)
	if got := validateStruct(v); !strings.Contains(got.String(), "path not absolute") {
		t.Errorf("the interface's node was not validated: %v", got)
	}
}

// FuzzParseChild holds parseChild to Ignition's ParseCompatibleVersion:
// the same config, report and error, whether or not it takes the parser.
func FuzzParseChild(f *testing.F) {
	for _, c := range validateConfigs {
		f.Add([]byte(c))
	}
	for _, c := range versionCorpus {
		f.Add([]byte(c.config))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, grpt, gerr := parseChild(raw)
		want, wrpt, werr := v3_6.ParseCompatibleVersion(raw)
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("error %v, Ignition's %v", gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("config\n%+v\nIgnition's\n%+v", got, want)
		}
		// Ignition reports the unused keys of an object in map order.
		sorted := func(r report.Report) []string {
			l := strings.Split(r.String(), "\n")
			slices.Sort(l)
			return l
		}
		if g, w := sorted(grpt), sorted(wrpt); !slices.Equal(g, w) {
			t.Errorf("report %q, Ignition's %q", g, w)
		}
	})
}

// quietUnitSeeds are unit contents near the edges of the plain form.
var quietUnitSeeds = []string{
	"[Unit]\nDescription=x\n\n[Service]\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n",
	"# leading comment\n; another\n\n[Service]\nExecStart=/bin/sh -c \\\n  'echo a; \\\n  echo b'\n",
	"[Service]\nExecStart=/bin/true \\\n\n[Install]\nWantedBy=x\n",
	"[Install]\n",
	"[Install]\n# WantedBy=x\n",
	"[Unit]\n# comment \\\nWantedBy=x\n[Install]\nWantedBy=y",
	"[Unit",
	"[Unit] x\n",
	"[Unit]\nNoEquals\n",
	"[Unit]\nNoEquals",
	"Key=value\n[Unit]\n",
	"  [Unit]\n\tA=b\n",
	"\u00a0[Unit]=x\n",
	"[Unit]\r\nA=b\r\n",
	"[Un]it]\nA=b\n",
	"[Unit]\n" + strings.Repeat("A", 2100) + "=b\n",
	"[Install]\nWantedBy=x\\",
	"",
}

// FuzzQuietUnitContents holds quietUnitContents to go-systemd's parser as
// Ignition calls it: contents it passes parse, and have an [Install]
// option exactly when it says so.
func FuzzQuietUnitContents(f *testing.F) {
	for _, s := range quietUnitSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parses, install := quietUnitContents(s)
		if !parses {
			return
		}
		opts, err := ignparse.ParseUnitContents(&s)
		if err != nil {
			t.Fatalf("%q: passed as plain, and the parser says %v", s, err)
		}
		has := slices.ContainsFunc(opts, func(o *unit.UnitOption) bool { return o.Section == "Install" })
		if has != install {
			t.Fatalf("%q: [Install] option %v, the parser's options say %v", s, install, has)
		}
	})
}

// FuzzQuietDataURL holds quietDataURL to Ignition's check of a file's
// source, in every 3.x version.
func FuzzQuietDataURL(f *testing.F) {
	for _, s := range []string{"data:,a%0A", "data:,%0", "data:,%zz", "data:,a b", "data:;base64,YQ==", "data:;base64,YQ=", "data:;base64,Y===", "data:;base64,", "data:,", "data:,#x", "data:,%c3%A9"} {
		f.Add(s)
	}
	for _, b := range [][]byte{nil, []byte("hello\n"), bytes.Repeat([]byte{0, 0xff, '%', ' '}, 300)} {
		f.Add(*dataURL(b).Source)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !quietDataURL(s) {
			return
		}
		for _, ts := range quietTypes {
			typ := ts[0]
			res := reflect.New(typ).Elem()
			res.FieldByName("Source").Set(reflect.ValueOf(&s))
			if r := res.Interface().(interface {
				Validate(vpath.ContextPath) report.Report
			}).Validate(vpath.New("json")); len(r.Entries) > 0 {
				t.Fatalf("%q: passed as plain, and Ignition's %s says %v", s, typ, r)
			}
		}
	})
}

// TestDataURLsAreQuiet: every data URL the renderer writes takes the
// short way.
func TestDataURLsAreQuiet(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("hello\n"), []byte("a b%c"), bytes.Repeat([]byte("x\x00\xff"), 2000)} {
		if s := *dataURL(b).Source; !quietDataURL(s) {
			t.Errorf("%.40q is not taken as plain", s)
		}
	}
}

// TestRenderedConfigsTakeTheShortWay: the validators the quiet tests
// stand in for are skipped for every file and unit of the 3.0.0 goldens,
// so that a rendering does not pay for them; a change to the renderer's
// forms that fell back to the validators would show here, not only in a
// benchmark.
func TestRenderedConfigsTakeTheShortWay(t *testing.T) {
	for _, c := range goldenCases {
		if c.version != "3.0.0" {
			continue
		}
		b, err := os.ReadFile(c.path())
		if err != nil {
			t.Fatal(err)
		}
		var cfg types.Config
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		quiet := func(v any) bool {
			return quietIf[reflect.TypeOf(v).Elem()](reflect.ValueOf(v).Elem())
		}
		for i := range cfg.Storage.Files {
			if f := &cfg.Storage.Files[i]; !quiet(&f.Contents) {
				t.Errorf("%s: %s: contents %.40q go to the validator", c.name, f.Path, *f.Contents.Source)
			}
		}
		for i := range cfg.Systemd.Units {
			u := &cfg.Systemd.Units[i]
			if !quiet(u) {
				t.Errorf("%s: unit %s goes to the validator", c.name, u.Name)
			}
			for j := range u.Dropins {
				if !quiet(&u.Dropins[j]) {
					t.Errorf("%s: drop-in %s of %s goes to the validator", c.name, u.Dropins[j].Name, u.Name)
				}
			}
		}
		if !quiet(&cfg.Systemd) && !strings.Contains(string(b), "@") {
			t.Errorf("%s: systemd goes to the validator", c.name)
		}
	}
}
