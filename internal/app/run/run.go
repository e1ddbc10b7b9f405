// Package run boots a virtual machine under QEMU with its first-boot data
// (a cloud-init seed or an Ignition config) built from an instance spec,
// and follows the guest's serial console until its agent reports that the
// first boot finished. It is the engine of `vminit run`.
//
// The disk image is never modified: a qcow2 overlay backed by it is booted.
// The seed is built in a temporary directory that Stop and Wait remove.
package run

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/vminit/vminit/spec"
)

// Options describes one guest to boot.
type Options struct {
	// Instance is the decoded and validated spec (the caller reads the file).
	Instance *spec.Instance
	// Image is the disk image. It is never modified: a qcow2 overlay
	// backed by it (qemu-img create -b) is booted.
	Image string
	// Overlay, if set, is where the overlay is created when absent; it is
	// kept, so a second Start on the same Overlay is a second boot of the
	// same disk. Empty means a temporary overlay, removed by Stop/Wait.
	Overlay string
	// Kernel, Initrd and Append are an optional direct kernel boot
	// (QEMU -kernel/-initrd/-append).
	Kernel, Initrd, Append string
	// Memory is the guest's memory in QEMU's syntax; "2G" by default.
	Memory string
	// CPUs is the number of virtual CPUs; 2 by default.
	CPUs int
	// SSHPort is the host port forwarded to the guest's port 22; 0 = none.
	SSHPort int
	// Datasource selects the delivery: for cloud-init "nocloud" (default)
	// or "configdrive"; for Ignition "fwcfg" (default) or "configdrive".
	Datasource string
	// Media is the seed drive's filesystem: "iso" (default) or "vfat".
	Media string
	// Serve answers the guest from an in-process metadata server reached
	// over its user-mode network instead of a seed drive.
	Serve bool
	// Dialect is the metadata API served with Serve: "ec2", "openstack" or
	// "nocloud" for cloud-init (default from the spec, else ec2); "aws" or
	// "openstack" for Ignition.
	Dialect string
	// NICs is the number of extra user-mode NICs beyond the first (for
	// bonds); their MACs come from the spec when it names them.
	NICs int
	// Accel is "auto" (default: KVM when it works, else TCG), "kvm" or "tcg".
	Accel string
	// Console, if non-nil, receives every byte of the serial console.
	Console io.Writer
	// Progress, if non-nil, receives human progress lines.
	Progress io.Writer
	// Timeout bounds the whole boot up to first-boot-done; 10m by default.
	Timeout time.Duration
	// Stdin, if non-nil, is copied to the serial console (interactive use).
	Stdin io.Reader
}

// Result is what the guest's agent reported about its first boot.
type Result struct {
	// Agent is "cloud-init" or "ignition".
	Agent string
	// OK is true when the agent finished without reporting errors.
	OK bool
	// Errors are the errors the agent reported.
	Errors []string
	// Elapsed is the time from Start to first-boot-done.
	Elapsed time.Duration
	// ConsoleTail holds the last lines of the serial console.
	ConsoleTail string
	// Err is set when the agent never reported (timeout, QEMU exited).
	Err error
}

// Guest is a running QEMU process started by Start.
type Guest struct{}

var errNotImplemented = errors.New("run: not implemented yet")

// Start builds the seed (in a temporary directory removed by Stop or Wait),
// starts QEMU and returns at once.
func Start(ctx context.Context, o Options) (*Guest, error) {
	return nil, errNotImplemented
}

// WaitFirstBoot returns when the agent reports its first boot finished
// (cloud-init's "Cloud-init v. ... finished at"; Ignition's completion),
// with its result, or on timeout or QEMU exit (Result.Err set and
// Result.ConsoleTail holding the last console lines). The Result is never
// nil; the error is Result.Err: an agent that finished with errors is a
// Result with OK false and a nil error.
func (g *Guest) WaitFirstBoot(ctx context.Context) (*Result, error) {
	return nil, errNotImplemented
}

// Wait waits for QEMU to exit (the guest powered itself off) or for ctx,
// and returns QEMU's exit status. It removes the temporary files.
func (g *Guest) Wait(ctx context.Context) error {
	return errNotImplemented
}

// Stop asks the guest to power off (ACPI through QMP), kills QEMU after a
// grace period and removes the temporary files.
func (g *Guest) Stop() error {
	return errNotImplemented
}

// Console returns the serial console so far (bounded: the last 4 MiB).
func (g *Guest) Console() []byte {
	return nil
}
