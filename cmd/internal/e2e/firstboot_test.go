package e2e

// First-boot status on real guests: each guest is
// served by `vminit run --serve`'s in-process metadata server, whose
// tracker sees the guest's fetches and the events and report its agent
// posts through the relay, as `vminit serve` sees a fleet's. No report of
// the guest's own is needed: once WaitFirstBoot has the server's view the
// guest is stopped.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vminit/vminit/cmd/internal/run"
	"github.com/vminit/vminit/internal/lib/systemd"
	"github.com/vminit/vminit/internal/testing/guesttest"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/spec"
)

// firstBootStallAfter is the stalled guest's StallAfter, far shorter
// than its bootCommands sleep. A loaded TCG guest may be silent that long
// between two modules too: the test waits for a stall in the boot command
// itself, and reads past an earlier one.
const firstBootStallAfter = 10 * time.Second

// servedGuest starts a guest with Serve in a guest slot, and returns it
// with its progress; the slot is freed and QEMU stopped at the test's end.
func servedGuest(t *testing.T, ctx context.Context, o run.Options) (*run.Guest, *testtools.SyncBuffer) {
	t.Helper()
	guestSlots <- struct{}{}
	// The report may come minutes after the console's last word on a
	// loaded machine: the boot's timeout bounds the wait instead.
	o.Serve, o.Memory, o.CPUs, o.Accel, o.Timeout, o.ReportWait = true, "1G", 1, guestAccel(), guestBootTimeout, guestBootTimeout
	progress := &testtools.SyncBuffer{}
	o.Progress = progress
	g, err := run.Start(ctx, o)
	if err != nil {
		<-guestSlots
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Kill()
		<-guestSlots
	})
	return g, progress
}

// firstBoot boots a served guest to the end of its first boot and returns
// run's result, which carries the server's view.
func firstBoot(t *testing.T, o run.Options) *run.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guestBootTimeout)
	defer cancel()
	g, progress := servedGuest(t, ctx, o)
	res, err := g.WaitFirstBoot(ctx)
	if err != nil {
		t.Fatalf("first boot: %v\n%s", err, tail(g.Console(), 60))
	}
	if res.FirstBoot == nil {
		t.Fatal("a served guest's Result has no FirstBoot")
	}
	if !hasEvent(res.FirstBoot, firstboot.KindReport, "") && res.FirstBoot.State != firstboot.Pending {
		t.Errorf("no report reached the server: %q\n%s", res.Warnings, tail(g.Console(), 60))
	}
	t.Logf("%s: the console's verdict after %s; the server's state %s (%s)\n%s", t.Name(), res.Elapsed.Round(100*time.Millisecond),
		res.FirstBoot.State, res.FirstBoot.Elapsed(time.Now()).Round(100*time.Millisecond), progress.String())
	return res
}

// stageNames are the names of a status's stages.
func stageNames(st *firstboot.Status) []string {
	var names []string
	for _, s := range st.Stages {
		names = append(names, s.Name)
	}
	return names
}

// hasEvent reports whether st logged an event of kind whose name is name
// (any name when empty).
func hasEvent(st *firstboot.Status, kind, name string) bool {
	return slices.ContainsFunc(st.Events, func(ev firstboot.Event) bool {
		return ev.Kind == kind && (name == "" || ev.Name == name)
	})
}

// statusText is a status for a failure message.
func statusText(st *firstboot.Status) string {
	var b strings.Builder
	b.WriteString(string(st.State) + " at " + st.Stage + "/" + st.Module + ", stages " + strings.Join(stageNames(st), ",") + "\n")
	for _, f := range st.Errors {
		b.WriteString("  error " + f.Where() + ": " + f.Message + "\n")
	}
	for _, ev := range st.Events {
		b.WriteString("  " + ev.Kind + " " + ev.Name + " " + ev.Result + " " + ev.Dialect + "\n")
	}
	return b.String()
}

// failingSpec is dev-vm with a first-boot command that fails loudly. The
// guest's own report is turned off (withoutGuestReport).
func failingSpec(t *testing.T) *spec.Instance {
	inst := loadGuestSpec(t, devVM)
	inst.Spec.Commands = append(inst.Spec.Commands, spec.Command{Shell: "echo vminit-boom >&2; exit 3"})
	return withoutGuestReport(t, inst)
}

// stallingSpec is dev-vm with a boot command that holds cloud-init's
// init-network stage far longer than the test waits.
func stallingSpec(t *testing.T) *spec.Instance {
	inst := loadGuestSpec(t, devVM)
	inst.Spec.BootCommands = append(inst.Spec.BootCommands, spec.Command{Shell: "sleep 3600"})
	if err := inst.Validate(); err != nil {
		t.Fatal(err)
	}
	return inst
}

// reachableFCOS is fcos-server with its NIC on DHCP: the example's static
// 192.0.2.20/24 is not QEMU's user network, and once the system is up the
// completion unit could not reach the server at 169.254.169.254 (Ignition
// itself fetched from the initramfs, on DHCP). The guest's own report is
// turned off (withoutGuestReport).
func reachableFCOS(t *testing.T) *spec.Instance {
	inst := loadGuestSpec(t, fcosServer)
	nic := inst.Spec.Network.Ethernets["nic0"]
	nic.Addresses, nic.Gateway4, nic.Nameservers, nic.DHCP4 = nil, "", nil, true
	inst.Spec.Network.Ethernets["nic0"] = nic
	return withoutGuestReport(t, inst)
}

// badMountUnit is failingMountSpec's mount whose unit fails to start.
const (
	badMountUnit = "mnt-vminitbad.mount"
	// goneMountUnit mounts goneLabel, which no disk has.
	goneMountUnit = "mnt-vminitgone.mount"
	goneLabel     = "vminit-gone"
	// needsGoneUnit is a service that needs goneMountUnit: its start job
	// fails as a dependency, and it ends inactive, as a oneshot that ran.
	needsGoneUnit = "vminit-needs-gone.service"
)

// failingMountSpec is dev-vm with two spec mounts that fail while
// cloud-init finishes without an error (the runcmd lines that start them
// stop nothing, and a command follows them): one whose unit fails (tmpfs
// refuses its size option), and one of a LABEL no disk has, whose
// device's start times out and whose mount fails only as a dependency,
// which leaves the unit inactive, not failed (seen on this guest,
// 2026-11-29): the report names it as an enabled mount that is not
// active; and a service that needs that mount (Requires=, After=), which
// never starts either, and ends inactive: the report names it from its
// start job's failure in the journal. The device's timeout is cut from
// 90 s to 5 by a drop-in, as fstab's x-systemd.device-timeout does. The
// guest's own report is turned off (withoutGuestReport).
func failingMountSpec(t *testing.T) *spec.Instance {
	inst := loadGuestSpec(t, devVM)
	inst.Spec.Mounts = append(inst.Spec.Mounts,
		spec.Mount{Device: "tmpfs", Path: "/mnt/vminitbad", Type: "tmpfs", Options: []string{"size=vminit-bad"}},
		spec.Mount{Device: "LABEL=" + goneLabel, Path: "/mnt/vminitgone", Type: "ext4"})
	device := goneDeviceUnit()
	enabled := true
	inst.Spec.Units = append(inst.Spec.Units, spec.Unit{Name: device,
		Dropins: []spec.Dropin{{Name: "10-timeout.conf", Content: "[Unit]\nJobRunningTimeoutSec=5s\n"}}},
		spec.Unit{Name: needsGoneUnit, Enabled: &enabled, Content: "[Unit]\nDescription=Needs " + goneMountUnit + "\nRequires=" + goneMountUnit +
			"\nAfter=" + goneMountUnit + "\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n"})
	return withoutGuestReport(t, inst)
}

// goneDeviceUnit is the device unit of goneLabel, which never appears.
func goneDeviceUnit() string {
	return strings.TrimSuffix(systemd.MountUnitName(systemd.MountWhat("LABEL="+goneLabel)), ".mount") + ".device"
}

// withoutGuestReport turns the test guest's own report off: it powers the
// guest off as soon as no start job is left, and the first-boot report
// unit (Type=simple, waiting for the same moment) would lose that race.
func withoutGuestReport(t *testing.T, inst *spec.Instance) *spec.Instance {
	inst.Spec.Units = append(inst.Spec.Units, spec.Unit{Name: "vminit-guest-report.service",
		Dropins: []spec.Dropin{{Name: "10-off.conf", Content: "[Service]\nExecStart=\nExecStart=/bin/true\n"}}})
	if err := inst.Validate(); err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestGuestFirstBoot: the server that fed a guest knows how its first boot
// went. The cloud-init guest reaches done through its own webhook events
// (its stages, each module: checkServedDone, on TestGuestCloudInitPaths'
// served boots) and its final report; a failing first-boot
// command makes it failed, naming the module and carrying the command's
// words; so does a spec mount whose unit fails, cloud-init finishing
// without an error, naming the unit; the Ignition guest reaches done through its config fetch and its
// completion unit's report; a guest silent after its fetch is stalled;
// one that never boots is pending.
func TestGuestFirstBoot(t *testing.T) {
	im := guesttest.Find(t)
	t.Parallel()
	cloudInit := func(inst *spec.Instance, dialect string) run.Options {
		return run.Options{Instance: inst, Dialect: dialect,
			Image: im.CloudInitDisk, Kernel: im.Kernel, Initrd: im.Initrd, Append: guesttest.CloudInitAppend}
	}
	t.Run("CloudInitFails", func(t *testing.T) {
		t.Parallel()
		res := firstBoot(t, cloudInit(failingSpec(t), "nocloud"))
		st := res.FirstBoot
		if res.OK || st.State != firstboot.Failed {
			t.Fatalf("OK %v; want failed:\n%s", res.OK, statusText(st))
		}
		if !slices.ContainsFunc(st.Errors, func(f firstboot.Failure) bool { return f.Module == "config-scripts-user" }) {
			t.Errorf("no failure names config-scripts-user:\n%s", statusText(st))
		}
		if !slices.ContainsFunc(st.Errors, func(f firstboot.Failure) bool { return strings.Contains(f.Message, "vminit-boom") }) {
			t.Errorf("no failure carries the command's vminit-boom:\n%s", statusText(st))
		}
		// The one line every view shows (the CLI, the API's row, the page,
		// the condition) is the command's own words, not cloud-init's
		// "Runparts: 1 failures".
		if first := st.FirstError(); !strings.Contains(first, "vminit-boom") {
			t.Errorf("the first error %q is not the failing command's own line:\n%s", first, statusText(st))
		}
	})
	t.Run("CloudInitUnitFails", func(t *testing.T) {
		t.Parallel()
		res := firstBoot(t, cloudInit(failingMountSpec(t), "nocloud"))
		st := res.FirstBoot
		if st.State != firstboot.Failed {
			t.Fatalf("OK %v; want failed by the mount's unit:\n%s", res.OK, statusText(st))
		}
		if slices.ContainsFunc(st.Errors, func(f firstboot.Failure) bool { return f.Unit == "" }) {
			t.Errorf("cloud-init failed too (the test wants it to finish without an error):\n%s", statusText(st))
		}
		// No other unit: Debian's own enabled mounts and swaps, and its
		// own boot's start jobs, are not taken for failures.
		if slices.ContainsFunc(st.Errors, func(f firstboot.Failure) bool {
			return f.Unit != badMountUnit && f.Unit != goneMountUnit && f.Unit != needsGoneUnit
		}) {
			t.Errorf("failures other than the two mounts' and %s:\n%s", needsGoneUnit, statusText(st))
		}
		// The unit, then mount(8)'s own line, not systemd's nor mount's
		// hint after it.
		if first := st.FirstError(); !strings.HasPrefix(first, badMountUnit+": mount: /mnt/vminitbad: ") {
			t.Errorf("the first error %q is not the mount unit's own line:\n%s", first, statusText(st))
		}
		// The mount that failed as a dependency: named, with its device.
		gone := "enabled but not active once the boot settled: its device " + systemd.MountWhat("LABEL="+goneLabel) + " was not found"
		if !slices.ContainsFunc(st.Errors, func(f firstboot.Failure) bool {
			return f.Unit == goneMountUnit && strings.Contains(f.Message, gone)
		}) {
			t.Errorf("no failure of %s saying %q:\n%s", goneMountUnit, gone, statusText(st))
		}
		// The service that needed it: named, with the mount it needed and
		// the device's timeout before it, from the journal.
		needs := "never started: a unit it needs failed: " + goneMountUnit + " (dependency), after: Timed out waiting for device " + goneDeviceUnit()
		if !slices.ContainsFunc(st.Errors, func(f firstboot.Failure) bool {
			return f.Unit == needsGoneUnit && strings.Contains(f.Message, needs)
		}) {
			t.Errorf("no failure of %s saying %q:\n%s", needsGoneUnit, needs, statusText(st))
		}
	})
	t.Run("IgnitionDone", func(t *testing.T) {
		t.Parallel()
		res := firstBoot(t, run.Options{Instance: reachableFCOS(t), Dialect: "aws",
			Image: im.IgnitionDisk, Kernel: im.Kernel, Initrd: im.IgnitionInitrd, Append: guesttest.IgnitionAppend("aws", true, true)})
		st := res.FirstBoot
		if !res.OK || st.State != firstboot.Done || !hasEvent(st, firstboot.KindFetch, "") || !hasEvent(st, firstboot.KindReport, "ignition") {
			t.Errorf("OK %v, errors %q; want done through the fetch and the report:\n%s", res.OK, res.Errors, statusText(st))
		}
	})
	t.Run("Stalled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), guestBootTimeout)
		defer cancel()
		o := cloudInit(stallingSpec(t), "ec2")
		o.StallAfter = firstBootStallAfter
		g, _ := servedGuest(t, ctx, o)
		// Stalled in the boot command: the server saw the fetch and the
		// module's start, then nothing (a TCG boot can be silent for
		// StallAfter earlier, between two stages).
		st := waitFor(t, ctx, g, "stalled in init-network/config-bootcmd", func(st *firstboot.Status) bool {
			return st.State == firstboot.Stalled && st.Stage == "init-network" && st.Module == "config-bootcmd"
		})
		if st.FirstFetch.IsZero() || !hasEvent(&st, firstboot.KindFetch, "") {
			t.Errorf("stalled without a fetch:\n%s", statusText(&st))
		}
	})
	t.Run("Pending", func(t *testing.T) {
		t.Parallel()
		// The kernel alone, without its initramfs: it cannot mount a
		// root and panics before any fetch.
		res := firstBoot(t, run.Options{Instance: loadGuestSpec(t, devVM), Kernel: im.Kernel, Append: "console=ttyS0 root=/dev/vda1"})
		if res.Panic == "" || res.FirstBoot.State != firstboot.Pending {
			t.Errorf("panic %q, first boot %s; want a panic and pending", res.Panic, statusText(res.FirstBoot))
		}
	})
}

// checkServedDone: the server that fed a cloud-init guest saw its first
// boot done through its own webhook events, from its stages and modules
// (TestGuestCloudInitPaths' served boots; the final report may lose its
// race with the test guest's power-off, and is TestGuestFirstBoot's).
func checkServedDone(t *testing.T, res *run.Result) {
	t.Helper()
	st := res.FirstBoot
	if st == nil {
		t.Fatal("a served guest's Result has no FirstBoot")
	}
	if st.State != firstboot.Done || len(st.Errors) > 0 {
		t.Errorf("the server's first boot: want done:\n%s", statusText(st))
	}
	for _, stage := range []string{"init-network", "modules-config", "modules-final"} {
		if !slices.Contains(stageNames(st), stage) {
			t.Errorf("no stage %s:\n%s", stage, statusText(st))
		}
	}
	if !hasEvent(st, firstboot.KindFinish, "modules-final/config-scripts-user") || !hasEvent(st, firstboot.KindFetch, "") {
		t.Errorf("want the fetch and the module events:\n%s", statusText(st))
	}
}

// waitFor polls the guest's first boot until ok (a stall is read, not
// announced: no change marks it), or fails at ctx's end.
func waitFor(t *testing.T, ctx context.Context, g *run.Guest, what string, ok func(*firstboot.Status) bool) firstboot.Status {
	t.Helper()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		st, _ := g.FirstBoot()
		if ok(&st) {
			return st
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("first boot never %s:\n%s\n%s", what, statusText(&st), tail(g.Console(), 40))
		}
	}
}
