package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/platform/ovirt"
	"github.com/vminit/vminit/seed"
)

// vminit inspect reads the sysprep answer-file disc vminit build writes
// for a KubeVirt VM: no cloud-init seed is missing from it.
func TestInspectReadsTheSysprepDisc(t *testing.T) {
	vm := filepath.Join("..", "..", "..", "platform", "testdata", "kubevirt-sysprep.yaml")
	dir := t.TempDir()
	// The VM has a sysprep volume alone: build's output is its disc.
	sysprep := filepath.Join(dir, "sysprep.iso")
	if code, _, stderr := run(t, "build", vm, "-o", sysprep); code != ExitOK {
		t.Fatalf("build: exit %d %s", code, stderr)
	}
	code, stdout, stderr := run(t, "inspect", sysprep)
	if code != ExitOK || !regexp.MustCompile(`datasource:\s+sysprep\n`).MatchString(stdout) || !regexp.MustCompile(`checks:\s+ok\n`).MatchString(stdout) {
		t.Errorf("inspect: exit %d\n%s%s", code, stdout, stderr)
	}
}

// vminit inspect recognises the answer-file disc vminit build writes for
// oVirt's Windows VM (the Python SDK's add_vm_with_sysprep.py: no label,
// Unattend.xml), as a VFAT image (the engine's floppy) and an ISO (its
// CD-ROM, labelled as genisoimage labels a volume vdsm gives no -V): it
// checks the answer file and notes the words build warned with; --strict
// changes neither exit. A disc whose Unattend.xml is not well-formed is a
// problem naming the file and the line.
func TestInspectReadsTheOVirtSysprepDisc(t *testing.T) {
	vm := corpusFile("ovirt/py-start-vm-with-sysprep.xml")
	dir := t.TempDir()
	var inspect [][]string
	var buildErr string
	for _, out := range []string{filepath.Join(dir, "sysprep.img"), filepath.Join(dir, "sysprep.iso")} {
		var code int
		code, _, buildErr = run(t, "build", vm, "-o", out)
		if code != ExitOK {
			t.Fatalf("build -o %s: exit %d %s", out, code, buildErr)
		}
		inspect = append(inspect, []string{"inspect", out}, []string{"inspect", out, "--strict"})
	}
	if code, _, stderr := run(t, "build", vm, "--strict", "-o", filepath.Join(dir, "strict.img")); code != ExitOK {
		t.Fatalf("build --strict: exit %d %s", code, stderr)
	}
	if want := genisoimageLabel(t); want != "" {
		if _, stdout, _ := run(t, "inspect", filepath.Join(dir, "sysprep.iso")); !regexp.MustCompile(`(?m)^label:\s+` + want + `$`).MatchString(stdout) {
			t.Errorf("the ISO's label is not genisoimage's %q:\n%s", want, stdout)
		}
	}
	for _, args := range inspect {
		code, stdout, stderr := run(t, args...)
		if code != ExitOK || !regexp.MustCompile(`datasource:\s+sysprep\n`).MatchString(stdout) || !regexp.MustCompile(`checks:\s+ok\n`).MatchString(stdout) ||
			!strings.Contains(stdout, "oVirt's sysprep payload") {
			t.Errorf("%v: exit %d\n%s%s", args, code, stdout, stderr)
			continue
		}
		// The answer file's note is what build warned.
		note := regexp.MustCompile(`note:\s+(Unattend\.xml passed through .*)\n`).FindStringSubmatch(stdout)
		if note == nil || !strings.Contains(buildErr, note[1]) {
			t.Errorf("%v: the answer file's note is not build's warning:\n%s\nbuild:\n%s", args, stdout, buildErr)
		}
	}

	bad := filepath.Join(dir, "bad.img")
	f, err := os.Create(bad)
	if err != nil {
		t.Fatal(err)
	}
	disc := &seed.Seed{Datasource: "sysprep", Files: []seed.File{{Path: ovirt.SysprepFile, Data: []byte("<unattend xmlns=\"urn:schemas-microsoft-com:unattend\">\n<settings>\n</unattend>\n")}}}
	if err := media.Write(f, disc, media.VFAT, media.Options{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, stdout, _ := run(t, "inspect", bad)
	if code == ExitOK || !strings.Contains(stdout, "Unattend.xml is not well-formed XML") || !strings.Contains(stdout, "line 3") {
		t.Errorf("inspect of a disc with a broken Unattend.xml: exit %d\n%s", code, stdout)
	}
}

// genisoimageLabel is the volume label genisoimage gives an image made
// without -V, as isoinfo reads it.
func genisoimageLabel(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"genisoimage", "isoinfo"} {
		if _, err := exec.LookPath(tool); err != nil {
			testtools.Missing(t, tool+" is not installed")
			return ""
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(t.TempDir(), "x.iso")
	if out, err := exec.Command("genisoimage", "-quiet", "-R", "-J", "-o", iso, dir).CombinedOutput(); err != nil {
		t.Fatalf("genisoimage: %v %s", err, out)
	}
	out, err := exec.Command("isoinfo", "-d", "-i", iso).Output()
	if err != nil {
		t.Fatalf("isoinfo: %v", err)
	}
	m := regexp.MustCompile(`(?m)^Volume id: (.*)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("isoinfo names no volume id:\n%s", out)
	}
	return string(m[1])
}
