// Package ignitiontest applies Ignition configs with the real ignition
// binary (Debian's 2.14, from its dracut module folder) into a temporary
// root, for tests that check what a config leaves on a guest.
package ignitiontest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// Binary is where Debian's ignition package (2.14) installs the ignition
// binary: inside its dracut module, as it runs in an initramfs.
const Binary = "/usr/lib/dracut/modules.d/30ignition/ignition"

// SeedRoot is the part of a CoreOS-family root that Ignition's files
// stage needs: the account databases useradd and groupadd edit, with the
// core user and the groups the images keep in /etc/group, and the
// login.defs that gives each new user a group of its own, as on the images.
var SeedRoot = map[string]string{
	"etc/passwd":     "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n",
	"etc/group":      "root:x:0:\nwheel:x:10:core\nadm:x:4:core\nsudo:x:16:core\nsystemd-journal:x:190:core\ndocker:x:233:\nportage:x:250:\ncore:x:1000:\n",
	"etc/shadow":     "root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n",
	"etc/gshadow":    "root:*::\nwheel:*::core\nadm:*::core\nsudo:*::core\nsystemd-journal:!::core\ndocker:!::\nportage:!::\ncore:!::\n",
	"etc/login.defs": "USERGROUPS_ENAB yes\nUID_MIN 1000\nGID_MIN 1000\nSYS_UID_MIN 201\nSYS_UID_MAX 999\nSYS_GID_MIN 201\nSYS_GID_MAX 999\nCREATE_HOME no\n",
	// Debian builds Ignition with SELinux relabelling on: it reads the
	// policy type here, and runs setfiles, stubbed below.
	"etc/selinux/config": "SELINUXTYPE=targeted\n",
	"home/core/.keep":    "",
}

// Apply runs the real ignition binary's fetch and files stages on config,
// the way the initramfs does on first boot, into a fresh root (SeedRoot)
// under a temporary directory, and returns the root. It needs root
// (useradd, chown); without it, or without the binary, the test is skipped
// unless VMINIT_REQUIRE_TOOLS=1.
func Apply(t *testing.T, config []byte) string {
	t.Helper()
	bin := testtools.RequireFile(t, Binary)
	if os.Geteuid() != 0 {
		testtools.Missing(t, "applying Ignition configs needs root (useradd, chown)")
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for name, content := range SeedRoot {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(root, "etc/shadow"), 0o600)
	os.Chmod(filepath.Join(root, "etc/gshadow"), 0o600)
	// Ignition writes authorized_keys as the user, so the path to the
	// root must be traversable (t.TempDir is 0700) and home/core core's.
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chown(filepath.Join(root, "home/core"), 1000, 1000)
	stub := filepath.Join(dir, "bin")
	os.Mkdir(stub, 0o755)
	os.WriteFile(filepath.Join(stub, "setfiles"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	cfg := filepath.Join(dir, "config.ign")
	if err := os.WriteFile(cfg, config, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, stage := range []string{"fetch", "files"} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, "-platform", "file", "-stage", stage, "-root", root, "-log-to-stdout",
			"-config-cache", filepath.Join(dir, "cache.json"), "-state-file", filepath.Join(dir, "state"))
		cmd.Env = append(os.Environ(), "IGNITION_CONFIG_FILE="+cfg, "PATH="+stub+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("ignition -stage %s: %v\n%s", stage, err, lastLines(out, 40))
		}
	}
	return root
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Fetch runs the real ignition binary's fetch stage for platform (with
// env added to its environment, e.g. IGNITION_CONFIG_FILE for the file
// platform) and returns the config it cached: what a guest would apply.
// A failed run's error is an *exec.ExitError whose Stderr holds the log.
func Fetch(t testing.TB, platform string, env ...string) (string, error) {
	return FetchIn(t, nil, platform, env...)
}

// FetchIn is Fetch with the binary run by the command wrap (its program
// and arguments, before the binary's), e.g. {"ip", "netns", "exec", NAME}
// to fetch from a guest's network namespace.
func FetchIn(t testing.TB, wrap []string, platform string, env ...string) (string, error) {
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(append([]string(nil), wrap...), Binary, "-platform", platform, "-stage", "fetch", "-log-to-stdout",
		"-fetch-timeout", "20s", "-config-cache", filepath.Join(tmp, "cache.json"),
		"-state-file", filepath.Join(tmp, "state"), "-root", filepath.Join(tmp, "root"))
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out.Bytes()}
	}
	b, err := os.ReadFile(filepath.Join(tmp, "cache.json"))
	return string(b), err
}
