// Package qemu finds QEMU on this host and decides how to run it: the
// programs (qemu-system-x86_64, qemu-img), the accelerator that works here
// (KVM when it really starts a guest, else TCG), and whether a file is a
// disk image QEMU can boot. `vminit run` and the QEMU test harness share
// these rules, so both make the same choice on the same host.
package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// System is the QEMU system emulator vminit runs.
const System = "qemu-system-x86_64"

// Img is QEMU's disk image tool (overlays).
const Img = "qemu-img"

// ErrNotFound is returned when a QEMU program is not on PATH.
var ErrNotFound = errors.New("not found on PATH")

// packages maps each program to the Debian/Ubuntu package that ships it.
var packages = map[string]string{System: "qemu-system-x86", Img: "qemu-utils"}

// Find returns the absolute path of a QEMU program (System or Img), or an
// error that names the package to install.
func Find(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	pkg := packages[name]
	if pkg == "" {
		pkg = "qemu"
	}
	return "", fmt.Errorf("%s %w: install QEMU (Debian/Ubuntu: apt-get install --no-install-recommends %s; Fedora: dnf install %s)",
		name, ErrNotFound, pkg, fedora[name])
}

var fedora = map[string]string{System: "qemu-system-x86-core", Img: "qemu-img"}

// Accelerators are the values Accel accepts.
var Accelerators = []string{"auto", "kvm", "tcg"}

// KVMArgs and TCGArgs are the accelerator arguments Accel returns.
var (
	KVMArgs = []string{"-accel", "kvm", "-cpu", "host"}
	TCGArgs = []string{"-accel", "tcg"}
)

// Accel returns the accelerator arguments for want ("auto" or "" = KVM
// when it works here, else TCG; "kvm" = KVM or an error saying why not;
// "tcg" = software emulation). VMINIT_QEMU_NO_KVM=1 makes auto choose TCG.
func Accel(qemu, want string) ([]string, error) {
	switch want {
	case "", "auto":
		if os.Getenv("VMINIT_QEMU_NO_KVM") != "" {
			return TCGArgs, nil
		}
		if ProbeKVM(qemu) == nil {
			return KVMArgs, nil
		}
		return TCGArgs, nil
	case "kvm":
		if err := ProbeKVM(qemu); err != nil {
			return nil, err
		}
		return KVMArgs, nil
	case "tcg":
		return TCGArgs, nil
	}
	return nil, fmt.Errorf("accelerator %q: want %s", want, strings.Join(Accelerators, ", "))
}

// ProbeKVM reports why KVM cannot run guests here, or nil when it can.
// The answer is decided once per process and QEMU binary. Opening /dev/kvm
// is not enough: a nested KVM can refuse the host CPU model's MSRs, and
// QEMU then aborts before the guest starts ("failed to set MSR 0x10a").
// The probe starts QEMU paused (-S) with KVM and quits from its monitor,
// which takes ~50 ms. (On such a host, the host CPU model without
// IA32_ARCH_CAPABILITIES passes the probe but the guest then stops with a
// KVM internal error, so TCG it is.)
func ProbeKVM(qemu string) error {
	probeMu.Lock()
	defer probeMu.Unlock()
	if err, ok := probed[qemu]; ok {
		return err
	}
	err := probeKVM(qemu)
	probed[qemu] = err
	return err
}

var (
	probeMu sync.Mutex
	probed  = map[string]error{}
)

func probeKVM(qemu string) error {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("KVM: %w", err)
	}
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, append([]string{"-nodefaults", "-no-user-config", "-display", "none",
		"-machine", "pc", "-m", "64", "-S", "-monitor", "stdio"}, KVMArgs...)...)
	cmd.Stdin = strings.NewReader("quit\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := lastLine(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("KVM: /dev/kvm opens but QEMU cannot start a guest with it: %s", msg)
	}
	return nil
}

// lastLine is the last line of QEMU's output that says something.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "qemu-system") && !strings.Contains(l, "Assertion") {
			return l
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// Escape doubles commas, QEMU's escape inside option values.
func Escape(s string) string { return strings.ReplaceAll(s, ",", ",,") }
