package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudbaseinit"
	"github.com/vminit/vminit/cloudconfig"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/lib/inputfile"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// convertFlags are `vminit convert`'s flags.
type convertFlags struct {
	to, variant, version string
	in                   inputFlags
	out                  outputFlags
	allowPartial         bool
}

func newConvertCommand() *cobra.Command {
	var f convertFlags
	cmd := &cobra.Command{
		Use:   "convert USER-DATA|OBJECTS... --to spec|ignition",
		Short: "Convert cloud-init user data, or a platform's VM, to an instance spec or to Ignition",
		Long: `Convert reads cloud-init user data, a #cloud-config document (users,
ssh_authorized_keys, hostname, fqdn, write_files with any encoding, runcmd,
bootcmd, mounts, timezone, packages, ssh_pwauth) or a #! script (run once on
first boot), and writes the same configuration:

  --to spec: a vminit instance spec. Keys the spec has no field for stay
  cloud-config in spec.cloudInit.userData, and user data of other kinds
  (#include, boothooks, MIME) is kept whole there: nothing is lost, and
  'vminit build' gives cloud-init guests the same configuration.

  --to ignition: an Ignition config. Ignition guests run no cloud-init, so
  every key without an Ignition equivalent is an error naming it;
  --allow-partial makes those warnings. Nothing is dropped silently.

Given an Ignition config (spec 2.x or 3.x, e.g. config.ign), --to spec
writes a spec for Ignition guests that carries it (spec.ignition.config,
merged into what the spec renders) and --to ignition the config at spec 3.

Given a KubeVirt VirtualMachine, VirtualMachineInstance or VirtualMachinePool,
a Virtlet Pod, an oVirt vm (XML or JSON) or a Cluster API KubeadmConfig,
KubeadmConfigTemplate or KubeadmControlPlane(Template) (--machine NAME; with
the Secrets and ConfigMaps it refers to, in the same files, --objects files or
the cluster of --kubeconfig), --to spec prints the vminit spec the object
means: building that spec gives the same bytes as building the object.
Windows user data that only cloudbase-init runs (#ps1, #ps1_sysnative,
#ps1_x86, rem cmd, EC2's <powershell> or <script> tags) becomes, --to spec,
a spec for cloudbase-init guests (spec.agent: cloudbase-init) carrying it
as its user data.

A file that does not start as user data does (#cloud-config, #!,
#include..., MIME, the Windows formats above) is read as such objects: another kind, or broken YAML, is
an error naming it, never user data that cloud-init would ignore.`,
		Example: `  vminit convert user-data --to spec -o instance.yaml
  vminit convert user-data --to ignition -o config.ign
  vminit convert config.ign --to spec -o instance.yaml
  curl -s http://169.254.169.254/latest/user-data | vminit convert - --to spec
  vminit convert vm.yaml secrets.yaml --to spec -o instance.yaml`,
		Args: minArgs(1, "a USER-DATA file (- for standard input), or files of platform objects"),
		RunE: f.run,
	}
	cmd.Flags().StringVar(&f.to, "to", "ignition", "spec or ignition")
	f.out.register(cmd, "output file (default: standard output)")
	f.in.register(cmd)
	cmd.Flags().StringVar(&f.variant, "variant", "", "--to ignition: the Ignition guest, fcos (default), rhcos or flatcar")
	cmd.Flags().StringVar(&f.version, "ignition-version", "", "--to ignition: force the Ignition spec version")
	cmd.Flags().BoolVar(&f.allowPartial, "allow-partial", false, "--to ignition: report keys without an Ignition equivalent as warnings instead of errors")
	cmd.RegisterFlagCompletionFunc("to", cobra.FixedCompletions([]string{"spec", "ignition"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("variant", cobra.FixedCompletions(variantNames, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// run checks the flags and converts either platform objects or one user
// data file.
func (f *convertFlags) run(cmd *cobra.Command, args []string) error {
	opts := cloudconfig.Options{Name: f.in.name, AllowPartial: f.allowPartial}
	switch f.to {
	case "spec":
		opts.For = cloudconfig.ForSpec
	case "ignition":
		opts.For = cloudconfig.ForIgnition
	default:
		return usagef("--to=%q: want spec or ignition", f.to)
	}
	if f.variant != "" && !contains(variantNames, f.variant) {
		return usagef("--variant=%q: want fcos, rhcos or flatcar", f.variant)
	}
	perm, err := f.out.perm()
	if err != nil {
		return err
	}
	if f.in.isObjects(cmd, args) {
		return convertObjects(cmd, &f.in, args, f.to, f.out.path, perm, f.ignitionOptions())
	}
	if len(args) > 1 {
		return usagef("want one USER-DATA file, got %d arguments", len(args))
	}
	if err := userDataUnconcerned(cmd, args[0]); err != nil {
		return err
	}
	var data []byte
	if args[0] == "-" {
		data, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), cloudconfig.MaxSize+1))
	} else {
		data, err = inputfile.Read(args[0], cloudconfig.MaxSize)
	}
	if err != nil {
		return err
	}
	result, err := f.convertUserData(cmd, args[0], data, opts)
	if err != nil {
		return err
	}
	path := f.out.path
	if path == "" {
		path = "-"
	}
	return writeFile(cmd, path, perm, func(w io.Writer) error { _, err := w.Write(result); return err })
}

// userDataUnconcerned refuses the platforms' flags given for the user data
// read from name, which they concern none of; --name names the instance
// converted.
func userDataUnconcerned(cmd *cobra.Command, name string) error {
	given := slices.DeleteFunc(scopedGiven(cmd), func(f string) bool { return f == "--name" })
	if problems := platform.Unconcerned(given, nil, []string{name + " (cloud-init user data)"}); len(problems) > 0 {
		return usagef("%s", strings.Join(problems, "\n"))
	}
	return nil
}

// convertIgnition converts an Ignition config: --to spec gives a spec for
// Ignition guests that carries it (spec.ignition.config, merged into what
// the spec renders), --to ignition the config at spec 3 (a 2.x config
// translated, as Ignition does at boot).
func (f *convertFlags) convertIgnition(name string, data []byte, instName string) ([]byte, error) {
	up, _, err := ignition.Upgrade(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if f.to == "ignition" {
		return up, nil
	}
	inst := carrier(instName, spec.AgentIgnition)
	inst.Spec.Ignition.Config = string(data)
	return yaml.Marshal(inst)
}

// carrier is the spec for an agent that --to spec writes around data it
// carries whole, named instName (else "instance").
func carrier(instName, agent string) *spec.Instance {
	if instName == "" {
		instName = "instance"
	}
	inst := &spec.Instance{APIVersion: spec.APIVersion, Kind: spec.Kind}
	inst.Metadata.Name = instName
	inst.Spec.Agent = agent
	return inst
}

// convertWindows converts user data only cloudbase-init runs (#ps1,
// rem cmd, EC2's <powershell> or <script>): --to spec gives a spec for
// cloudbase-init guests that carries it whole, as the user data; an
// Ignition guest cannot run it.
func (f *convertFlags) convertWindows(name string, data []byte, instName string) ([]byte, error) {
	fm, _ := cloudbaseinit.Classify(data)
	if f.to == "ignition" {
		return nil, fmt.Errorf("%s: a %s script is Windows user data, which cloudbase-init runs (%s); an Ignition guest cannot: convert it --to spec (spec.agent: cloudbase-init)", name, fm.Header, fm.Executor)
	}
	inst := carrier(instName, spec.AgentCloudbaseInit)
	inst.Spec.CloudInit.UserData = string(data)
	return yaml.Marshal(inst)
}

func (f *convertFlags) ignitionOptions() ignition.Options {
	return ignition.Options{Variant: ignition.Variant(f.variant), Version: f.version, AllowPartial: f.allowPartial}
}

// convertUserData converts the user data read from name to a spec or an
// Ignition config, and prints the warnings of both steps.
func (f *convertFlags) convertUserData(cmd *cobra.Command, name string, data []byte, opts cloudconfig.Options) ([]byte, error) {
	if isIgnitionConfig(data) {
		return f.convertIgnition(name, data, opts.Name)
	}
	if isWindowsUserData(data) {
		return f.convertWindows(name, data, opts.Name)
	}
	inst, warnings, err := cloudconfig.ToSpec(data, opts)
	for _, w := range warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s\n", w)
	}
	if err != nil {
		withFile(err, name)
		return nil, err
	}
	if f.to == "spec" {
		return yaml.Marshal(inst)
	}
	res, err := ignition.Render(inst, f.ignitionOptions())
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %s\n", w)
	}
	return res.Config, nil
}
