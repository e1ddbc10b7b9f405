//go:build !linux

// Package testproc holds what the test helpers that start real servers
// (etcdtest, kubetest) share about their child processes.
package testproc

import "syscall"

// SysProcAttr: off Linux there is no Pdeathsig, and the helpers' servers
// (Linux tools installed by scripts/install-test-tools.sh) do not run; the
// helpers only need to compile, so that every platform's build is checked.
func SysProcAttr() *syscall.SysProcAttr { return nil }
