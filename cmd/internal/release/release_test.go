package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
)

const repo = "../../.."

// distTargets are the targets the test builds: the two the .deb is made
// for. make check cross-compiles every release target with the same
// flags, so here the compiles are cached and only the links cost.
var distTargets = []string{"linux/amd64", "linux/arm64"}

// TestDist builds the release twice and checks that the artefacts are the
// same bytes (so the image's digest is stable), that SHA256SUMS verifies,
// that the binary names its version, commit and date, that the .deb holds
// and installs what it should, and that the image is what it should be.
func TestDist(t *testing.T) {
	dpkgDeb := testtools.Require(t, "dpkg-deb")
	ctx := context.Background()
	a, b := t.TempDir(), t.TempDir()
	for _, out := range []string{a, b} {
		if err := run(ctx, repo, out, distTargets); err != nil {
			t.Fatal(err)
		}
	}
	sameFiles(t, a, b)
	cmd := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	cmd.Dir = a
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum --check: %v\n%s", err, out)
	}
	st, err := stampOf(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	native := filepath.Join(a, "vminit-linux-"+runtime.GOARCH)
	checkVersion(t, native, st)
	debs, _ := filepath.Glob(filepath.Join(a, "*_"+runtime.GOARCH+".deb"))
	if len(debs) != 1 {
		t.Fatalf("want one .deb for %s, got %v", runtime.GOARCH, debs)
	}
	checkDebContents(t, dpkgDeb, debs[0], st)
	installDeb(t, debs[0], st)
	checkImage(t, a, st)
}

// sameFiles fails unless directories a and b hold the same names with the
// same bytes.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	ea, _ := os.ReadDir(a)
	eb, _ := os.ReadDir(b)
	if len(ea) != len(eb) || len(ea) == 0 {
		t.Fatalf("%d files, then %d", len(ea), len(eb))
	}
	for i, e := range ea {
		if e.Name() != eb[i].Name() {
			t.Fatalf("%s, then %s", e.Name(), eb[i].Name())
		}
		x, _ := os.ReadFile(filepath.Join(a, e.Name()))
		y, _ := os.ReadFile(filepath.Join(b, e.Name()))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of one commit", e.Name())
		}
	}
}

// checkVersion runs bin version: it names the version, the commit and the
// commit's date.
func checkVersion(t *testing.T, bin string, st stamp) {
	t.Helper()
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	for _, want := range []string{st.Version, st.Commit, st.Date.Format(time.RFC3339)} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s version = %q, want it to name %q", filepath.Base(bin), out, want)
		}
	}
}

// debFiles are files the package must install, besides debPrograms.
var debFiles = []string{
	"/usr/lib/systemd/system/vminit-serve.service",
	"/usr/lib/systemd/system/vminit-mds-address@.service",
	"/usr/share/bash-completion/completions/vminit",
	"/usr/share/zsh/vendor-completions/_vminit",
	"/usr/share/fish/vendor_completions.d/vminit.fish",
	"/usr/share/man/man1/vminit.1.gz",
	"/usr/share/man/man1/vminit-build.1.gz",
	"/usr/share/man/man1/vminit-instances-put.1.gz",
}

func checkDebContents(t *testing.T, dpkgDeb, deb string, st stamp) {
	t.Helper()
	info, err := exec.Command(dpkgDeb, "--info", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --info: %v\n%s", err, info)
	}
	for _, want := range []string{"Package: vminit\n", "Version: " + debVersion(st) + "\n", "Architecture: " + runtime.GOARCH + "\n"} {
		if !strings.Contains(string(info), want) {
			t.Errorf("dpkg-deb --info lacks %q:\n%s", want, info)
		}
	}
	contents, err := exec.Command(dpkgDeb, "--contents", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --contents: %v\n%s", err, contents)
	}
	for _, f := range append(debFiles, debPrograms(t)...) {
		if !strings.Contains(string(contents), " ."+f+"\n") {
			t.Errorf("dpkg-deb --contents lacks %s:\n%s", f, contents)
		}
	}
}

// installDeb installs the package with the real dpkg -i into a root of
// its own under t.TempDir() (its own admin directory, as dpkg --root
// takes it: a test writes nothing outside its directory, and needs no
// root), checks dpkg -L and the installed binary, and removes it again.
// The package has no maintainer scripts, so nothing runs chrooted.
func installDeb(t *testing.T, deb string, st stamp) {
	t.Helper()
	dpkgBin := testtools.Require(t, "dpkg")
	root := t.TempDir()
	admin := filepath.Join(root, "var/lib/dpkg")
	for _, d := range []string{"info", "updates", "triggers"} {
		if err := os.MkdirAll(filepath.Join(admin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(admin, "status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	in := []string{"--root=" + root, "--admindir=" + admin, "--log=" + filepath.Join(root, "dpkg.log"), "--force-not-root", "--force-script-chrootless"}
	dpkg(t, dpkgBin, append(in, "--install", deb)...)
	listed := dpkg(t, dpkgBin, append(in, "--listfiles", "vminit")...)
	for _, f := range append(debFiles, debPrograms(t)...) {
		if !strings.Contains(listed, f+"\n") {
			t.Errorf("dpkg -L vminit lacks %s:\n%s", f, listed)
		}
	}
	checkVersion(t, filepath.Join(root, "usr/bin/vminit"), st)
	dpkg(t, dpkgBin, append(in, "--remove", "vminit")...)
	if _, err := os.Stat(filepath.Join(root, "usr/bin/vminit")); err == nil {
		t.Error("dpkg -r left /usr/bin/vminit")
	}
}

func dpkg(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// debPrograms are the programs the package must install: every main
// package's.
func debPrograms(t *testing.T) []string {
	var paths []string
	for _, p := range programs(t) {
		paths = append(paths, "/usr/bin/"+p)
	}
	return paths
}

// TestShippedPrograms: the release builds the programs under cmd/ (vminit
// and vminit-*) and nothing of cmd/internal, where the programs' packages
// and this tool live; make builds the same set into bin/.
func TestShippedPrograms(t *testing.T) {
	pkgs, err := mainPackages(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/vminit/vminit/"
	if !slices.Contains(pkgs, module+"cmd/vminit") {
		t.Errorf("the release does not build cmd/vminit: %v", pkgs)
	}
	for _, p := range pkgs {
		if !strings.HasPrefix(p, module+"cmd/vminit") || strings.Contains(p, "/internal/") {
			t.Errorf("the release builds %s, which is no program the repository ships", p)
		}
	}
	makefile, err := os.ReadFile(filepath.Join(repo, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(makefile), "-o bin/ "+shipped+"\n") {
		t.Errorf("make builds into bin/ another set than the release's %s", shipped)
	}
}
