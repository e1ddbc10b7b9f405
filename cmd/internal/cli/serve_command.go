package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/cmd/internal/servekit"
)

// otherStoreFlag is the --etcd-* prefix vminit refuses, naming the
// program that takes those flags.
const otherStoreFlag = "unknown flag: --etcd-"

// newServeCommand is `vminit serve`: serve's command (servekit) without the
// etcd store, whose flags it refuses naming vminit-server.
func newServeCommand() *cobra.Command {
	cmd := servekit.NewCommand("serve", nil)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		if strings.HasPrefix(err.Error(), otherStoreFlag) {
			return usagef("%v: the etcd store is served by vminit-server, which takes serve's flags and the --etcd-* flags "+
				"(go install ./cmd/vminit-server; deploy/kubernetes/fleet runs it)", err)
		}
		return usageError{Err: err}
	})
	return cmd
}
