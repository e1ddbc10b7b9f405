package cli

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// The tests in this file follow a new user's first contact with the
// command line: each checks one promise of the help text.

const fcosExample = "../../../examples/fcos-server.yaml"

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, _ := run(t, args...)
		if code != ExitOK || !strings.HasPrefix(stdout, "vminit ") || !strings.Contains(stdout, "go1.") {
			t.Errorf("%v: exit %d %q", args, code, stdout)
		}
	}
}

// TestEveryCommandHasExamples: every command a user can run shows how.
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if sub.Runnable() && sub.Example == "" {
				t.Errorf("%s has no examples", sub.CommandPath())
			}
			walk(sub)
		}
	}
	root := NewRootCommand()
	walk(root)
	code, stdout, _ := run(t, "--help")
	if code != ExitOK || !strings.Contains(stdout, "Ignition") || !strings.Contains(stdout, "metadata server") {
		t.Errorf("top-level help does not describe Ignition and the server:\n%s", stdout)
	}
}

// TestOneFlagVocabulary: -o names an output file or directory everywhere;
// --json asks for a JSON report; the old spellings still work.
func TestOneFlagVocabulary(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"validate", examples[0], "--json"},
		{"validate", examples[0], "--output", "json"},
		{"validate", examples[0], "-o", "json"},
	} {
		code, stdout, stderr := run(t, args...)
		var rep validateReport
		if code != ExitOK || json.Unmarshal([]byte(stdout), &rep) != nil || !rep.Valid {
			t.Errorf("%v: exit %d %s%s", args, code, stdout, stderr)
		}
	}
	for i, flag := range []string{"-o", "--output", "--out"} {
		out := filepath.Join(dir, "render", flag)
		os.MkdirAll(filepath.Dir(out), 0o700)
		code, stdout, stderr := run(t, "render", examples[0], flag, out)
		if code != ExitOK || strings.Contains(stdout, "//") || !strings.Contains(stdout, filepath.Join(out, "meta-data")) {
			t.Errorf("%d render %s: exit %d %s%s", i, flag, code, stdout, stderr)
		}
	}
	// A trailing slash is not doubled in what render prints.
	code, stdout, _ := run(t, "render", examples[0], "-o", filepath.Join(dir, "slash")+"/")
	if code != ExitOK || strings.Contains(stdout, "//") {
		t.Errorf("render -o dir/: %q", stdout)
	}
	// Help lists no flag twice and gives --size one default.
	_, help, _ := run(t, "build", "--help")
	if strings.Count(help, "--size") != 1 || strings.Contains(help, "(default \"0\")") {
		t.Errorf("build --help:\n%s", help)
	}
}

// TestOutputPermissions: seeds and configs hold password hashes: 0600 (0700
// for directories) unless --mode says otherwise.
func TestOutputPermissions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		out  string
		want fs.FileMode
	}{
		{[]string{"build", examples[1]}, "s.iso", 0o600},
		{[]string{"build", examples[1]}, "s.img", 0o600},
		{[]string{"build", examples[1]}, "s.tar", 0o600},
		{[]string{"build", fcosExample}, "c.ign", 0o600},
		{[]string{"build", fcosExample, "--datasource", "configdrive"}, "c.iso", 0o600},
		{[]string{"build", examples[1], "--mode", "0644"}, "shared.iso", 0o644},
		{[]string{"build", examples[1], "--fs", "dir"}, "d", 0o700},
		{[]string{"render", examples[1], "--mode", "0640"}, "r", 0o750},
		{[]string{"render", examples[1], "--mode", "0664"}, "g", 0o775}, // given last: TestWriteDirPrivateUntilComplete
		{[]string{"convert", "testdata-user-data", "--to", "spec"}, "spec.yaml", 0o600},
	} {
		args := tc.args
		if args[1] == "testdata-user-data" {
			ud := filepath.Join(dir, "user-data")
			os.WriteFile(ud, []byte("#cloud-config\nhostname: x\n"), 0o644)
			args = append([]string{args[0], ud}, args[2:]...)
		}
		out := filepath.Join(dir, tc.out)
		code, _, stderr := run(t, append(args, "-o", out)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d %s", args, code, stderr)
		}
		st, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != tc.want {
			t.Errorf("%v -o %s: mode %v, want %v", args, tc.out, st.Mode().Perm(), tc.want)
		}
		if st.IsDir() {
			filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
				info, _ := d.Info()
				want := tc.want &^ 0o111
				if d.IsDir() {
					want = tc.want
				}
				if info.Mode().Perm() != want {
					t.Errorf("%s: mode %v, want %v", p, info.Mode().Perm(), want)
				}
				return nil
			})
		}
	}
}

// TestOutputTargets: an output replaces only a regular file; anything else
// is refused in words, and no error shows a temporary file's name.
func TestOutputTargets(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.iso")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.iso")
	os.Symlink(filepath.Join(dir, "target.iso"), link)
	for _, tc := range []struct{ out, want string }{
		{dir, "is a directory: name the file to write in it"},
		{"/dev/null", "is a character device, not a regular file"},
		{fifo, "is a FIFO, not a regular file"},
		{link, "is a symbolic link"},
		{filepath.Join(dir, "no", "such", "x.iso"), "directory " + filepath.Join(dir, "no", "such") + " does not exist"},
		{filepath.Join(dir, "seed.qcow2"), "name the seed .iso (ISO9660), .img (VFAT) or .tar"},
	} {
		code, _, stderr := run(t, "build", examples[0], "-o", tc.out)
		if code == ExitOK || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, ".tmp-") {
			t.Errorf("-o %s: exit %d %q, want %q", tc.out, code, stderr, tc.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "target.iso")); err == nil {
		t.Error("the link's target was written")
	}
	if st, _ := os.Stat("/dev/null"); st.Mode().Type()&fs.ModeCharDevice == 0 {
		t.Error("/dev/null was replaced")
	}
	// Standard output, by either name, is written through.
	for _, out := range []string{"-", "/dev/stdout"} {
		code, stdout, stderr := run(t, "build", examples[0], "-o", out)
		if code != ExitOK || !strings.Contains(stdout, "CD001") {
			t.Errorf("-o %s: exit %d, %d bytes %s", out, code, len(stdout), stderr)
		}
	}
}

// TestBuildFromStdin: SPEC - reads the spec from standard input, as
// convert - does; its source files are relative to the current directory.
func TestBuildFromStdin(t *testing.T) {
	spec, err := os.ReadFile(examples[0])
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "s.iso")
	cmd := NewRootCommand()
	cmd.SetArgs([]string{"build", "-", "-o", out})
	cmd.SetIn(strings.NewReader(string(spec)))
	cmd.SetOut(new(strings.Builder))
	cmd.SetErr(new(strings.Builder))
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(t.TempDir(), "f.iso")
	if code, _, stderr := run(t, "build", examples[0], "-o", want); code != ExitOK {
		t.Fatal(stderr)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(want)
	if string(a) != string(b) {
		t.Error("the spec from standard input built different bytes")
	}
	// Problems name <stdin>.
	cmd = NewRootCommand()
	cmd.SetArgs([]string{"validate", "-"})
	cmd.SetIn(strings.NewReader("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: x}\nspec: {hostnme: y}\n"))
	cmd.SetOut(new(strings.Builder))
	cmd.SetErr(new(strings.Builder))
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "<stdin>:4") {
		t.Errorf("err = %v", err)
	}
}

// TestFcosExampleFollowsItsAgent: the Ignition example builds Ignition
// without --format, because its spec says agent: ignition.
func TestFcosExampleFollowsItsAgent(t *testing.T) {
	dir := t.TempDir()
	ign := filepath.Join(dir, "c.ign")
	code, _, stderr := run(t, "build", fcosExample, "-o", ign)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(ign)
	if !strings.HasPrefix(string(b), `{"ignition":{"version":"3.`) {
		t.Errorf("not an Ignition config: %.80s", b)
	}
	if code, stdout, _ := run(t, "validate", fcosExample); code != ExitOK || !strings.Contains(stdout, "Ignition 3.") {
		t.Errorf("validate: %q", stdout)
	}
	// The user can still ask for a cloud-init seed of it.
	if code, _, stderr := run(t, "build", fcosExample, "--format", "seed", "-o", filepath.Join(dir, "s.iso")); code != ExitOK {
		t.Errorf("--format seed: %s", stderr)
	}
}

// TestIgnitionBuildMessages: what build says matches what it wrote.
func TestIgnitionBuildMessages(t *testing.T) {
	dir := t.TempDir()
	ign := filepath.Join(dir, "c.ign")
	// No transport: the QEMU arguments, with an absolute path.
	_, _, stderr := run(t, "build", fcosExample, "-o", ign)
	if !strings.Contains(stderr, "QEMU: -fw_cfg name=opt/com.coreos/config,file="+ign) {
		t.Errorf("no QEMU hint with the absolute path:\n%s", stderr)
	}
	// A transport it fits: says so, and nothing about a pointer.
	_, _, stderr = run(t, "build", fcosExample, "-o", ign, "--transport", "ec2")
	if !strings.Contains(stderr, "fits EC2 user data") || strings.Contains(stderr, "QEMU") {
		t.Errorf("fit:\n%s", stderr)
	}
	// A pointer build: what to upload where, and no QEMU hint for a
	// config QEMU is not given.
	full := filepath.Join(dir, "full.ign")
	_, _, stderr = run(t, "build", fcosExample, "-o", ign, "--transport", "kubevirt", "--publish-url", "https://cfg.example.com/x.ign", "--publish-out", full)
	if !strings.Contains(stderr, "a pointer config") || !strings.Contains(stderr, "upload "+full) || strings.Contains(stderr, "QEMU") {
		t.Errorf("pointer:\n%s", stderr)
	}
}

// TestDeliverChecksItsInput: deliver refuses what is not an Ignition
// config and prints absolute paths.
func TestDeliverChecksItsInput(t *testing.T) {
	dir := t.TempDir()
	iso := filepath.Join(dir, "s.iso")
	run(t, "build", examples[0], "-o", iso)
	if code, _, stderr := run(t, "deliver", iso, "--to", "qemu"); code != ExitInvalid || !strings.Contains(stderr, "not an Ignition config") {
		t.Errorf("an ISO: exit %d %s", code, stderr)
	}
	bad := filepath.Join(dir, "bad.ign")
	os.WriteFile(bad, []byte(`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"relative"}]}}`), 0o600)
	if code, _, stderr := run(t, "deliver", bad); code != ExitInvalid || !strings.Contains(stderr, "path not absolute") {
		t.Errorf("an invalid config: exit %d %s", code, stderr)
	}
	ign := filepath.Join(dir, "c.ign")
	run(t, "build", fcosExample, "-o", ign)
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(dir)
	for _, to := range []string{"qemu", "qemu-disk", "libvirt", "libvirt-qemu"} {
		code, stdout, stderr := run(t, "deliver", "c.ign", "--to", to)
		if code != ExitOK || !strings.Contains(stdout, ign) {
			t.Errorf("--to %s: exit %d %q %s", to, code, stdout, stderr)
		}
	}
}

// TestInspectTarAndAlignment: inspect reads the tar build writes, and
// notes an image that is not 4 KiB aligned.
func TestInspectTarAndAlignment(t *testing.T) {
	dir := t.TempDir()
	tarball := filepath.Join(dir, "s.tar")
	run(t, "build", examples[1], "-o", tarball, "--datasource", "configdrive")
	code, stdout, stderr := run(t, "inspect", tarball)
	if code != ExitOK || !strings.Contains(stdout, "openstack/latest/meta_data.json") || !strings.Contains(stdout, "configdrive") {
		t.Errorf("tar: exit %d\n%s%s", code, stdout, stderr)
	}
	genisoimage := testtools.Require(t, "genisoimage")
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "user-data"), []byte("#cloud-config\nhostname: x\n"), 0o644)
	os.WriteFile(filepath.Join(src, "meta-data"), []byte("instance-id: iid-1\n"), 0o644)
	iso := filepath.Join(dir, "g.iso")
	if out, err := exec.Command(genisoimage, "-quiet", "-o", iso, "-V", "cidata", "-J", "-R", src).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	st, _ := os.Stat(iso)
	if st.Size()%4096 == 0 {
		t.Skipf("this genisoimage wrote an aligned image (%d bytes)", st.Size())
	}
	code, stdout, _ = run(t, "inspect", iso)
	if code != ExitOK || !strings.Contains(stdout, "not a multiple of 4 KiB") {
		t.Errorf("unaligned %d-byte image: exit %d\n%s", st.Size(), code, stdout)
	}
	ours := filepath.Join(dir, "ours.iso")
	run(t, "build", examples[1], "-o", ours)
	if _, stdout, _ := run(t, "inspect", ours); strings.Contains(stdout, "4 KiB") {
		t.Errorf("our aligned image got the note:\n%s", stdout)
	}
}

// TestConvertMessagesFitTheTarget: --to spec keeps what it cannot say in
// spec fields; --to ignition names what Ignition cannot do; scripts become
// commands for both.
func TestConvertMessagesFitTheTarget(t *testing.T) {
	dir := t.TempDir()
	ud := filepath.Join(dir, "user-data")
	os.WriteFile(ud, []byte("#cloud-config\napt: {preserve_sources_list: true}\nruncmd: [ls]\n"), 0o600)
	code, stdout, stderr := run(t, "convert", ud, "--to", "spec")
	if code != ExitOK || !strings.Contains(stdout, "preserve_sources_list") || strings.Contains(stderr, "Ignition") {
		t.Errorf("--to spec: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = run(t, "convert", ud, "--to", "ignition")
	if code != ExitInvalid || !strings.Contains(stderr, "apt: no Ignition equivalent") {
		t.Errorf("--to ignition: exit %d %s", code, stderr)
	}
	script := filepath.Join(dir, "script")
	os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o600)
	for _, to := range []string{"spec", "ignition"} {
		if code, stdout, stderr := run(t, "convert", script, "--to", to); code != ExitOK || !strings.Contains(stdout, "user-data-script") {
			t.Errorf("script --to %s: exit %d %s%s", to, code, stdout, stderr)
		}
	}
}

// TestValidateRunsEveryCheck: what build --format ignition, cloud-init's
// schema and the merge would find, validate finds, all at once.
func TestValidateRunsEveryCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: x}\nspec:\n"+doc), 0o600)
		return p
	}
	report := func(p string, args ...string) (errs, warns string) {
		code, stdout, _ := run(t, append([]string{"validate", p, "--json"}, args...)...)
		var rep validateReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || (code == ExitOK) != rep.Valid {
			t.Fatalf("exit %d: %s", code, stdout)
		}
		for _, e := range rep.Errors {
			errs += e.Error() + "\n"
		}
		for _, e := range rep.Warnings {
			warns += e.Error() + "\n"
		}
		return errs, warns
	}
	// Ignition: the user's config is checked even though the spec has a
	// problem of its own, which used to hide it.
	ign := write("ign.yaml", `  packages: [git]
  ignition:
    config: '{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"relative/x","mode":99999}]}}'
`)
	errs, _ := report(ign)
	for _, want := range []string{
		"ign.yaml:5: spec.packages: Ignition cannot install packages",
		"ign.yaml:7: spec.ignition.config: line 1 col 61: path not absolute",
		"spec.ignition.config: line 1 col 81: illegal file mode",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors lack %q:\n%s", want, errs)
		}
	}
	// cloud-init: the user's cloud-config against cloud-init's schema, and
	// the spec field it replaces.
	ci := write("ci.yaml", `  packages: [git]
  cloudInit:
    userData: |
      #cloud-config
      packages: notalist
      runcmd: 5
      ssh_pwauth: maybe
`)
	errs, warns := report(ci)
	for _, want := range []string{"ci.yaml:7: spec.cloudInit.userData: packages (line 2)", "spec.cloudInit.userData: runcmd (line 3)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors lack %q:\n%s", want, errs)
		}
	}
	if !strings.Contains(warns, "ssh_pwauth (line 4): deprecated") {
		t.Errorf("warnings lack the deprecation:\n%s", warns)
	}
	// A valid cloud-config that replaces spec.packages: a warning, an
	// error with --strict.
	over := write("over.yaml", `  packages: [git]
  cloudInit:
    userData: |
      #cloud-config
      packages: [make]
`)
	errs, warns = report(over)
	if errs != "" || !strings.Contains(warns, "packages (user-data line 2) replaces the packages that spec.packages generates") {
		t.Errorf("override: errors %q warnings %q", errs, warns)
	}
	if errs, _ = report(over, "--strict"); !strings.Contains(errs, "replaces the packages") {
		t.Errorf("--strict: %q", errs)
	}
	// build only warns about a schema error (cloud-init itself only
	// warns); validate fails on it.
	if code, _, stderr := run(t, "build", ci, "-o", filepath.Join(dir, "s.iso")); code != ExitOK || !strings.Contains(stderr, "warning: ") {
		t.Errorf("build: exit %d %s", code, stderr)
	}
}
