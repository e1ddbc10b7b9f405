package firstboot_test

import (
	"strings"
	"testing"

	"github.com/vminit/vminit/mdserver/firstboot"
)

// TestWhy: the line that says why, from the shapes of message the agents
// report (the real ones are TestFirstErrorSaysWhyCloudInit's and
// mdserver's TestFirstErrorSaysWhyIgnition); Why of its own answer is
// that answer, so a row's brief message reads the same again.
func TestWhy(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"RuntimeError('Runparts: 1 failures (runcmd) in 1 attempted commands')\nFailed to enable unit: Unit file nginx.service does not exist.\n" +
			"2026-11-29 03:40:01,123 - subp.py[WARNING]: Failed running /var/lib/cloud/instance/scripts/runcmd [1]\n" +
			"2026-11-29 03:40:01,124 - util.py[WARNING]: Running module scripts-user (<module 'cloudinit.config.cc_scripts_user'>) failed\n" +
			"Cloud-init v. 22.4.2 finished at Sun, 29 Nov 2026 03:40:02 +0000. Datasource DataSourceNoCloud.  Up 30.00 seconds",
			"Failed to enable unit: Unit file nginx.service does not exist."},
		{"Nov 29 03:40:01 fcos systemd[1]: Starting app.service - App...\nNov 29 03:40:01 fcos app[812]: /usr/local/bin/app: error while loading shared libraries: libssl.so.1.1: cannot open shared object file: No such file or directory\n" +
			"Nov 29 03:40:01 fcos systemd[1]: app.service: Main process exited, code=exited, status=127/n/a\nNov 29 03:40:01 fcos systemd[1]: Failed to start app.service - App.",
			"/usr/local/bin/app: error while loading shared libraries: libssl.so.1.1: cannot open shared object file: No such file or directory"},
		// A spec mount's unit on Debian 12, as the real guest's journal
		// has it (TestGuestFirstBoot/CloudInitUnitFails).
		{"Nov 29 07:54:52 dev systemd[1]: Mounting mnt-vminitbad.mount - Mount tmpfs at /mnt/vminitbad...\n" +
			"Nov 29 07:54:52 dev mount[538]: mount: /mnt/vminitbad: wrong fs type, bad option, bad superblock on tmpfs, missing codepage or helper program, or other error.\n" +
			"Nov 29 07:54:52 dev mount[538]:        dmesg(1) may have more information after failed mount system call.\n" +
			"Nov 29 07:54:52 dev systemd[1]: mnt-vminitbad.mount: Mount process exited, code=exited, status=32/n/a\n" +
			"Nov 29 07:54:52 dev systemd[1]: mnt-vminitbad.mount: Failed with result 'exit-code'.\n" +
			"Nov 29 07:54:52 dev systemd[1]: Failed to mount mnt-vminitbad.mount - Mount tmpfs at /mnt/vminitbad.",
			"mount: /mnt/vminitbad: wrong fs type, bad option, bad superblock on tmpfs, missing codepage or helper program, or other error."},
		{"Starting app.service...\nlistening on :80\nsegfault soon\napp.service: Failed with result 'core-dump'.", "segfault soon"},
		{"Traceback (most recent call last):\n  File \"/x.py\", line 1, in <module>\n    raise ValueError('x')\nValueError: x\nthe script's last words", "the script's last words"},
		{"vminit-boom\nexit 3", "vminit-boom"},
		{"running module scripts-user (<module 'cloudinit.config.cc_scripts_user'>) failed", "running module scripts-user (<module 'cloudinit.config.cc_scripts_user'>) failed"},
		{"cloud-init did not finish this stage (status.json names it, and there is no result.json)", "cloud-init did not finish this stage (status.json names it, and there is no result.json)"},
		{"", ""},
	} {
		got := firstboot.Why(tc.msg)
		if got != tc.want || firstboot.Why(got) != got {
			t.Errorf("Why(%q) = %q, want %q (again: %q)", tc.msg, got, tc.want, firstboot.Why(got))
		}
	}
}

// BenchmarkWhy: a failure's whole message (MaxMessage bytes of log tail).
func BenchmarkWhy(b *testing.B) {
	msg := "RuntimeError('Runparts: 1 failures (runcmd) in 1 attempted commands')\n" +
		strings.Repeat("+----[SHA256]-----+ randomart of a host key\n", firstboot.MaxMessage/48) +
		"Failed to enable unit: Unit file nginx.service does not exist.\n"
	for b.Loop() {
		firstboot.Why(msg)
	}
}
