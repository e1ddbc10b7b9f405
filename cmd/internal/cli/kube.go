package cli

import (
	"github.com/spf13/cobra"
)

// newControllerCommand is where `vminit controller` was: the controller is
// the binary vminit-controller now, so that vminit links no typed
// clientset. The command stays, hidden, to say so to old scripts and
// manifests; it does not run the controller, which would link it again.
func newControllerCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "controller",
		Short:              "Moved: the controller is the vminit-controller binary",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return usagef("the controller is a binary of its own now: run vminit-controller with the same flags " +
				"(go install ./cmd/vminit-controller; deploy/kubernetes/components/controller runs it)")
		},
	}
}
