package run

import "syscall"

// sysProcAttr runs QEMU in its own process group, so that the terminal's
// Ctrl-C reaches vminit (which powers the guest off) and not QEMU (which
// would quit at once), and kills it if vminit dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
