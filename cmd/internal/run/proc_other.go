//go:build !linux

package run

import (
	"io/fs"
	"syscall"
)

// sysProcAttr: QEMU shares vminit's process group off Linux.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// leftByDeadRun: stale run directories are not reaped off Linux.
func leftByDeadRun(fs.FileInfo, int) bool { return false }
