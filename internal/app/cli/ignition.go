package cli

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/lib/atomicfile"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// ignitionFlags are build's flags for --format ignition.
type ignitionFlags struct {
	variant, version      string
	allowPartial, strict  bool
	transport, publishURL string
	publishOut            string
	headers               []string
}

func (f *ignitionFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.variant, "variant", "fcos", "Ignition guest: fcos, rhcos or flatcar (decides how network settings are written)")
	fl.StringVar(&f.version, "ignition-version", "", "force the Ignition spec version, e.g. 3.4.0 (default: the lowest that expresses the config)")
	fl.BoolVar(&f.allowPartial, "allow-partial", false, "drop spec features Ignition cannot express (packages, groups the image keeps outside /etc/group) with a warning instead of failing; cloud-init data is always only a warning")
	fl.BoolVar(&f.strict, "strict", false, "treat warnings from spec.ignition config and Butane as errors")
	fl.StringVar(&f.transport, "transport", "", "check the config against a transport's size budget: "+transportNames())
	fl.StringVar(&f.publishURL, "publish-url", "", "with --transport: when the config is too large, emit a pointer config fetching it from this URL")
	fl.StringVar(&f.publishOut, "publish-out", "", "with --publish-url: where to write the full config to upload there")
	fl.StringArrayVar(&f.headers, "publish-header", nil, "with --publish-url: an HTTP header for the fetch, Name: value (repeatable)")
	cmd.RegisterFlagCompletionFunc("variant", cobra.FixedCompletions([]string{"fcos", "rhcos", "flatcar"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("ignition-version", cobra.FixedCompletions(ignition.Versions(), cobra.ShellCompDirectiveNoFileComp))
}

func transportNames() string {
	var names []string
	for _, t := range delivery.Transports {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// build renders the Ignition config and writes it, fitted to the
// transport, as a file or on a config drive.
func (f *ignitionFlags) build(cmd *cobra.Command, l *loaded, out, datasource, fsys, ts string) error {
	switch f.variant {
	case "fcos", "rhcos", "flatcar":
	default:
		return usagef("--variant=%q: want fcos, rhcos or flatcar", f.variant)
	}
	if f.publishURL != "" && f.publishOut == "" {
		return usagef("--publish-url needs --publish-out FILE for the full config")
	}
	inst := l.inst
	variant := f.variant
	if !cmd.Flags().Changed("variant") && inst.Spec.Ignition.Variant != "" {
		variant = inst.Spec.Ignition.Variant
	}
	res, err := ignition.Render(inst, ignition.Options{Variant: ignition.Variant(variant), Version: f.version, AllowPartial: f.allowPartial, Strict: f.strict})
	if err != nil {
		if l.result == nil {
			withFile(err, l.path)
		}
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s\n", w)
	}
	config := res.Config
	if f.transport != "" {
		t, err := delivery.LookupTransport(f.transport)
		if err != nil {
			return usageError{err}
		}
		headers := http.Header{}
		for _, h := range f.headers {
			k, v, ok := strings.Cut(h, ":")
			if !ok {
				return usagef("--publish-header=%q: want Name: value", h)
			}
			headers.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		payload, publish, err := delivery.Fit(config, t, f.publishURL, headers)
		if err != nil {
			return err
		}
		if publish != nil {
			if err := atomicfile.Write(f.publishOut, 0o600, func(w io.Writer) error { _, err := w.Write(publish); return err }); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "vminit: the config (%d bytes) exceeds %s; upload %s to %s\n", len(publish), t.Source, f.publishOut, f.publishURL)
		}
		config = payload
	}
	format := media.FormatFor(out)
	if fsys != "" {
		if format, err = media.ParseFormat(fsys); err != nil {
			return usageError{err}
		}
	}
	if strings.HasSuffix(out, ".ign") || strings.HasSuffix(out, ".json") || out == "-" {
		if out == "-" {
			_, err := cmd.OutOrStdout().Write(config)
			return err
		}
		// Only root should read it on the host: it may carry password hashes.
		if err := atomicfile.Write(out, 0o600, func(w io.Writer) error { _, err := w.Write(config); return err }); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: Ignition %s, %d bytes\nQEMU: %s\n", out, res.Version, len(config), strings.Join(delivery.QEMUArgs(out), " "))
		return nil
	}
	// A config drive carrying the config, for Ignition's openstack,
	// kubevirt, proxmoxve and ibmcloud platforms.
	ds, err := parseDatasource(datasource)
	if err != nil {
		return err
	}
	var s *seed.Seed
	if ds == seed.ConfigDrive {
		if s, err = delivery.ConfigDrive(config, inst.Spec.InstanceID, inst.Spec.Hostname); err != nil {
			return err
		}
	} else {
		s = delivery.NoCloud(config, inst.Spec.InstanceID, inst.Spec.Hostname)
	}
	mtime, err := timestamp(ts)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(out, 0o644, func(w io.Writer) error { return media.Write(w, s, format, media.Options{ModTime: mtime}) }); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: Ignition %s on a %s %s seed (label %s)\n", out, res.Version, ds, format, s.Label)
	return nil
}

func withFile(err error, path string) {
	for _, e := range spec.AsErrors(err) {
		e.File = path
	}
}

func newDeliverCommand() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "deliver CONFIG --to qemu|qemu-disk|libvirt|libvirt-qemu|guestinfo",
		Short: "Print how to hand an Ignition config to a hypervisor",
		Long: `Deliver prints the arguments or configuration snippet that passes an
Ignition config file to a guest: QEMU fw_cfg (qemu), a virtio disk for
s390x and ppc64le (qemu-disk), libvirt's <sysinfo type='fwcfg'> (libvirt,
libvirt 6.5+) or <qemu:commandline> (libvirt-qemu), or VMware guestinfo
.vmx lines, gzip+base64 (guestinfo).`,
		Args: exactArgs(1, "one CONFIG file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			switch to {
			case "qemu":
				fmt.Fprintln(w, shellJoin(delivery.QEMUArgs(args[0])))
			case "qemu-disk":
				fmt.Fprintln(w, shellJoin(delivery.QEMUDiskArgs(args[0])))
			case "libvirt":
				fmt.Fprint(w, delivery.LibvirtSysinfo(args[0]))
			case "libvirt-qemu":
				fmt.Fprint(w, delivery.LibvirtQEMUCommandline(args[0]))
			case "guestinfo":
				config, err := os.ReadFile(args[0])
				if err != nil {
					return err
				}
				fmt.Fprint(w, delivery.GuestinfoVMX(config))
			default:
				return usagef("--to=%q: want qemu, qemu-disk, libvirt, libvirt-qemu or guestinfo", to)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "qemu", "qemu, qemu-disk, libvirt, libvirt-qemu or guestinfo")
	cmd.RegisterFlagCompletionFunc("to", cobra.FixedCompletions([]string{"qemu", "qemu-disk", "libvirt", "libvirt-qemu", "guestinfo"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = spec.ShellQuote(a)
	}
	return strings.Join(q, " ")
}
