package run

import (
	"strings"
	"testing"
)

// The long quiet stretch between the kernel and the agent has milestones:
// the initramfs, the root file system's systemd, and its targets.
func TestWatcherSaysUserspaceMilestones(t *testing.T) {
	_, said := feed(agentCloudInit, `[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1
[    1.900000] Run /init as init process
[    4.500000] systemd[1]: systemd 252.31-1~deb12u1 running in system mode (+PAM +AUDIT +SELINUX)
[    4.600000] systemd[1]: Detected virtualization kvm.
Welcome to `+"\x1b[1mDebian GNU/Linux 12 (bookworm)\x1b[0m"+`!
[  OK  ] Reached target local-fs.target - Local File Systems.
[  OK  ] Reached target local-fs.target - Local File Systems.
[  OK  ] Reached target network.target - Network.
`+ciHead[strings.Index(ciHead, "[    8.1"):])
	want := []string{"kernel 6.1.0-28-amd64 booting", "initramfs running (/init)", "systemd 252.31-1~deb12u1 started",
		"Debian GNU/Linux 12 (bookworm) starting", "reached local-fs.target", "reached network.target", "cloud-init 22.4.2 started"}
	got := strings.Join(said, "\n")
	if !strings.HasPrefix(got, strings.Join(want, "\n")) {
		t.Errorf("progress:\n%s\nwant first:\n%s", got, strings.Join(want, "\n"))
	}
}

// A kernel panic is the Result's Panic, the reason the boot ended.
func TestWatcherPanicIsTheResultsPanic(t *testing.T) {
	w, _ := feed(agentCloudInit, "[    0.000000] Linux version 6.1.0\n[    2.0] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n")
	if r := w.result("cloud-init", 0); r.Panic != "VFS: Unable to mount root fs on unknown-block(0,0)" || r.OK {
		t.Errorf("result %+v", r)
	}
}
