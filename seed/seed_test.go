package seed

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// render is one golden rendering: a datasource and options.
type render struct {
	name string // golden directory name
	ds   Datasource
	opts Options
}

var (
	nocloud   = render{"nocloud", NoCloud, Options{}}
	nocloudV1 = render{"nocloud-v1", NoCloud, Options{NetworkConfigVersion: 1}}
	cfgdrive  = render{"configdrive", ConfigDrive, Options{}}
)

// goldenCases are the specs under testdata and how each is rendered. A
// rendering that fails has its error message as golden <name>.err.
var goldenCases = map[string][]render{
	"ubuntu-server": {nocloud, nocloudV1, cfgdrive},
	"dev-vm":        {nocloud, cfgdrive},
	"merge":         {nocloud},
	"script":        {nocloud, cfgdrive},
	"configdrive":   {cfgdrive, nocloud, nocloudV1},
}

func load(t testing.TB, name string) *spec.Instance {
	t.Helper()
	inst, err := spec.Load(filepath.Join("testdata", name, "instance.yaml"))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return inst
}

func TestGolden(t *testing.T) {
	for name, renders := range goldenCases {
		inst := load(t, name)
		for _, r := range renders {
			t.Run(name+"/"+r.name, func(t *testing.T) {
				dir := filepath.Join("testdata", name, "golden", r.name)
				errFile := dir + ".err"
				s, err := Build(inst, r.ds, r.opts)
				if *update {
					os.RemoveAll(dir)
					os.Remove(errFile)
					if err != nil {
						writeFile(t, errFile, []byte(err.Error()+"\n"))
						return
					}
					if err := s.WriteDir(dir, 0o600); err != nil {
						t.Fatal(err)
					}
					return
				}
				if want, rerr := os.ReadFile(errFile); rerr == nil {
					if err == nil || err.Error()+"\n" != string(want) {
						t.Fatalf("got error %v, want\n%s", err, want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var goldenPaths []string
				filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						rel, _ := filepath.Rel(dir, p)
						goldenPaths = append(goldenPaths, filepath.ToSlash(rel))
					}
					return nil
				})
				var paths []string
				for _, f := range s.Files {
					paths = append(paths, f.Path)
					want, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
					if err != nil {
						t.Errorf("%s: no golden file (run go test ./seed -update): %v", f.Path, err)
						continue
					}
					if !bytes.Equal(f.Data, want) {
						t.Errorf("%s differs from its golden file (run go test ./seed -update and review the diff):\n%s", f.Path, f.Data)
					}
				}
				if strings.Join(paths, " ") != strings.Join(goldenPaths, " ") {
					t.Errorf("files %v, golden %v", paths, goldenPaths)
				}
			})
		}
	}
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLayouts(t *testing.T) {
	for _, c := range []struct {
		name string
		ds   Datasource
		want string
	}{
		{"dev-vm", NoCloud, "meta-data user-data"},
		{"script", NoCloud, "meta-data user-data vendor-data"},
		{"ubuntu-server", NoCloud, "meta-data network-config user-data"},
		{"dev-vm", ConfigDrive, "openstack/latest/meta_data.json openstack/latest/user_data"},
		{"configdrive", ConfigDrive, "openstack/latest/meta_data.json openstack/latest/network_data.json openstack/latest/user_data openstack/latest/vendor_data.json"},
	} {
		s, err := Build(load(t, c.name), c.ds, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range s.Files {
			paths = append(paths, f.Path)
		}
		if got := strings.Join(paths, " "); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.name, c.ds, got, c.want)
		}
		if s.Label != c.ds.Label() {
			t.Errorf("label %q", s.Label)
		}
	}
}

func TestDeterministic(t *testing.T) {
	for name := range goldenCases {
		inst := load(t, name)
		for _, ds := range Datasources {
			a, errA := Build(inst, ds, Options{})
			b, errB := Build(load(t, name), ds, Options{})
			if (errA == nil) != (errB == nil) {
				t.Fatalf("%s: errors differ: %v / %v", name, errA, errB)
			}
			if errA != nil {
				continue
			}
			for i := range a.Files {
				if a.Files[i].Path != b.Files[i].Path || !bytes.Equal(a.Files[i].Data, b.Files[i].Data) {
					t.Errorf("%s %s: %s differs between two builds", name, ds, a.Files[i].Path)
				}
			}
		}
	}
}

func TestErrorsNameFields(t *testing.T) {
	_, err := Build(load(t, "ubuntu-server"), ConfigDrive, Options{})
	es := spec.AsErrors(err)
	if len(es) == 0 {
		t.Fatalf("got %v, want spec.Errors", err)
	}
	for _, e := range es {
		if !strings.HasPrefix(e.Field, "spec.") {
			t.Errorf("error without a field: %v", e)
		}
	}
	if _, err := Build(load(t, "dev-vm"), NoCloud, Options{NetworkConfigVersion: 3}); err != nil {
		t.Errorf("a network-config version without a network: %v", err)
	}
	if _, err := Build(load(t, "ubuntu-server"), NoCloud, Options{NetworkConfigVersion: 3}); err == nil {
		t.Error("network-config version 3 accepted")
	}
	inst := load(t, "dev-vm")
	inst.Spec.CloudInit.VendorData = "just text"
	if _, err := Build(inst, NoCloud, Options{}); err == nil || !strings.HasPrefix(err.Error(), "spec.cloudInit.vendorData: cloud-init does not recognise") {
		t.Errorf("vendor data cloud-init ignores: %v", err)
	}
	if _, err := Build(load(t, "dev-vm"), "floppy", Options{}); err == nil {
		t.Error("unknown datasource accepted")
	}
}

func TestFS(t *testing.T) {
	s, err := Build(load(t, "configdrive"), ConfigDrive, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range s.Files {
		paths = append(paths, f.Path)
	}
	if err := fstest.TestFS(s.FS(), paths...); err != nil {
		t.Fatal(err)
	}
	fi, err := fs.Stat(s.FS(), "openstack")
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o555 || !fi.ModTime().IsZero() {
		t.Errorf("openstack: %v %v", fi, err)
	}
}

func TestParseDatasource(t *testing.T) {
	for in, want := range map[string]Datasource{"nocloud": NoCloud, "NoCloud": NoCloud, "cidata": NoCloud, "configdrive": ConfigDrive, "config-2": ConfigDrive} {
		if got, err := ParseDatasource(in); got != want || err != nil {
			t.Errorf("ParseDatasource(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseDatasource("ec2"); err == nil {
		t.Error("ec2 accepted")
	}
}

// TestSchema runs `cloud-init schema` on the generated cloud-config of
// every case and on the user-data itself when it is a single document
// (the merged case).
func TestSchema(t *testing.T) {
	for name := range goldenCases {
		inst := load(t, name)
		cc, err := cloudinit.CloudConfig(inst)
		if err != nil {
			t.Fatal(err)
		}
		if err := cloudinittest.Schema(t, cc); err != nil {
			t.Errorf("%s: generated cloud-config: %v\n%s", name, err, cc)
		}
		ud, err := cloudinit.UserData(inst)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.HasPrefix(ud, []byte("#cloud-config")) && !bytes.Equal(ud, cc) {
			if err := cloudinittest.Schema(t, ud); err != nil {
				t.Errorf("%s: merged user-data: %v\n%s", name, err, ud)
			}
		}
	}
}

func BenchmarkBuildNoCloud(b *testing.B) {
	inst := load(b, "ubuntu-server")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(inst, NoCloud, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWriteDirFollowsNoLinks: a symbolic link planted in the output
// directory, as a file or as a directory on a file's way, makes WriteDir
// fail; it never writes or changes the mode of what the link points to.
func TestWriteDirFollowsNoLinks(t *testing.T) {
	s := &Seed{Files: []File{
		{Path: "openstack/latest/meta_data.json", Data: []byte("{}")},
		{Path: "user-data", Data: []byte("#cloud-config\n")},
	}}
	for _, planted := range []string{"user-data", "openstack"} {
		top := t.TempDir()
		victim := filepath.Join(top, "victim")
		os.MkdirAll(filepath.Join(victim, "latest"), 0o700)
		os.WriteFile(filepath.Join(victim, "latest", "meta_data.json"), []byte("root's"), 0o600)
		os.WriteFile(filepath.Join(victim, "user-data"), []byte("root's"), 0o600)
		out := filepath.Join(top, "out")
		os.Mkdir(out, 0o700)
		target := victim
		if planted == "user-data" {
			target = filepath.Join(victim, "user-data")
		}
		if err := os.Symlink(target, filepath.Join(out, planted)); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteDir(out, 0o666); err == nil {
			t.Errorf("%s: a link in the way is no error", planted)
		}
		for _, p := range []string{filepath.Join(victim, "latest", "meta_data.json"), filepath.Join(victim, "user-data")} {
			b, _ := os.ReadFile(p)
			fi, err := os.Stat(p)
			if string(b) != "root's" || err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s changed: %q %v %v", planted, p, b, fi.Mode(), err)
			}
		}
	}
}

// TestCheckPath: the name rule every output format applies, and Check
// listing every file that breaks it.
func TestCheckPath(t *testing.T) {
	for p, want := range map[string]string{
		"user-data": "", "openstack/latest/meta_data.json": "", "Autounattend.xml": "", "a b/ü.txt": "",
		"": "is empty", "/abs.txt": "is absolute", "../x": `has a ".." segment`, "a/./b": `has a "." segment`,
		"a//b": "has an empty segment", "a/": "has an empty segment", `..\x`: "backslash", "a\x00b": "control character",
		"a\nb": "control character", "a\u009bb": "control character", "a\u0085b": "control character", "\xff": "not UTF-8",
	} {
		err := CheckPath(p)
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("CheckPath(%q) = %v, want %q", p, err, want)
		}
	}
	s := &Seed{Label: "unattendCD", Files: []File{{Path: "../a"}, {Path: "ok"}, {Path: "/b"}}}
	err := s.Check()
	for _, want := range []string{`seed unattendCD: file "../a" has a ".." segment`, `seed unattendCD: file "/b" is absolute`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check() = %v, want %q", err, want)
		}
	}
}
