// Package run boots a virtual machine under QEMU with its first-boot data
// (a cloud-init seed or an Ignition config) built from an instance spec,
// and follows the guest's serial console until its agent reports that the
// first boot finished. It is the engine of `vminit run`.
//
// The disk image is never modified: a qcow2 overlay backed by it is booted.
// The seed is built in a private temporary directory that Stop and Wait
// remove; one left by a run that was killed (SIGKILL) is removed by the
// next Start.
package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/internal/lib/qemu"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/spec"
)

// Options describes one guest to boot.
type Options struct {
	// Instance is the decoded and validated spec (the caller reads the file).
	Instance *spec.Instance
	// Image is the disk image. It is never modified: a qcow2 overlay
	// backed by it (qemu-img create -b) is booted.
	Image string
	// ImageFormat is Image's format, qcow2 or raw; empty means probed
	// from its first bytes (a raw disk a guest wrote a qcow2 header into
	// is then read as qcow2: give raw for such a disk).
	ImageFormat string
	// AllowBackingFiles lets Image (and the images below it) name backing
	// files and data files, local regular files in a qcow2 or raw chain
	// only: QEMU opens them, and the guest reads them (a data file, it
	// also writes). By default such an
	// image is refused; a protocol (nbd://, http://...) is refused always.
	AllowBackingFiles bool
	// Overlay, if set, is where the overlay is created when absent; it is
	// kept, so a second Start on the same Overlay is a second boot of the
	// same disk (an existing one is used only when its sole dependency is
	// Image). Empty means a temporary overlay, removed by Stop/Wait.
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
	// Outbound lets the guest connect out through QEMU's user network:
	// to the network the host reaches and to the host itself, whose
	// loopback services it then reaches too (QEMU's host address, 10.0.2.2,
	// or 169.254.169.2 with Serve, is the host's 127.0.0.1). Off (restrict=on), the guest reaches only its metadata
	// relay and answers only on SSHPort.
	Outbound bool
	// Datasource selects the delivery: for cloud-init "nocloud" (default)
	// or "configdrive"; for Ignition "fwcfg" (default) or "configdrive".
	Datasource string
	// Media is the seed drive's filesystem: "iso" (default) or "vfat".
	Media string
	// Serve answers the guest from an in-process metadata server instead
	// of a seed drive, reached at 169.254.169.254:80 over its user-mode
	// network through a relay only this guest reaches (relay.go).
	Serve bool
	// Dialect is the metadata API served with Serve, one of the agent's
	// Dialects (cloud-init: ec2, openstack, nocloud; Ignition: aws,
	// openstack); default from the spec, else the agent's first.
	Dialect string
	// StallAfter is how long the served guest's first boot may stay
	// silent before Guest.FirstBoot reads it as stalled (Serve only);
	// default firstboot.DefaultStallAfter.
	StallAfter time.Duration
	// ReportWait bounds the wait, after the console said the agent
	// finished, for the served guest's first-boot report (Serve only);
	// default DefaultReportWait.
	ReportWait time.Duration
	// NICs is the number of extra user-mode NICs beyond the first (for
	// bonds); their MACs come from the spec when it names them.
	NICs int
	// Disks are extra virtio disks, in order, at most MaxDisks: each a
	// size ("10GiB", "512MiB"), a sparse raw file in the run's temporary
	// directory, or a file attached as it is (qcow2 or raw), which the
	// guest writes. The guest sees them as /dev/disk/by-id/virtio-vminit-
	// disk1, -disk2… (firstDiskSlot).
	Disks []string
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
	// Errors are the errors the agent reported: for cloud-init, what its
	// own status counts (modules and stages that failed), ERROR and
	// CRITICAL log lines, failed units, no datasource; for Ignition, its
	// failures and failed stage units; for both, a kernel panic.
	Errors []string
	// Warnings are the agent's other warnings (cloud-init's WARNING lines
	// that are not failures); they do not make OK false.
	Warnings []string
	// Panic, when the guest's kernel panicked, is its reason ("VFS:
	// Unable to mount root fs ..."): the boot ended there, whatever the
	// agent had done (Errors holds it too).
	Panic string
	// Elapsed is the time from Start to first-boot-done.
	Elapsed time.Duration
	// ConsoleTail holds the last lines of the serial console.
	ConsoleTail string
	// FirstBoot is the first boot as the in-process metadata server saw
	// it (Serve only; nil otherwise): the guest's fetches, the events its
	// agent posted and its final report (firstboot.go), with its stage,
	// module and failures made printable. A boot the server saw fail makes
	// OK false and adds its failures to Errors.
	FirstBoot *firstboot.Status
	// Err is set when the agent never reported (timeout, QEMU exited).
	Err error
}

// Guest is a running QEMU process started by Start.
type Guest struct {
	c       *config
	cmd     *exec.Cmd
	dir     string // the temporary directory (seed, overlay, QMP and relay sockets)
	qmp     string
	relay   *relay // the guest's metadata server (Serve)
	start   time.Time
	console ring
	stderr  ring // QEMU's own messages

	progressMu sync.Mutex

	mu      sync.Mutex
	watch   *watcher
	agentCh chan struct{} // closed when the watcher has its verdict
	result  *Result

	readDone chan struct{} // the console reader has seen the end
	exited   chan struct{} // QEMU has exited; exitErr is its status
	exitErr  error

	cleanOnce sync.Once
	stopOnce  sync.Once
	stopErr   error
}

// stopGrace is how long Stop waits for the guest to power off after the
// ACPI power button before it kills QEMU.
var stopGrace = 30 * time.Second

// Start builds the seed (in a temporary directory removed by Stop or Wait,
// or when QEMU exits), starts QEMU and returns at once. When ctx is
// cancelled the guest is stopped as by Stop.
func Start(ctx context.Context, o Options) (*Guest, error) {
	c, err := configure(o)
	if err != nil {
		return nil, err
	}
	var f files
	if f.qemu, err = qemu.Find(qemu.System); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	img, err := c.checkInputs(ctx)
	if err != nil {
		return nil, err
	}
	if c.accel, err = qemu.Accel(f.qemu, c.Accel); err != nil {
		return nil, fmt.Errorf("run: --accel kvm: %w", err)
	}
	rep, err := c.render()
	if err != nil {
		return nil, err
	}
	g := &Guest{c: c, console: ring{max: MaxConsole}, stderr: ring{max: 64 << 10},
		agentCh: make(chan struct{}), readDone: make(chan struct{}), exited: make(chan struct{})}
	if g.dir, err = makeRunDir(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			g.cleanup()
		}
	}()
	if img != nil {
		f.disk, f.diskFormat = c.Overlay, qemu.QCOW2
		if f.disk == "" {
			f.disk = filepath.Join(g.dir, "overlay.qcow2")
		}
		if err := overlay(ctx, img, c.Image, f.disk); err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
	}
	if f.extra, err = c.prepareDisks(ctx, g.dir); err != nil {
		return nil, err
	}
	if err := c.writeDelivery(rep, g.dir, &f); err != nil {
		return nil, fmt.Errorf("run: writing the seed: %w", err)
	}
	if c.Serve {
		f.relay = relaySocket(g.dir)
		if g.relay, err = startRelay(c.servedInstance(), f.relay, c.tracker()); err != nil {
			return nil, fmt.Errorf("run: metadata server: %w", err)
		}
	}
	f.qmp = filepath.Join(g.dir, "qmp.sock")
	g.qmp = f.qmp
	if err := g.launch(f.qemu, c.args(f)); err != nil {
		return nil, err
	}
	ok = true
	g.say("QEMU started: %s, %s, %d CPUs, %s", c.agent, g.delivery(), c.CPUs, accelName(c.accel))
	go func() {
		select {
		case <-ctx.Done():
			g.Stop()
		case <-g.exited:
		}
	}()
	return g, nil
}

// delivery describes how the guest gets its data, for the progress line.
func (g *Guest) delivery() string {
	c := g.c
	switch {
	case c.Serve:
		return fmt.Sprintf("metadata server (%s) at %s through its relay", c.dialect, metadataAddr)
	case c.datasource == DatasourceFwCfg:
		return "fw_cfg"
	}
	return c.datasource + " " + string(c.media)
}

func accelName(a []string) string {
	if len(a) > 1 && a[1] == "kvm" {
		return "KVM"
	}
	return "TCG (software emulation)"
}

// launch starts QEMU with the console on pipes and the goroutines that
// read it, feed it and wait for QEMU.
func (g *Guest) launch(program string, args []string) error {
	cmd := exec.Command(program, args...)
	cmd.Dir = g.dir
	cmd.Stderr = &g.stderr
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	g.start = time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run: starting QEMU: %w", err)
	}
	g.cmd = cmd
	g.watch = &watcher{agent: g.c.agent, say: g.say}
	if g.c.Stdin != nil {
		go func() {
			io.Copy(stdin, g.c.Stdin)
		}()
	}
	go g.read(stdout)
	go func() {
		<-g.readDone
		err := cmd.Wait()
		stdin.Close()
		g.mu.Lock()
		g.exitErr = err
		g.mu.Unlock()
		close(g.exited)
		g.cleanup()
	}()
	return nil
}

// read copies the console to the ring buffer, Options.Console and the
// watcher until QEMU closes it.
func (g *Guest) read(r io.Reader) {
	defer close(g.readDone)
	lines := &lineSplitter{fn: g.line}
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			b := buf[:n]
			g.console.Write(b)
			if g.c.Console != nil {
				g.c.Console.Write(b)
			}
			lines.Write(b)
		}
		if err != nil {
			lines.flush()
			return
		}
	}
}

// line hands a console line to the watcher and records its verdict.
func (g *Guest) line(l string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.result != nil {
		return
	}
	g.watch.line(l)
	if g.watch.done {
		w := g.watch
		g.result = w.result(g.c.agent, time.Since(g.start))
		close(g.agentCh)
	}
}

// say writes a progress line, with the time since QEMU started.
func (g *Guest) say(format string, a ...any) {
	if g.c.Progress == nil {
		return
	}
	g.progressMu.Lock()
	defer g.progressMu.Unlock()
	var el time.Duration
	if !g.start.IsZero() {
		el = time.Since(g.start)
	}
	fmt.Fprintf(g.c.Progress, "[%6.1fs] %s\n", el.Seconds(), fmt.Sprintf(format, a...))
}

// runDirPrefix names the runs' temporary directories.
const runDirPrefix = "vminit-run-"

// makeRunDir creates the run's private (0700) temporary directory with a
// pid file naming this process, after removing the directories of runs
// that were killed without cleaning up (SIGKILL cannot be caught; QEMU
// dies with vminit, Pdeathsig, but the seed stays).
func makeRunDir() (string, error) {
	reapRunDirs()
	dir, err := os.MkdirTemp("", runDirPrefix)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// reapRunDirs removes the run directories of this user whose pid file
// names a process that is gone. A directory without a pid file is being
// created, or is not a run's: it is left alone, as is one whose pid file
// is no regular file (anyone can make a vminit-run-* directory in /tmp,
// and a FIFO there would block every run at start).
func reapRunDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), runDirPrefix+"*"))
	for _, d := range dirs {
		st, err := os.Lstat(d)
		if err != nil || !st.IsDir() {
			continue
		}
		b, err := inputfile.Read(filepath.Join(d, "pid"), 32)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(string(b)); err == nil && leftByDeadRun(st, pid) {
			os.RemoveAll(d)
		}
	}
}

// ErrTimeout and ErrExited are the Result.Err of a guest whose agent never
// reported (wrapped with the details).
var (
	ErrTimeout = errors.New("the guest's agent did not report its first boot in time")
	ErrExited  = errors.New("QEMU exited before the guest's agent reported its first boot")
)

// consoleTailLines is how much of the console a Result carries.
const consoleTailLines = 20

// WaitFirstBoot returns when the agent reports its first boot finished
// (cloud-init's "Cloud-init v. ... finished at"; Ignition's completion),
// with its result, or on timeout or QEMU exit (Result.Err set and
// Result.ConsoleTail holding the last console lines). With Serve it then
// waits for the guest's first-boot report to reach the metadata server
// and adds what the server saw (Result.FirstBoot, firstboot.go). The
// Result is never nil; the error is Result.Err: an agent that finished
// with errors is a Result with OK false and a nil error.
func (g *Guest) WaitFirstBoot(ctx context.Context) (*Result, error) {
	timer := time.NewTimer(time.Until(g.start.Add(g.c.Timeout)))
	defer timer.Stop()
	var err error
	select {
	case <-g.agentCh:
	case <-g.exited:
		// The console may hold the agent's last words: the reader has
		// drained it before exited is closed.
		select {
		case <-g.agentCh:
		default:
			err = fmt.Errorf("%w (%s)%s", ErrExited, g.exitStatus(), g.qemuSaid())
		}
	case <-timer.C:
		err = fmt.Errorf("%w: no report after %v%s%s", ErrTimeout, g.c.Timeout, g.stage(), g.serverSaw())
	case <-ctx.Done():
		err = ctx.Err()
	}
	res := &Result{Agent: g.c.agent, Elapsed: time.Since(g.start)}
	if err == nil {
		g.mu.Lock()
		r := *g.result
		g.mu.Unlock()
		res = &r
	}
	res.Err = err
	g.addFirstBoot(ctx, res)
	res.ConsoleTail = tail(g.console.Bytes(), consoleTailLines)
	return res, err
}

// stage says how far the boot got, for a timeout's message.
func (g *Guest) stage() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.watch
	switch {
	case w.started && w.stage != "":
		return fmt.Sprintf(" (%s was at stage %s)", g.c.agent, w.stage)
	case w.started:
		return fmt.Sprintf(" (%s had started)", g.c.agent)
	case w.kernel:
		return fmt.Sprintf(" (the kernel booted; %s never started)", g.c.agent)
	case len(g.console.Bytes()) == 0:
		return " (the guest printed nothing on its serial console ttyS0: is console=ttyS0 on its kernel command line?)"
	}
	return ""
}

func (g *Guest) exitStatus() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exitErr == nil {
		return "the guest powered off"
	}
	return g.exitErr.Error()
}

// qemuSaid is QEMU's own error output, for messages.
func (g *Guest) qemuSaid() string {
	if s := strings.TrimSpace(string(g.stderr.Bytes())); s != "" {
		return "\nqemu: " + tail([]byte(s), 10)
	}
	return ""
}

// Wait waits for QEMU to exit (the guest powered itself off) or for ctx,
// and returns QEMU's exit status. The temporary files are removed when
// QEMU exits.
func (g *Guest) Wait(ctx context.Context) error {
	select {
	case <-g.exited:
		g.cleanup()
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.exitErr != nil {
			return fmt.Errorf("qemu: %w%s", g.exitErr, g.qemuSaid())
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop asks the guest to power off (ACPI through QMP), kills QEMU after
// stopGrace and removes the temporary files. It may be called more than
// once and from several goroutines; all wait for the same stop.
func (g *Guest) Stop() error {
	g.stopOnce.Do(func() {
		select {
		case <-g.exited:
		default:
			g.mu.Lock()
			panicked := g.watch.panic != ""
			g.mu.Unlock()
			if panicked {
				g.say("stopping QEMU (the guest's kernel panicked)")
				g.kill()
				break
			}
			g.say("stopping the guest (ACPI power button)")
			if err := powerdown(g.qmp); err != nil {
				g.say("QMP: %v; stopping QEMU", err)
				g.kill()
			}
			select {
			case <-g.exited:
			case <-time.After(stopGrace):
				g.say("the guest did not power off in %v; stopping QEMU", stopGrace)
				g.kill()
			}
		}
		g.cleanup()
	})
	return g.stopErr
}

// Kill ends QEMU at once, without asking the guest (QMP quit, which
// flushes the disk images; else SIGKILL), and removes the temporary files.
// A Stop waiting for the guest returns too.
func (g *Guest) Kill() error {
	select {
	case <-g.exited:
	default:
		g.say("stopping QEMU now")
		g.kill()
	}
	g.cleanup()
	return g.stopErr
}

// kill ends QEMU: quit through QMP (images flushed), else SIGKILL.
func (g *Guest) kill() {
	if quit(g.qmp) == nil {
		select {
		case <-g.exited:
			return
		case <-time.After(10 * time.Second):
		}
	}
	g.cmd.Process.Kill()
	<-g.exited
}

// cleanup closes the metadata server and removes the temporary
// directory (a kept Overlay is outside it).
func (g *Guest) cleanup() {
	g.cleanOnce.Do(func() {
		if g.relay != nil {
			g.relay.Close()
		}
		if err := os.RemoveAll(g.dir); err != nil {
			g.stopErr = err
		}
	})
}

// Console returns the serial console so far (bounded: the last MaxConsole
// bytes).
func (g *Guest) Console() []byte {
	return g.console.Bytes()
}
