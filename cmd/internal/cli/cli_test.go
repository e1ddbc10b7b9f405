package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

var examples = []string{"../../../examples/dev-vm.yaml", "../../../examples/ubuntu-server/instance.yaml"}

// run runs vminit in-process and returns its exit code and output.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestBuildEveryExampleAndFormat(t *testing.T) {
	for _, ex := range examples {
		for _, ds := range []string{"nocloud", "configdrive"} {
			for _, fs := range []string{"iso9660", "vfat", "tar", "dir"} {
				name := filepath.Base(filepath.Dir(ex)) + "-" + ds + "-" + fs
				t.Run(name, func(t *testing.T) {
					out := filepath.Join(t.TempDir(), "seed")
					code, _, stderr := run(t, "build", ex, "-o", out, "--datasource", ds, "--fs", fs)
					if code != ExitOK {
						t.Fatalf("exit %d: %s", code, stderr)
					}
					if fs != "iso9660" && fs != "vfat" {
						return
					}
					code, stdout, stderr := run(t, "inspect", out)
					if code != ExitOK || !strings.Contains(stdout, "checks:") || !strings.Contains(stdout, "ok") {
						t.Errorf("inspect exit %d:\n%s%s", code, stdout, stderr)
					}
					wantLabel := map[string]string{"nocloud": "cidata", "configdrive": "config-2"}[ds]
					if !strings.Contains(stdout, "label:       "+wantLabel) && !strings.Contains(stdout, wantLabel) {
						t.Errorf("inspect does not show label %s:\n%s", wantLabel, stdout)
					}
				})
			}
		}
	}
}

func TestBuildIsReproducible(t *testing.T) {
	dir := t.TempDir()
	build := func(name string, args ...string) []byte {
		p := filepath.Join(dir, name)
		if code, _, stderr := run(t, append([]string{"build", examples[1], "-o", p}, args...)...); code != ExitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	a, b := build("a.iso"), build("b.iso")
	if !bytes.Equal(a, b) {
		t.Fatal("two builds of the same spec differ")
	}
	if len(a)%4096 != 0 {
		t.Errorf("image is %d bytes, not 4 KiB aligned", len(a))
	}
	if c := build("c.iso", "--timestamp", "1700000000"); !bytes.Equal(a, c) {
		t.Error("--timestamp with the same value as SOURCE_DATE_EPOCH gives other bytes")
	}
	if d := build("d.iso", "--timestamp", "2024-01-01T00:00:00Z"); bytes.Equal(a, d) {
		t.Error("a different timestamp gives the same bytes")
	}
	if e := build("e.iso", "--align", "1MiB"); len(e) != 1<<20 {
		t.Errorf("--align 1MiB gives %d bytes", len(e))
	}
	if f, g := build("f.img", "--fs", "vfat"), build("g.img", "--fs", "vfat"); !bytes.Equal(f, g) {
		t.Error("two VFAT builds differ")
	}
}

// TestBadSpecsExitOne checks that invalid input gives exit code 1, lists
// every problem with its field, and leaves no output behind, not even over
// an existing file.
func TestBadSpecsExitOne(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"typo", "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  hostnme: x\n", []string{"spec.hostnme: unknown field"}},
		{"several problems", `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: a}
spec:
  users:
    - name: root
      password: hunter2
      sshAuthorizedKeys: ["not a key"]
  files:
    - path: relative
`, []string{"3 problems", "spec.users[0].password", "spec.users[0].sshAuthorizedKeys[0]: not an SSH public key", `spec.files[0].path: "relative" is not absolute`}},
		{"configdrive needs macs", `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: a}
spec:
  network:
    ethernets:
      eth0: {dhcp4: true}
`, []string{"spec.network.ethernets.eth0", "MAC"}},
		{"not yaml", "{{{", []string{"not valid YAML"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			specPath := filepath.Join(dir, "instance.yaml")
			os.WriteFile(specPath, []byte(tc.doc), 0o644)
			out := filepath.Join(dir, "seed.iso")
			os.WriteFile(out, []byte("previous"), 0o644)
			code, _, stderr := run(t, "build", specPath, "-o", out, "--datasource", "configdrive")
			if code != ExitInvalid {
				t.Errorf("exit %d, want %d", code, ExitInvalid)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, stderr)
				}
			}
			if b, _ := os.ReadFile(out); string(b) != "previous" {
				t.Errorf("a failed build changed the output file")
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 2 {
				t.Errorf("files left behind: %v", entries)
			}
		})
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"build"},
		{"build", examples[0]},
		{"build", examples[0], "-o", "x.iso", "--fs", "udf"},
		{"build", examples[0], "-o", "x.iso", "--datasource", "azure"},
		{"build", examples[0], "-o", "x.iso", "--align", "1000"},
		{"build", examples[0], "-o", "x.iso", "--bogus"},
		{"validate", examples[0], "--output", "xml"},
		{"inspect"},
		{"frobnicate"},
	} {
		dir := t.TempDir()
		wd, _ := os.Getwd()
		os.Chdir(dir)
		code, _, stderr := run(t, args...)
		os.Chdir(wd)
		if code != ExitUsage {
			t.Errorf("vminit %v: exit %d, want %d (%s)", args, code, ExitUsage, stderr)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("vminit %v left %v", args, entries)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.yaml")
	os.WriteFile(p, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  timezone: 'no such/../zone'\n  hostnme: x\n"), 0o644)
	code, stdout, _ := run(t, "validate", p, "--output", "json")
	if code != ExitInvalid {
		t.Errorf("exit %d", code)
	}
	var rep struct {
		Valid  bool
		Errors []struct {
			File, Field, Message string
			Line                 int
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if rep.Valid || len(rep.Errors) != 2 || rep.Errors[0].Field != "spec.timezone" || rep.Errors[0].Line != 5 || rep.Errors[1].Line != 6 {
		t.Errorf("report = %+v", rep)
	}
	code, stdout, _ = run(t, "validate", examples[1], "--output", "json")
	if code != ExitOK || !strings.Contains(stdout, `"valid": true`) {
		t.Errorf("valid example: exit %d %s", code, stdout)
	}
}

func TestRender(t *testing.T) {
	out := filepath.Join(t.TempDir(), "seed")
	if code, _, stderr := run(t, "render", examples[1], "--out", out); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, f := range []string{"user-data", "meta-data", "network-config"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if code, _, _ := run(t, "render", examples[1], "--out", out); code != ExitInvalid {
		t.Errorf("render over a populated directory: exit %d, want 1", code)
	}
}

// TestInspectForeignImages checks inspect against images made by the tool
// vminit replaces, including a broken seed it must flag.
func TestInspectForeignImages(t *testing.T) {
	genisoimage := testtools.Require(t, "genisoimage")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "user-data"), []byte("#cloud-config\nhostname: x\n"), 0o644)
	os.WriteFile(filepath.Join(src, "meta-data"), []byte("instance-id: iid-1\nlocal-hostname: x\n"), 0o644)
	good := filepath.Join(dir, "good.iso")
	if out, err := exec.Command(genisoimage, "-quiet", "-o", good, "-V", "cidata", "-J", "-R", src).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code, stdout, stderr := run(t, "inspect", good); code != ExitOK || !strings.Contains(stdout, "meta-data") {
		t.Errorf("genisoimage seed: exit %d\n%s%s", code, stdout, stderr)
	}
	// Without meta-data cloud-init logs "not a valid seed" and ignores it.
	os.Remove(filepath.Join(src, "meta-data"))
	os.WriteFile(filepath.Join(src, "user-data"), []byte("#cloud-config\n- not a mapping\n"), 0o644)
	bad := filepath.Join(dir, "bad.iso")
	if out, err := exec.Command(genisoimage, "-quiet", "-o", bad, "-V", "cidata", "-J", "-R", src).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	code, stdout, _ := run(t, "inspect", bad, "--output", "json")
	if code != ExitInvalid || !strings.Contains(stdout, "meta-data") {
		t.Errorf("broken seed: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := run(t, "inspect", filepath.Join(src, "user-data")); code != ExitInvalid || !strings.Contains(stderr, "not an ISO9660 or FAT image") {
		t.Errorf("not an image: exit %d %s", code, stderr)
	}
}

func TestCompletion(t *testing.T) {
	code, stdout, _ := run(t, "completion", "bash")
	if code != ExitOK || !strings.Contains(stdout, "vminit") {
		t.Errorf("completion bash: exit %d", code)
	}
}

func TestBuildIgnition(t *testing.T) {
	validate := testtools.Require(t, "ignition-validate")
	dir := t.TempDir()
	fcos := "../../../examples/fcos-server.yaml"
	ign := filepath.Join(dir, "config.ign")
	if code, _, stderr := run(t, "build", fcos, "--format", "ignition", "-o", ign); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if out, err := exec.Command(validate, ign).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("ignition-validate: %v %s", err, out)
	}
	if st, _ := os.Stat(ign); st == nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the config is not 0600: %v", st)
	}
	// A config drive carrying it, as Ignition's openstack platform reads it.
	cd := filepath.Join(dir, "config.iso")
	if code, _, stderr := run(t, "build", fcos, "--format", "ignition", "--datasource", "configdrive", "-o", cd); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, stdout, _ := run(t, "inspect", cd); code != ExitOK || !strings.Contains(stdout, "openstack/latest/user_data") {
		t.Errorf("inspect: exit %d\n%s", code, stdout)
	}
	// Ubuntu's packages cannot be expressed: exit 1 naming the field,
	// unless --allow-partial.
	if code, _, stderr := run(t, "build", examples[1], "--format", "ignition", "-o", filepath.Join(dir, "u.ign")); code != ExitInvalid || !strings.Contains(stderr, "spec.packages") {
		t.Errorf("packages: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "build", examples[1], "--format", "ignition", "--allow-partial", "-o", filepath.Join(dir, "u.ign")); code != ExitOK || !strings.Contains(stderr, "warning: ") || !strings.Contains(stderr, "spec.packages: Ignition cannot install packages") {
		t.Errorf("--allow-partial: exit %d %s", code, stderr)
	}
	// Too large for KubeVirt's inline user data: an error naming the
	// sizes, or a pointer config with --publish-url.
	k := filepath.Join(dir, "k.ign")
	if code, _, stderr := run(t, "build", fcos, "--format", "ignition", "--transport", "kubevirt", "-o", k); code != ExitInvalid || !strings.Contains(stderr, "allows 2048") {
		t.Errorf("over budget: exit %d %s", code, stderr)
	}
	full := filepath.Join(dir, "full.ign")
	if code, _, stderr := run(t, "build", fcos, "--format", "ignition", "--transport", "kubevirt", "--publish-url", "https://cfg.example.com/fcos-1.ign", "--publish-out", full, "-o", k); code != ExitOK {
		t.Fatalf("pointer: exit %d %s", code, stderr)
	}
	if p, _ := os.ReadFile(k); !strings.Contains(string(p), `"replace"`) || !strings.Contains(string(p), "sha512-") {
		t.Errorf("pointer config = %s", p)
	}
	if code, stdout, _ := run(t, "deliver", ign, "--to", "qemu"); code != ExitOK || !strings.Contains(stdout, "name=opt/com.coreos/config,file="+ign) {
		t.Errorf("deliver: exit %d %s", code, stdout)
	}
	if code, _, _ := run(t, "build", fcos, "--format", "ignition", "--variant", "windows", "-o", ign); code != ExitUsage {
		t.Errorf("--variant windows: exit %d", code)
	}
}

func TestConvert(t *testing.T) {
	dir := t.TempDir()
	ud := filepath.Join(dir, "user-data")
	os.WriteFile(ud, []byte("#cloud-config\nhostname: n1\nwrite_files: [{path: /etc/x, content: y, permissions: '0600'}]\nruncmd: [echo hi]\n"), 0o644)
	ign := filepath.Join(dir, "c.ign")
	if code, _, stderr := run(t, "convert", ud, "--to", "ignition", "-o", ign); code != ExitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	if b, _ := os.ReadFile(ign); !strings.Contains(string(b), `"path":"/etc/x"`) || !strings.Contains(string(b), "vminit-first-boot.service") {
		t.Errorf("config = %s", b)
	}
	code, stdout, _ := run(t, "convert", ud, "--to", "spec")
	if code != ExitOK || !strings.Contains(stdout, "apiVersion: vminit.dev/v1alpha1") || !strings.Contains(stdout, "hostname: n1") {
		t.Errorf("--to spec: exit %d\n%s", code, stdout)
	}
	os.WriteFile(ud, []byte("#cloud-config\napt: {}\nsnap: {}\n"), 0o644)
	code, _, stderr := run(t, "convert", ud)
	if code != ExitInvalid || !strings.Contains(stderr, "apt:") || !strings.Contains(stderr, "snap:") {
		t.Errorf("unsupported keys: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "convert", ud, "--allow-partial"); code != ExitOK || !strings.Contains(stderr, "warning: apt") {
		t.Errorf("--allow-partial: exit %d %s", code, stderr)
	}
}

// TestValidateKubernetes: an Instance meant for kubectl, whose
// metadataServer sets IMDSv2 without addresses (its VMI identifies the
// guest), is refused as a file server's spec, naming the field and the
// switch, and valid with --kubernetes, which still checks the options.
func TestValidateKubernetes(t *testing.T) {
	const ex = "../../../examples/kubevirt-instance.yaml"
	code, _, stderr := run(t, "validate", ex)
	if code != ExitInvalid || !strings.Contains(stderr, "kubevirt-instance.yaml:15: spec.metadataServer.addresses: required") ||
		!strings.Contains(stderr, "vminit validate --kubernetes") {
		t.Errorf("without --kubernetes: exit %d, want %d naming the field, its line and the switch:\n%s", code, ExitInvalid, stderr)
	}
	if code, stdout, stderr := run(t, "validate", "--kubernetes", ex); code != ExitOK || !strings.Contains(stdout, "valid") {
		t.Errorf("--kubernetes: exit %d\n%s%s", code, stdout, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  metadataServer: {imdsv2: always, tokenHopLimit: 99}\n"), 0o644)
	code, _, stderr = run(t, "validate", "--kubernetes", bad)
	if code != ExitInvalid || !strings.Contains(stderr, "spec.metadataServer.imdsv2") || !strings.Contains(stderr, "spec.metadataServer.tokenHopLimit") ||
		strings.Contains(stderr, "addresses") {
		t.Errorf("--kubernetes, bad options: exit %d, want both options refused and no address required:\n%s", code, stderr)
	}
}
