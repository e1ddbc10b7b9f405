// Package testproc holds what the test helpers that start real servers
// (etcdtest, kubetest) share about their child processes.
package testproc

import "syscall"

// SysProcAttr puts the child in a process group of its own, so that
// stopping it reaches anything it forks, and has the kernel kill it when
// the test binary dies without cleaning up. (Pdeathsig follows the thread
// that forked it; Go's runtime does not end its threads while the program
// runs, except those locked with runtime.LockOSThread, which the helpers
// do not do.)
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
