package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	vmrun "github.com/vminit/vminit/cmd/internal/run"
	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/internal/lib/qemu"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/spec"
)

// runFlags are run's flags.
type runFlags struct {
	in         inputFlags
	report     reportFlags
	image      string
	format     string
	allowBack  bool
	overlay    string
	kernel     string
	initrd     string
	appendArgs string
	memory     string
	cpus       int
	sshPort    int
	outbound   bool
	datasource string
	media      string
	serve      bool
	dialect    string
	nics       int
	disks      []string
	accel      string
	console    bool
	timeout    time.Duration
	sshKeys    []string
	powerOff   bool
}

func newRunCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run SPEC --image DISK",
		Short: "Boot a disk image under QEMU with the spec's first-boot data and wait for its agent to finish",
		Long: `Run boots a VM the way a cloud would on its first boot: it builds the spec's
first-boot data for its agent, starts QEMU on a copy-on-write overlay of the
image (the image itself is never written), follows the serial console and
exits when the guest's agent reports its first boot finished, with the
agent's result and errors.

  cloud-init: a NoCloud seed on a CD-ROM by default (--media vfat: a VFAT
  disk; --datasource configdrive: an OpenStack config drive);

  Ignition: the config through QEMU fw_cfg by default (the qemu platform),
  or on a config drive (--datasource configdrive: the openstack platform);

  --serve: no drive; an in-process metadata server answers the guest over
  its user-mode network at 169.254.169.254 (--dialect) through a relay
  only this guest reaches, and the SMBIOS strings make cloud-init pick
  that datasource.

The guest has a user-mode NIC (with the spec's MAC when its network names
one; --nics adds NICs for bonds) and, with --ssh-port, 127.0.0.1:PORT
forwarded to its port 22. It cannot connect out (QEMU's restrict=on: not
to the network, not to the host's loopback services) unless --outbound.
KVM is used when it works here, else software emulation (--accel). --console attaches the serial console to this terminal
and stays attached after the first boot until the guest powers off. Ctrl-C
powers the guest off (ACPI), and stops QEMU if it does not. After the
first boot QEMU is stopped at once, unless --power-off (on with --overlay)
asks for the guest to power off cleanly, which can take 30 s.

The image is refused when it names other files QEMU would open (a qcow2
backing file or data file: the guest would read a host file) unless
--allow-backing-files, and always when it names a protocol (nbd://,
http://...). --image-format raw|qcow2 says what the image is; without it
the format is read from the image's first bytes.

--disk attaches an extra virtio disk, for spec.storage to partition and
format: a SIZE (10GiB) is a new sparse file, a FILE is attached as it is
and the guest writes it. The guest finds them after the image, in order
(/dev/vdb, /dev/vdc…; after the seed with --media vfat), and always as
/dev/disk/by-id/virtio-vminit-disk1, -disk2….

Nothing is left behind: the seed, the overlay and the --disk SIZE files
live in a temporary directory, unless --overlay names an overlay to keep
(a second run on it is a second boot of the same disk). Exits 0 when the agent reported success,
1 when it reported errors or never reported (the last console lines are
shown).`,
		Example: `  vminit run examples/dev-vm.yaml --image debian-12-genericcloud-amd64.qcow2
  vminit run examples/dev-vm.yaml --image debian.qcow2 --ssh-port 2222 --console
  vminit run examples/ubuntu-server/instance.yaml --image ubuntu.img --nics 1 --datasource configdrive
  vminit run examples/dev-vm.yaml --image debian.qcow2 --serve --dialect openstack
  vminit run examples/fcos-server.yaml --image fedora-coreos-qemu.x86_64.qcow2 --memory 4G
  vminit run examples/data-disk.yaml --image debian.qcow2 --disk 10GiB --disk 1GiB
  vminit run instance.yaml --image root.ext4 --kernel vmlinuz --initrd initrd.img \
    --append "root=/dev/vda rw console=ttyS0" --overlay web-1.qcow2 --timeout 5m`,
		Args: exactArgs(1, "one SPEC file (- for standard input)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args)
		},
	}
	f.register(cmd)
	return cmd
}

// register adds run's flags to cmd.
func (f *runFlags) register(cmd *cobra.Command) {
	f.in.registerFiles(cmd)
	f.report.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.image, "image", "", "the disk image to boot (qcow2 or raw; never modified)")
	fl.StringVar(&f.format, "image-format", "", "the disk image's format, qcow2 or raw (default: read from its first bytes; give raw for a raw disk a guest has written to)")
	fl.BoolVar(&f.allowBack, "allow-backing-files", false, "boot an image that names backing files or data files (local regular files in a qcow2 or raw chain only: the guest reads them, and writes a data file)")
	fl.StringVar(&f.overlay, "overlay", "", "keep the copy-on-write overlay in this file (created when absent; default: a temporary one)")
	fl.StringVar(&f.kernel, "kernel", "", "boot this kernel directly (QEMU -kernel)")
	fl.StringVar(&f.initrd, "initrd", "", "with --kernel: its initramfs")
	fl.StringVar(&f.appendArgs, "append", "", "with --kernel: its command line (e.g. root=/dev/vda rw console=ttyS0)")
	fl.StringVar(&f.memory, "memory", vmrun.DefaultMemory, "guest memory, e.g. 2G or 1024M")
	fl.IntVar(&f.cpus, "cpus", vmrun.DefaultCPUs, "virtual CPUs")
	fl.IntVar(&f.sshPort, "ssh-port", 0, "forward 127.0.0.1:PORT to the guest's SSH port 22")
	fl.BoolVar(&f.outbound, "outbound", false, "let the guest connect out through QEMU's user network (to the network, and to the host's loopback services through the host address QEMU gives it); by default it reaches only its metadata relay")
	fl.StringVar(&f.datasource, "datasource", "", "how the data reaches the guest: cloud-init nocloud or configdrive (default: the spec's, else nocloud); Ignition fwcfg or configdrive (default fwcfg)")
	fl.StringVar(&f.media, "media", vmrun.Media[0], "the seed drive: iso (a CD-ROM) or vfat (a virtio disk)")
	fl.BoolVar(&f.serve, "serve", false, "answer the guest from an in-process metadata server over its network instead of a drive")
	ci, ign := vmrun.Dialects()[spec.AgentCloudInit], vmrun.Dialects()[spec.AgentIgnition]
	fl.StringVar(&f.dialect, "dialect", "", "with --serve: cloud-init "+orList(ci)+" (default: the spec's metadataServer.dialects, else "+ci[0]+"); Ignition "+orList(ign)+" (default "+ign[0]+")")
	fl.IntVar(&f.nics, "nics", 0, "extra user-mode NICs beyond the first, e.g. for a bond (the spec's MACs are given to them in order)")
	fl.StringArrayVar(&f.disks, "disk", nil, "attach an extra virtio disk (repeatable, at most 8): a SIZE such as 10GiB (a sparse file removed after the run) or a FILE (raw, or qcow2 checked as --image is; the guest writes it); the guest sees /dev/disk/by-id/virtio-vminit-disk1, -disk2…")
	fl.StringVar(&f.accel, "accel", "auto", "QEMU accelerator: auto (KVM when it works, else TCG), kvm or tcg")
	fl.BoolVar(&f.console, "console", false, "attach the serial console to this terminal; stay attached until the guest powers off")
	fl.DurationVar(&f.timeout, "timeout", vmrun.DefaultTimeout, "give up when the agent has not reported its first boot by then")
	fl.StringArrayVar(&f.sshKeys, "ssh-key", nil, "add the public keys in this file (e.g. ~/.ssh/id_ed25519.pub) to the default user's for this run (repeatable)")
	fl.BoolVar(&f.powerOff, "power-off", false, "after the first boot, power the guest off through ACPI and wait for it (up to 30s) instead of stopping QEMU at once (default: on with --overlay, whose disk is kept)")
	cmd.RegisterFlagCompletionFunc("datasource", cobra.FixedCompletions(runDatasources(), cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("image-format", cobra.FixedCompletions(qemu.Formats, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("media", cobra.FixedCompletions(vmrun.Media, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("accel", cobra.FixedCompletions(qemu.Accelerators, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("dialect", cobra.FixedCompletions(runDialects(), cobra.ShellCompDirectiveNoFileComp))
}

// runDatasources and runDialects are the run package's lists, for both
// agents.
func runDatasources() []string { return union(vmrun.Datasources) }
func runDialects() []string    { return union(vmrun.Dialects()) }

func union(m map[string][]string) []string {
	var out []string
	for _, agent := range []string{spec.AgentCloudInit, spec.AgentIgnition} {
		for _, v := range m[agent] {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// runReport is run's --json document.
type runReport struct {
	Instance    string   `json:"instance"`
	Agent       string   `json:"agent"`
	OK          bool     `json:"ok"`
	Errors      []string `json:"errors"`
	Warnings    []string `json:"warnings"`
	Seconds     float64  `json:"seconds"`
	Panic       string   `json:"panic,omitempty"`
	Error       string   `json:"error,omitempty"`
	ConsoleTail string   `json:"consoleTail,omitempty"`
	// FirstBoot is the first boot as --serve's metadata server saw it.
	FirstBoot *runFirstBoot `json:"firstBoot,omitempty"`
}

// runFirstBoot is the metadata server's view of the boot in run's --json:
// the state as `vminit instances status --json` names it, where the boot
// is or failed, and its failures.
type runFirstBoot struct {
	State  firstboot.State     `json:"state"`
	Stage  string              `json:"stage,omitempty"`
	Module string              `json:"module,omitempty"`
	Errors []firstboot.Failure `json:"errors"`
}

func (f *runFlags) run(cmd *cobra.Command, args []string) error {
	asJSON, err := f.report.json()
	if err != nil {
		return err
	}
	if f.image == "" && f.kernel == "" {
		return usagef("--image DISK is required (or --kernel to boot a kernel directly)")
	}
	if f.console && asJSON {
		return usagef("--console and --json both want standard output: choose one")
	}
	in, err := f.in.loadOne(cmd, args)
	if err != nil {
		return err
	}
	if in.inst == nil {
		return fmt.Errorf("%s: a VM with only a sysprep disc: vminit run boots cloud-init and Ignition guests", in.name)
	}
	if err := addSSHKeys(in.inst, f.sshKeys); err != nil {
		return err
	}
	rep := render.Instance(in.inst, render.Target{LenientSchema: true})
	printWarnings(cmd, in, rep.Warnings)
	if !rep.OK() {
		return in.locate(rep.Errors)
	}
	stderr := cmd.ErrOrStderr()
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	g, err := vmrun.Start(ctx, f.options(cmd, in.inst))
	if err != nil {
		return err
	}
	finished := make(chan struct{})
	defer close(finished) // before stop: the goroutine below sees it first
	go powerOffOnSignal(ctx, cmd, stop, finished, g)
	res, waitErr := g.WaitFirstBoot(ctx)
	if f.console && waitErr == nil {
		printRunResult(stderr, in.inst.Metadata.Name, res)
		fmt.Fprintln(stderr, "vminit: console attached until the guest powers off (Ctrl-C powers it off)")
		if err := g.Wait(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "vminit: %v\n", err)
		}
	}
	if err := stopGuest(g, waitErr == nil && !powerOffAfterBoot(cmd)); err != nil {
		fmt.Fprintf(stderr, "vminit: cleaning up: %v\n", err)
	}
	if asJSON {
		return reportRunJSON(cmd, in.inst.Metadata.Name, res, waitErr)
	}
	if waitErr != nil {
		if errors.Is(waitErr, context.Canceled) {
			return errors.New("interrupted: the guest was stopped")
		}
		return fmt.Errorf("%s: %v\n--- last console lines ---\n%s", in.inst.Metadata.Name, waitErr, res.ConsoleTail)
	}
	if !f.console {
		printRunResult(stderr, in.inst.Metadata.Name, res)
	}
	if !res.OK {
		return alreadyReported{Err: errors.New("the agent reported errors")}
	}
	return nil
}

// addSSHKeys adds the keys of each --ssh-key file to the spec's default
// user's (spec.sshAuthorizedKeys), before the spec is checked: a file
// without a key, or a key the checks refuse, is an error naming the file.
func addSSHKeys(inst *spec.Instance, files []string) error {
	for _, p := range files {
		data, err := inputfile.Read(p, maxInput)
		if err != nil {
			return usagef("--ssh-key: %v", err)
		}
		n := 0
		for l := range strings.Lines(string(data)) {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				inst.Spec.SSHAuthorizedKeys = append(inst.Spec.SSHAuthorizedKeys, l)
				n++
			}
		}
		if n == 0 {
			return usagef("--ssh-key %s: no public key in it (want lines like those of ~/.ssh/id_ed25519.pub)", p)
		}
	}
	return nil
}

// powerOffAfterBoot is --power-off, which defaults to on with --overlay:
// a disk that is kept should be shut down cleanly.
func powerOffAfterBoot(cmd *cobra.Command) bool {
	fl := cmd.Flags()
	if fl.Changed("power-off") {
		on, _ := fl.GetBool("power-off")
		return on
	}
	overlay, _ := fl.GetString("overlay")
	return overlay != ""
}

// stopGuest ends the run: at once (QEMU quits, flushing its images) when
// now, else by the guest's own power-off, which can take half a minute.
func stopGuest(g *vmrun.Guest, now bool) error {
	if now {
		return g.Kill()
	}
	return g.Stop()
}

// options are the run package's options for inst from the flags; progress
// goes to standard error, and with --console the serial console is this
// terminal.
func (f *runFlags) options(cmd *cobra.Command, inst *spec.Instance) vmrun.Options {
	o := vmrun.Options{
		Instance: inst, Image: f.image, ImageFormat: f.format, AllowBackingFiles: f.allowBack, Overlay: f.overlay,
		Kernel: f.kernel, Initrd: f.initrd, Append: f.appendArgs,
		Memory: f.memory, CPUs: f.cpus, SSHPort: f.sshPort, Outbound: f.outbound,
		Datasource: f.datasource, Media: f.media, Serve: f.serve, Dialect: f.dialect,
		NICs: f.nics, Disks: f.disks, Accel: f.accel, Timeout: f.timeout, Progress: cmd.ErrOrStderr(),
	}
	if f.console {
		o.Console, o.Stdin = cmd.OutOrStdout(), cmd.InOrStdin()
	}
	return o
}

// powerOffOnSignal waits for ctx, which the first Ctrl-C (or SIGTERM)
// cancels and whose signal handling stop ends: the guest then powers off
// (the run package's doing, on ctx), and a second signal stops QEMU at
// once. It returns when finished is closed.
func powerOffOnSignal(ctx context.Context, cmd *cobra.Command, stop context.CancelFunc, finished <-chan struct{}, g *vmrun.Guest) {
	select {
	case <-finished:
		return
	case <-ctx.Done():
	}
	again, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	stop()
	if cmd.Context().Err() == nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "vminit: powering the guest off (Ctrl-C again to stop QEMU now)")
	}
	select {
	case <-finished:
	case <-again.Done():
		g.Kill()
	}
}

// reportRunJSON writes run's --json document; a first boot that failed is
// an error already reported there.
func reportRunJSON(cmd *cobra.Command, name string, res *vmrun.Result, waitErr error) error {
	out := runReport{Instance: name, Agent: res.Agent, OK: res.OK && waitErr == nil,
		Errors: append([]string{}, res.Errors...), Warnings: append([]string{}, res.Warnings...), Panic: res.Panic, Seconds: res.Elapsed.Seconds()}
	if waitErr != nil {
		out.Error, out.ConsoleTail = waitErr.Error(), res.ConsoleTail
	}
	if st := res.FirstBoot; st != nil {
		out.FirstBoot = &runFirstBoot{State: st.State, Stage: st.Stage, Module: st.Module, Errors: append([]firstboot.Failure{}, st.Errors...)}
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	if !out.OK {
		return alreadyReported{Err: errors.New("first boot failed")}
	}
	return nil
}

// printRunResult says how the first boot went: the console's verdict,
// then (--serve) the metadata server's.
func printRunResult(w io.Writer, name string, res *vmrun.Result) {
	printConsoleResult(w, name, res)
	if st := res.FirstBoot; st != nil {
		fmt.Fprintf(w, "%s: first boot as the metadata server saw it: %s\n", name, serverFirstBoot(st))
	}
}

// serverFirstBoot is the server's state of a boot, where it is or failed
// and its first error's first line ("failed at modules-final/config-
// scripts-user: …"); the run package made its strings printable.
func serverFirstBoot(st *firstboot.Status) string {
	s := string(st.State)
	switch {
	case len(st.Errors) > 0:
		first, _, _ := strings.Cut(st.FirstError(), "\n")
		s += " at " + first
	case st.Stage != "" && !st.State.Terminal():
		s += " at " + strings.TrimSuffix(st.Stage+"/"+st.Module, "/")
	}
	return s
}

// printConsoleResult says what the agent reported on the console.
func printConsoleResult(w io.Writer, name string, res *vmrun.Result) {
	if res.OK {
		fmt.Fprintf(w, "%s: %s first boot done in %s", name, res.Agent, res.Elapsed.Round(100*time.Millisecond))
		if len(res.Warnings) > 0 {
			fmt.Fprintf(w, " (%d warning(s), above)", len(res.Warnings))
		}
		fmt.Fprintln(w)
		return
	}
	if res.Panic != "" {
		fmt.Fprintf(w, "%s: the guest's kernel panicked after %s: %s\n", name, res.Elapsed.Round(100*time.Millisecond), res.Panic)
		return
	}
	fmt.Fprintf(w, "%s: %s first boot finished in %s with %d error(s):\n", name, res.Agent, res.Elapsed.Round(100*time.Millisecond), len(res.Errors))
	for _, e := range res.Errors {
		// An error the server was told can be a log's tail: its lines
		// are indented under it.
		fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(e, "\n", "\n    "))
	}
}
