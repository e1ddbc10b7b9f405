// Package cli implements the vminit command line: cobra commands that load
// a spec, call the library packages and write outputs atomically. It holds
// no rendering or media logic of its own, so everything the CLI does is
// available to library users too.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/spec"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitInvalid = 1 // invalid input (every problem listed) or a failed build
	ExitUsage   = 2 // bad flags or arguments
)

// usageError marks an error in how the command was called.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// Main runs vminit with args (without the program name) and returns the
// process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return execute(args, os.Stdin, stdout, stderr)
}

// execute is Main with its standard input given.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return executeCommand(NewRootCommand(), args, stdin, stdout, stderr)
}

// executeCommand runs root with args and returns the process exit code:
// a usage error is ExitUsage, any other ExitInvalid.
func executeCommand(root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ue usageError
	// cobra reports an unknown subcommand as a plain error.
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintf(stderr, "%s: %v\nRun '%[1]s --help' for usage.\n", root.Name(), err)
		return ExitUsage
	}
	var ee exitError
	if errors.As(err, &ee) {
		printError(stderr, root.Name(), ee.error)
		return ee.code
	}
	var reported alreadyReported
	if !errors.As(err, &reported) {
		printError(stderr, root.Name(), err)
	}
	return ExitInvalid
}

// exitError is an error with an exit code of its own (`instances status
// --wait`: ExitStillGoing).
type exitError struct {
	code int
	error
}

// alreadyReported is returned by commands that printed their problems
// themselves (for example as JSON) and only need the exit code.
type alreadyReported struct{ error }

func printError(w io.Writer, program string, err error) {
	if es := spec.AsErrors(err); len(es) > 1 {
		fmt.Fprintf(w, "%s: %d problems:\n", program, len(es))
		for _, e := range es {
			fmt.Fprintf(w, "  %v\n", e)
		}
		return
	}
	fmt.Fprintf(w, "%s: %v\n", program, err)
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
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
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
