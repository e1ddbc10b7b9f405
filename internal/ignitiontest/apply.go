// Package ignitiontest applies Ignition configs with the real ignition
// binary (Debian's 2.14, from its dracut module folder) into a temporary
// root, for tests that check what a config leaves on a guest.
package ignitiontest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/internal/testtools"
)

// Binary is where Debian's ignition package installs the ignition binary.
const Binary = "/usr/lib/dracut/modules.d/30ignition/ignition"

// Apply runs the real ignition binary's fetch and files stages on
// config into a fresh root, the way the initramfs does on first boot, and
// returns the root.
func Apply(t *testing.T, config []byte) string {
	t.Helper()
	bin := testtools.RequireFile(t, Binary)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	// A minimal root: the account databases useradd edits, and the core
	// user every CoreOS image has.
	for name, content := range map[string]string{
		"etc/passwd":         "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n",
		"etc/group":          "root:x:0:\nwheel:x:10:\nadm:x:4:\nsudo:x:27:\ncore:x:1000:\n",
		"etc/shadow":         "root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n",
		"etc/gshadow":        "root:*::\nwheel:*::\nadm:*::\nsudo:*::\ncore:!::\n",
		"etc/selinux/config": "SELINUXTYPE=targeted\n", // Debian's build relabels
		// As on Fedora CoreOS and Flatcar: useradd gives each user a group
		// of its own, which "owner: alice:alice" names.
		"etc/login.defs":  "USERGROUPS_ENAB yes\nUID_MIN 1000\nGID_MIN 1000\nSYS_UID_MIN 201\nSYS_GID_MIN 201\n",
		"home/core/.keep": "",
	} {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(root, "etc/shadow"), 0o600)
	// Ignition writes authorized_keys with the user's filesystem uid, so
	// the root must be traversable (t.TempDir is 0700) and home/core owned
	// by core, as on a real image.
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chown(filepath.Join(root, "home/core"), 1000, 1000)
	// A no-op setfiles first in PATH stands in for SELinux relabelling,
	// which needs a policy this machine does not have.
	stub := filepath.Join(dir, "bin")
	os.Mkdir(stub, 0o755)
	os.WriteFile(filepath.Join(stub, "setfiles"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	cfg := filepath.Join(dir, "config.ign")
	os.WriteFile(cfg, config, 0o644)
	for _, stage := range []string{"fetch", "files"} {
		cmd := exec.Command(bin, "-platform", "file", "-stage", stage, "-root", root, "-log-to-stdout",
			"-config-cache", filepath.Join(dir, "cache.json"), "-state-file", filepath.Join(dir, "state"))
		cmd.Env = append(os.Environ(), "IGNITION_CONFIG_FILE="+cfg, "PATH="+stub+":"+os.Getenv("PATH"))
		done := make(chan struct{})
		timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
		out, err := cmd.CombinedOutput()
		timer.Stop()
		close(done)
		if err != nil {
			t.Fatalf("ignition -stage %s: %v\n%s", stage, err, lastLines(out, 30))
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
