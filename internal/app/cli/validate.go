package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/spec"
)

// validateReport is validate's --output json document.
type validateReport struct {
	Valid  bool               `json:"valid"`
	Errors []*spec.FieldError `json:"errors"`
}

func newValidateCommand() *cobra.Command {
	var (
		sf     seedFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "validate SPEC",
		Short: "Check a spec and what it renders to, listing every problem",
		Long: `Validate decodes the spec strictly, checks every field, and renders the
seed for the chosen datasource, reporting every problem at once with its
field path and line. It exits 0 when the spec is valid and 1 when it is not.`,
		Example: `  vminit validate instance.yaml
  vminit validate instance.yaml --datasource configdrive --output json`,
		Args: minArgs(1, "a SPEC file, or files of platform objects"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return usagef("--output=%q: want text or json", output)
			}
			_, s, err := sf.load(cmd, args)
			if output == "text" {
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (%s seed, %d files)\n", args[0], s.Datasource, len(s.Files))
				return nil
			}
			rep := validateReport{Valid: err == nil, Errors: []*spec.FieldError{}}
			if err != nil {
				es := spec.AsErrors(err)
				if es == nil { // not a content problem: an I/O error
					es = spec.Errors{{File: args[0], Message: err.Error()}}
				}
				rep.Errors = es
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if encErr := enc.Encode(rep); encErr != nil {
				return encErr
			}
			if err != nil {
				return alreadyReported{err}
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "report format: text or json")
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
