// Package cli implements the vminit command line: cobra commands that load
// a spec, call the library packages and write outputs atomically. It holds
// no rendering or media logic of its own, so everything the CLI does is
// available to library users too.
package cli

import (
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/cmd/internal/cmdkit"
)

// Main runs vminit with args (without the program name) and returns the
// process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return execute(args, os.Stdin, stdout, stderr)
}

// execute is Main with its standard input given.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cmdkit.Execute(NewRootCommand(), args, stdin, stdout, stderr)
}

// NewRootCommand returns the vminit command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "vminit",
		Short: "First-boot configuration for virtual machines: cloud-init seeds, Ignition configs, a metadata server",
		Long: `vminit turns one instance spec (hostname, users and SSH keys, files, systemd
units, mounts, first-boot commands, network) into the first-boot data of a
virtual machine, for either guest agent:

  cloud-init (Ubuntu, Debian, RHEL, most cloud images): NoCloud and ConfigDrive
  seeds, as ISO9660 or VFAT images written in-process, byte-reproducible and
  4 KiB aligned;

  Ignition (Fedora CoreOS, RHCOS, Flatcar): a config for QEMU fw_cfg, libvirt,
  VMware guestinfo or a config drive, within each transport's size budget;

and serves the same data over the network from a metadata server speaking
EC2 (IMDSv1/v2), OpenStack, NoCloud-net and Ignition. Everything is checked
before boot against the real consumers' rules.

Start with 'vminit build SPEC -o seed.iso'; the spec is described in
docs/spec.md and examples/.`,
		Example: `  vminit validate examples/ubuntu-server/instance.yaml
  vminit build examples/ubuntu-server/instance.yaml -o seed.iso
  vminit build examples/fcos-server.yaml -o config.ign && vminit deliver config.ign --to qemu
  vminit serve --instances /var/lib/vminit/instances --listen 169.254.169.254:80`,
		Version:       cmdkit.Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{Err: err} })
	root.AddCommand(newBuildCommand(), newRenderCommand(), newValidateCommand(), newInspectCommand(), newDeliverCommand(),
		newConvertCommand(), newRunCommand(), newServeCommand(), newInstancesCommand(), newControllerCommand(), newVersionCommand())
	return root
}

// exactArgs is cobra.ExactArgs with the usage exit code.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %s, got %d arguments", what, len(args))
		}
		return nil
	}
}

// timestamp resolves the one timestamp of an output: the --timestamp flag,
// else $SOURCE_DATE_EPOCH, else the Unix epoch, never the clock.
func timestamp(flag string) (time.Time, error) {
	v, from := flag, "--timestamp"
	if v == "" {
		v, from = os.Getenv("SOURCE_DATE_EPOCH"), "SOURCE_DATE_EPOCH"
	}
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(secs, 0).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, usagef("%s=%q: want Unix seconds or an RFC 3339 time", from, v)
}
