// Package testtools finds the external programs that vminit's tests use as
// independent oracles (bsdtar, xorriso, isoinfo, 7z, blkid, fsck.fat, mtools,
// cloud-init's Python, ignition, qemu).
//
// Locally a missing tool skips the test that needs it, so a developer without
// the tools can still run the unit tests. Under CI (CI=true) or with
// VMINIT_REQUIRE_TOOLS=1 a missing tool fails the test instead: the whole point
// of those tests is the real consumer, and a silent skip would hide a broken
// install step.
package testtools

import (
	"os"
	"os/exec"
	"testing"
)

// Strict reports whether a missing tool must fail the test rather than skip it.
func Strict() bool {
	return os.Getenv("CI") == "true" || os.Getenv("VMINIT_REQUIRE_TOOLS") == "1"
}

// Require returns the absolute path of the named program, or stops the test:
// a skip locally, a failure under CI.
func Require(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	Missing(t, name+" not found on PATH")
	return ""
}

// RequireFile is Require for a program or data file at a fixed path, such as
// /usr/bin/python3 (not the pyenv shim) or the ignition binary inside its
// dracut module folder.
func RequireFile(t testing.TB, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, path+" not found")
	}
	return path
}

// Missing stops the test because something it needs is not installed.
func Missing(t testing.TB, why string) {
	t.Helper()
	if Strict() {
		t.Fatalf("%s (install the test tools: make test-tools)", why)
	}
	t.Skipf("%s (install the test tools: make test-tools)", why)
}
