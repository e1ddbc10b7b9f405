// Package servercmd is the vminit-server command (cmd/vminit-server):
// `vminit serve` with one more store, etcd (mdserver/etcdstore, the
// --etcd-* flags). It is a binary of its own, as vminit-controller is,
// because etcd's client (gRPC, protobuf and their registrations) would
// cost every vminit run its start-up, a few milliseconds and megabytes of
// memory, to serve a daemon that starts once (docs/benchmarks.md, "Whole
// process"; docs/design.md). Every other flag is serve's own
// (servekit.NewCommand): the directory and Kubernetes stores work here as
// in `vminit serve`.
package servercmd

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/cmd/internal/cmdkit"
	"github.com/vminit/vminit/cmd/internal/servekit"
)

// Main runs vminit-server with args (without the program name) and
// returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return cmdkit.Run(New(), args, stdout, stderr)
}

// New returns the vminit-server command.
func New() *cobra.Command {
	cmd := servekit.NewCommand("vminit-server", &etcdFlags{})
	cmd.Short = "The metadata server with every store: `vminit serve` and etcd (--etcd-endpoints)"
	cmd.Long = `vminit-server is 'vminit serve' with one more store, etcd (the --etcd-*
flags), for fleets of replicas; vminit itself does not link etcd's client.
Every other flag is serve's, and works as there.

` + cmd.Long
	cmd.Version = cmdkit.Version()
	cmd.SetVersionTemplate("{{.Version}}\n") // as `vminit --version` prints it
	return cmd
}
