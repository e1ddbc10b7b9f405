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
	root := NewRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ue usageError
	// cobra reports an unknown subcommand as a plain error.
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintf(stderr, "vminit: %v\nRun 'vminit --help' for usage.\n", err)
		return ExitUsage
	}
	var reported alreadyReported
	if !errors.As(err, &reported) {
		printError(stderr, err)
	}
	return ExitInvalid
}

// alreadyReported is returned by commands that printed their problems
// themselves (for example as JSON) and only need the exit code.
type alreadyReported struct{ error }

func printError(w io.Writer, err error) {
	if es := spec.AsErrors(err); len(es) > 1 {
		fmt.Fprintf(w, "vminit: %d problems:\n", len(es))
		for _, e := range es {
			fmt.Fprintf(w, "  %v\n", e)
		}
		return
	}
	fmt.Fprintf(w, "vminit: %v\n", err)
}

// NewRootCommand returns the vminit command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "vminit",
		Short: "Build first-boot configuration for virtual machines",
		Long: `vminit turns one instance spec into the first-boot data of a virtual machine:
cloud-init seeds (NoCloud and ConfigDrive, as ISO9660 or VFAT images) written
in-process, byte-reproducible, and checked before boot.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newBuildCommand(), newRenderCommand(), newValidateCommand(), newInspectCommand(), newDeliverCommand(), newConvertCommand(), newServeCommand(), newInstancesCommand())
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
