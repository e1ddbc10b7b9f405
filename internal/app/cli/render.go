package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/internal/lib/atomicfile"
	"github.com/vminit/vminit/media"
)

func newRenderCommand() *cobra.Command {
	var (
		sf  seedFlags
		out string
	)
	cmd := &cobra.Command{
		Use:   "render SPEC --out DIR",
		Short: "Write the seed's files to a directory, without an image",
		Long: `Render writes the files a seed image would hold (user-data, meta-data,
network-config, vendor-data; or the openstack/latest tree for ConfigDrive) to
DIR, which must not exist or be empty. Use it to review what a VM will get,
or to serve the files with another tool.`,
		Example: `  vminit render examples/ubuntu-server/instance.yaml --out seed/
  vminit render instance.yaml --out cd/ --datasource configdrive`,
		Args: minArgs(1, "a SPEC file, or files of platform objects"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("--out DIR is required")
			}
			_, s, err := sf.load(cmd, args)
			if err != nil {
				return err
			}
			if err := atomicfile.WriteDir(out, func(dir string) error { return media.WriteDir(dir, s) }); err != nil {
				return err
			}
			for _, f := range s.Files {
				fmt.Fprintf(cmd.OutOrStdout(), "%s/%s\t%d bytes\n", out, f.Path, len(f.Data))
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&out, "out", "", "directory to write the files into")
	return cmd
}
