package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/cmd/internal/cmdkit"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print vminit's version, VCS revision and Go version",
		Example: "  vminit version\n  vminit --version",
		Args:    exactArgs(0, "no arguments"),
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), cmdkit.Version())
		},
	}
}
