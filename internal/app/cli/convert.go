package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudconfig"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/lib/atomicfile"
)

func newConvertCommand() *cobra.Command {
	var (
		to, out, variant, version, name string
		allowPartial                    bool
		obj                             objectFlags
	)
	cmd := &cobra.Command{
		Use:   "convert USER-DATA|OBJECTS... --to ignition|spec",
		Short: "Convert a #cloud-config document, or a platform's VM, to Ignition or to an instance spec",
		Long: `Convert reads a #cloud-config document (users, ssh_authorized_keys, hostname,
fqdn, write_files with any encoding, runcmd, bootcmd, mounts, timezone,
ssh_pwauth) and writes the same configuration as an Ignition config or as a
vminit instance spec. Every key it cannot carry over is an error naming the
key; --allow-partial makes those warnings. Nothing is dropped silently.

Given a KubeVirt VirtualMachine, VirtualMachineInstance or VirtualMachinePool,
a Virtlet Pod, an oVirt vm (XML or JSON) or a Cluster API KubeadmConfig (with
the Secrets and ConfigMaps it refers to, in the same files, --objects files or
the cluster of --kubeconfig), --to spec prints the vminit spec the object
means: building that spec gives the same bytes as building the object.`,
		Example: `  vminit convert user-data --to ignition -o config.ign
  vminit convert user-data --to spec -o instance.yaml
  vminit convert vm.yaml --to spec -o instance.yaml`,
		Args: minArgs(1, "a USER-DATA file (- for standard input), or files of platform objects"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to != "ignition" && to != "spec" {
				return usagef("--to=%q: want ignition or spec", to)
			}
			if isObjects(args) {
				return convertObjects(cmd, &obj, args, to, out, ignition.Options{Variant: ignition.Variant(variant), Version: version, AllowPartial: allowPartial})
			}
			if len(args) > 1 {
				return usagef("want one USER-DATA file, got %d arguments", len(args))
			}
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), cloudconfig.MaxSize+1))
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return err
			}
			inst, warnings, err := cloudconfig.ToSpec(data, cloudconfig.Options{Name: name, AllowPartial: allowPartial})
			for _, w := range warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s\n", w)
			}
			if err != nil {
				withFile(err, args[0])
				return err
			}
			var result []byte
			if to == "spec" {
				if result, err = yaml.Marshal(inst); err != nil {
					return err
				}
			} else {
				res, err := ignition.Render(inst, ignition.Options{Variant: ignition.Variant(variant), Version: version, AllowPartial: allowPartial})
				if err != nil {
					return err
				}
				for _, w := range res.Warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s\n", w)
				}
				result = res.Config
			}
			if out == "" || out == "-" {
				_, err := cmd.OutOrStdout().Write(result)
				return err
			}
			return atomicfile.Write(out, 0o600, func(w io.Writer) error { _, err := w.Write(result); return err })
		},
	}
	obj.register(cmd)
	cmd.Flags().StringVar(&to, "to", "ignition", "ignition or spec")
	cmd.Flags().StringVarP(&out, "output", "o", "", "output file (default standard output)")
	cmd.Flags().StringVar(&variant, "variant", "fcos", "Ignition guest: fcos, rhcos or flatcar")
	cmd.Flags().StringVar(&version, "ignition-version", "", "force the Ignition spec version")
	cmd.Flags().StringVar(&name, "name", "", "the instance name when the document has no hostname")
	cmd.Flags().BoolVar(&allowPartial, "allow-partial", false, "report keys that cannot be carried over as warnings instead of errors")
	cmd.RegisterFlagCompletionFunc("to", cobra.FixedCompletions([]string{"ignition", "spec"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
