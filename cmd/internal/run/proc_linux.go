package run

import (
	"errors"
	"io/fs"
	"syscall"
)

// sysProcAttr runs QEMU in its own process group, so that the terminal's
// Ctrl-C reaches vminit (which powers the guest off) and not QEMU (which
// would quit at once), and kills it if vminit dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// leftByDeadRun reports a run directory of this user whose run (the
// process its pid file names) is gone: SIGKILL left it behind.
func leftByDeadRun(st fs.FileInfo, pid int) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || int(sys.Uid) != syscall.Getuid() || pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
