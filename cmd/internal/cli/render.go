package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// ignitionFileName is what render calls the Ignition config in its
// directory.
const ignitionFileName = "config.ign"

func newRenderCommand() *cobra.Command {
	var (
		in         inputFlags
		tf         targetFlags
		out        outputFlags
		legacy     string
		knownHosts bool
	)
	cmd := &cobra.Command{
		Use:   "render SPEC -o DIR",
		Short: "Write the files a guest gets to a directory, without an image",
		Long: `Render writes the files a seed image would hold (user-data, meta-data,
network-config, vendor-data; or the openstack/latest tree for ConfigDrive), or
for an Ignition spec its config as config.ign, to DIR, which must not exist
or be empty. Use it to review what a VM will get, or to serve the files with
another tool. The same checks as build run first.

With --known-hosts it writes nothing and prints the known_hosts lines of the
spec's spec.sshHostKeys instead (its host name, FQDN and metadata server
addresses, then each public key), for ~/.ssh/known_hosts before the VM first
boots.`,
		Example: `  vminit render examples/ubuntu-server/instance.yaml -o seed/
  vminit render instance.yaml -o cd/ --datasource configdrive
  vminit render examples/fcos-server.yaml -o ign/
  vminit render instance.yaml --known-hosts >> ~/.ssh/known_hosts`,
		Args: minArgs(1, "a SPEC file (- for standard input), or files of platform objects"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if knownHosts {
				return printKnownHosts(cmd, &in, args)
			}
			if out.path == "" {
				out.path = legacy
			}
			if out.path == "" {
				return usagef("-o DIR is required")
			}
			perm, err := out.perm()
			if err != nil {
				return err
			}
			t, err := tf.target()
			if err != nil {
				return err
			}
			si, err := in.loadOne(cmd, args)
			if err != nil {
				return err
			}
			var files *seed.Seed
			switch {
			case si.inst == nil: // a Windows VM's sysprep disc
				files = si.result.Sysprep
			default:
				t.LenientSchema = true
				rep := render.Instance(si.inst, t)
				printWarnings(cmd, si, rep.Warnings)
				if !rep.OK() {
					return si.locate(rep.Errors)
				}
				files = rep.Seed
				if agentOf(si.inst, t) == spec.AgentIgnition {
					files = &seed.Seed{Files: []seed.File{{Path: ignitionFileName, Data: rep.Ignition.Config}}}
				}
			}
			if err := writeDir(out.path, perm, func(r *os.Root) error { return files.WriteRoot(r, perm) }); err != nil {
				return err
			}
			for _, f := range files.Files {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%d bytes\n", filepath.Join(out.path, filepath.FromSlash(f.Path)), len(f.Data))
			}
			return nil
		},
	}
	in.register(cmd)
	tf.register(cmd)
	out.register(cmd, "directory to write the files into (must not exist, or be empty)")
	cmd.Flags().BoolVar(&knownHosts, "known-hosts", false, "print the known_hosts lines of spec.sshHostKeys instead of writing files")
	cmd.Flags().StringVar(&legacy, "out", "", "directory to write the files into (deprecated: use -o)")
	cmd.Flags().MarkHidden("out")
	return cmd
}

// printKnownHosts prints the known_hosts lines of the spec's host keys.
func printKnownHosts(cmd *cobra.Command, in *inputFlags, args []string) error {
	si, err := in.loadOne(cmd, args)
	if err != nil {
		return err
	}
	var lines []string
	if si.inst != nil {
		lines = si.inst.KnownHosts()
	}
	if len(lines) == 0 {
		return si.locate(spec.Errors{{Field: "spec.sshHostKeys", Message: "no host keys: --known-hosts prints the public halves of the keys given there"}})
	}
	for _, l := range lines {
		fmt.Fprintln(cmd.OutOrStdout(), l)
	}
	return nil
}
