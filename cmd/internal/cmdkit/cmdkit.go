// Package cmdkit is what vminit's programs (vminit, vminit-server,
// vminit-controller, vminit-node) share to be commands: exit codes, usage
// errors and how a command's error becomes its exit code (Execute, Run),
// the version, the logger --log-format names, client-go's log, the
// cluster flags and the check of the files flags name.
//
// It imports no command (not vminit's CLI, cmd/internal/cli, nor serve's,
// cmd/internal/servekit) and no store or server: a program links the kit
// and what its job uses, not vminit's CLI (cmd/vminit's
// TestLeanGraph holds each program to its own set).
package cmdkit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/spec"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitInvalid = 1 // invalid input (every problem listed) or a failed build
	ExitUsage   = 2 // bad flags or arguments
)

// UsageError marks an error in how the command was called (ExitUsage).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is an error in how the command was called (ExitUsage).
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// ExitError is an error with an exit code of its own (`instances status
// --wait`'s "still going").
type ExitError struct {
	Code int
	Err  error
}

func (e ExitError) Error() string { return e.Err.Error() }
func (e ExitError) Unwrap() error { return e.Err }

// Reported is returned by commands that printed their problems
// themselves (for example as JSON) and only need the exit code
// (ExitInvalid).
type Reported struct{ Err error }

func (e Reported) Error() string { return e.Err.Error() }
func (e Reported) Unwrap() error { return e.Err }

// Run runs a program's root command with args (without the program name)
// and returns the process exit code: no usage printed on an error, a
// flag error is a usage error.
func Run(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageError{err} })
	return Execute(root, args, os.Stdin, stdout, stderr)
}

// Execute runs root with args and returns the process exit code: a usage
// error is ExitUsage, an ExitError its code, any other ExitInvalid.
func Execute(root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ue UsageError
	// cobra reports an unknown subcommand as a plain error.
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintf(stderr, "%s: %v\nRun '%[1]s --help' for usage.\n", root.Name(), err)
		return ExitUsage
	}
	var ee ExitError
	if errors.As(err, &ee) {
		printError(stderr, root.Name(), ee.Err)
		return ee.Code
	}
	var reported Reported
	if !errors.As(err, &reported) {
		printError(stderr, root.Name(), err)
	}
	return ExitInvalid
}

// printError prints err, one line per problem when it lists several
// (spec.Errors).
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
