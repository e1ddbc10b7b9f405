package ignition

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	types "github.com/coreos/ignition/v2/config/v3_0/types"
	"github.com/coreos/ignition/v2/config/v3_6"
	"github.com/coreos/ignition/v2/config/validate"
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
