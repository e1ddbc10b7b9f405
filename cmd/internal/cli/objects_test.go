package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// platformExamples are the platform objects of platform/testdata: the seed
// documents' examples and each platform's documented ones. A file with a
// .err beside it must fail with exactly those lines and write nothing.
func platformExamples(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, ext := range []string{"yaml", "xml", "json"} {
		m, err := filepath.Glob(filepath.Join("..", "..", "..", "platform", "testdata", "*."+ext))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 15 {
		t.Fatalf("only %d examples", len(out))
	}
	return out
}

// TestPlatformExamplesRoundTrip builds every example, converts it to a
// vminit spec, builds that spec, and wants the same bytes (seed or
// Ignition config, both datasources).
func TestPlatformExamplesRoundTrip(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	for _, ex := range platformExamples(t) {
		if _, err := os.Stat(strings.TrimSuffix(ex, filepath.Ext(ex)) + ".err"); err == nil {
			continue
		}
		t.Run(filepath.Base(ex), func(t *testing.T) {
			dir := t.TempDir()
			var salt []string // --password-salt concerns oVirt's bodies alone
			if strings.HasPrefix(filepath.Base(ex), "ovirt-") {
				salt = []string{"--password-salt", "examplesalt"}
			}
			specPath := filepath.Join(dir, "instance.yaml")
			if code, _, stderr := run(t, append([]string{"convert", ex, "--to", "spec", "-o", specPath}, salt...)...); code != 0 {
				if strings.Contains(stderr, "sysprep answer-file disc") {
					out := filepath.Join(dir, "sysprep.iso")
					if code, _, stderr := run(t, "build", ex, "-o", out); code != 0 {
						t.Fatalf("build: %s", stderr)
					}
					return
				}
				t.Fatalf("convert: %s", stderr)
			}
			for _, out := range []string{"seed.iso", "config.ign"} {
				a, b := filepath.Join(dir, "a-"+out), filepath.Join(dir, "b-"+out)
				code, _, stderr := run(t, append([]string{"build", ex, "-o", a}, salt...)...)
				if strings.HasSuffix(out, ".ign") && code != 0 {
					continue // a cloud-init guest has no Ignition config
				}
				if code != 0 {
					t.Fatalf("build %s: %s", ex, stderr)
				}
				if code, _, stderr := run(t, "build", specPath, "-o", b); code != 0 {
					t.Fatalf("build %s: %s", specPath, stderr)
				}
				da, _ := os.ReadFile(a)
				db, _ := os.ReadFile(b)
				if !bytes.Equal(da, db) {
					t.Errorf("%s: building the object and its spec differ (%d and %d bytes)", out, len(da), len(db))
				}
			}
		})
	}
}

// TestPlatformExamplesErrors: bad input names the object's field, lists
// every problem, and writes nothing.
func TestPlatformExamplesErrors(t *testing.T) {
	for _, ex := range platformExamples(t) {
		errFile := strings.TrimSuffix(ex, filepath.Ext(ex)) + ".err"
		want, err := os.ReadFile(errFile)
		if err != nil {
			continue
		}
		t.Run(filepath.Base(ex), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "seed.iso")
			code, _, stderr := run(t, "build", ex, "-o", out)
			if code != ExitInvalid {
				t.Fatalf("exit %d, want %d; stderr %s", code, ExitInvalid, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written despite the error", out)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
				if !strings.Contains(stderr, line) {
					t.Errorf("stderr lacks %q:\n%s", line, stderr)
				}
			}
		})
	}
}

// TestSysprepOutWithOnlySysprep: a VM whose only first-boot volume is its
// sysprep disc has that disc written by -o; --sysprep-out beside it would
// write nothing, and is a usage error rather than silently ignored.
func TestSysprepOutWithOnlySysprep(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := run(t, "build", "../../../platform/testdata/kubevirt-sysprep.yaml", "-o", filepath.Join(dir, "seed.iso"),
		"--sysprep-out", filepath.Join(dir, "sysprep.iso"))
	if code != ExitUsage || !strings.Contains(stderr, "--sysprep-out") || !strings.Contains(stderr, "drop --sysprep-out") {
		t.Errorf("exit %d, want %d naming --sysprep-out:\n%s", code, ExitUsage, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote %d files, want none", len(entries))
	}
}
