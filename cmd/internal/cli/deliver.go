package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/spec"
)

// deliverTargets are deliver's --to values.
var deliverTargets = []string{"qemu", "qemu-disk", "libvirt", "libvirt-qemu", "guestinfo"}

func newDeliverCommand() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "deliver CONFIG --to qemu|qemu-disk|libvirt|libvirt-qemu|guestinfo",
		Short: "Print how to hand an Ignition config to a hypervisor",
		Long: `Deliver checks that CONFIG is an Ignition config (spec 3.x configs with
Ignition's own validator) and prints the arguments or configuration snippet
that passes it to a guest: QEMU fw_cfg (qemu), a virtio disk for s390x and
ppc64le (qemu-disk), libvirt's <sysinfo type='fwcfg'> (libvirt, libvirt 6.5+)
or <qemu:commandline> (libvirt-qemu), or VMware guestinfo .vmx lines,
gzip+base64 (guestinfo). Paths are printed absolute, so the output works from
any directory.`,
		Example: `  vminit build examples/fcos-server.yaml -o config.ign
  vminit deliver config.ign --to qemu
  vminit deliver config.ign --to libvirt
  vminit deliver config.ign --to guestinfo >> vm.vmx`,
		Args: exactArgs(1, "one CONFIG file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !contains(deliverTargets, to) {
				return usagef("--to=%q: want %s", to, strings.Join(deliverTargets, ", "))
			}
			config, err := inputfile.Read(args[0], spec.MaxSpecSize)
			if err != nil {
				return err
			}
			if _, err := delivery.CheckConfig(config); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch to {
			case "qemu":
				fmt.Fprintln(w, shellJoin(delivery.QEMUArgs(path)))
			case "qemu-disk":
				fmt.Fprintln(w, shellJoin(delivery.QEMUDiskArgs(path)))
			case "libvirt":
				fmt.Fprint(w, delivery.LibvirtSysinfo(path))
			case "libvirt-qemu":
				fmt.Fprint(w, delivery.LibvirtQEMUCommandline(path))
			case "guestinfo":
				fmt.Fprint(w, delivery.GuestinfoVMX(config))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "qemu", strings.Join(deliverTargets, ", "))
	cmd.RegisterFlagCompletionFunc("to", cobra.FixedCompletions(deliverTargets, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = spec.ShellQuote(a)
	}
	return strings.Join(q, " ")
}
