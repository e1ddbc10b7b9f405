//go:build !linux

package run

import "syscall"

// sysProcAttr: QEMU shares vminit's process group off Linux.
func sysProcAttr() *syscall.SysProcAttr { return nil }
