package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
// Unattend.xml), a VFAT image (the engine's floppy): it checks the answer file
// and notes the words build warned with; --strict changes neither exit.
// A disc whose Unattend.xml is not well-formed is a problem naming the
// file and the line.
func TestInspectReadsTheOVirtSysprepDisc(t *testing.T) {
	vm := corpusFile("ovirt/py-start-vm-with-sysprep.xml")
	dir := t.TempDir()
	out := filepath.Join(dir, "sysprep.img")
	code, _, buildErr := run(t, "build", vm, "-o", out)
	if code != ExitOK {
		t.Fatalf("build: exit %d %s", code, buildErr)
	}
	if code, _, stderr := run(t, "build", vm, "--strict", "-o", filepath.Join(dir, "strict.img")); code != ExitOK {
		t.Fatalf("build --strict: exit %d %s", code, stderr)
	}
	for _, args := range [][]string{{"inspect", out}, {"inspect", out, "--strict"}} {
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
