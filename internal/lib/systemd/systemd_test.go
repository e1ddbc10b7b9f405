package systemd

import (
	"os/exec"
	"strings"
	"testing"
)

func TestMountUnitNames(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"/srv/data", "srv-data.mount"},
		{"/home/shared-nfs", `home-shared\x2dnfs.mount`},
		{"/mnt/.hidden/x y", `mnt-.hidden-x\x20y.mount`},
		{"/.snapshots", `\x2esnapshots.mount`},
		{"/data/ü", `data-\xc3\xbc.mount`},
	} {
		if got := MountUnitName(c.path); got != c.want {
			t.Errorf("MountUnitName(%q) = %q, want %q", c.path, got, c.want)
		}
	}
	if got := MountWhat("LABEL=my data/1"); got != `/dev/disk/by-label/my\x20data\x2f1` {
		t.Errorf("MountWhat = %q", got)
	}
	if got := MountWhat("/dev/vdb1"); got != "/dev/vdb1" {
		t.Errorf("MountWhat = %q", got)
	}
}

// TestMountUnitNameMatchesSystemdEscape compares with systemd's own
// escaping where systemd-escape is installed.
func TestMountUnitNameMatchesSystemdEscape(t *testing.T) {
	esc, err := exec.LookPath("systemd-escape")
	if err != nil {
		t.Skip("systemd-escape not installed")
	}
	for _, p := range []string{"/srv/data", "/home/shared-nfs", "/mnt/.hidden/x y", "/.snapshots", "/data/ü", "/a:b_c.d"} {
		out, err := exec.Command(esc, "--path", "--suffix=mount", p).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := MountUnitName(p), strings.TrimSpace(string(out)); got != want {
			t.Errorf("MountUnitName(%q) = %q, systemd-escape says %q", p, got, want)
		}
	}
}
