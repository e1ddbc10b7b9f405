package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionString describes this binary from its build information: the
// module version (a tag for go install …@vX, "(devel)" for a build from a
// clone), the VCS revision and time it was built from, whether the tree
// had uncommitted changes, and the Go version.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "vminit (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	out := "vminit " + v
	if rev != "" {
		out += fmt.Sprintf(" (%s, %s%s)", rev, when, dirty)
	}
	return out + " " + bi.GoVersion
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print vminit's version, VCS revision and Go version",
		Example: "  vminit version\n  vminit --version",
		Args:    exactArgs(0, "no arguments"),
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), versionString())
		},
	}
}
