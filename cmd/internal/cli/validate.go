package cli

import (
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/spec"
)

// validateReport is validate's --json document.
type validateReport struct {
	Valid    bool               `json:"valid"`
	Errors   []*spec.FieldError `json:"errors"`
	Warnings []*spec.FieldError `json:"warnings"`
}

func newValidateCommand() *cobra.Command {
	var (
		in     inputFlags
		tf     targetFlags
		report reportFlags
	)
	cmd := &cobra.Command{
		Use:   "validate SPEC",
		Short: "Run every check on a spec and what it renders to, listing every problem",
		Long: `Validate runs every check that any output of the spec would run, and lists
every problem at once, each with its field path and line:

  - the spec itself, decoded strictly (unknown fields, types, values);
  - the output for the spec's agent, rendered: the cloud-init seed for
    --datasource (network formats included), or the Ignition config for the
    spec's variant (or --variant), within --transport's size budget if named;
  - the user's own Ignition config or Butane in spec.ignition, whatever the
    agent;
  - the user's #cloud-config (spec.cloudInit.userData, vendorData) against
    cloud-init's own schema: errors fail, deprecations warn;
  - spec fields that the user's cloud-config replaces when cloud-init merges
    the two (packages: [make] in user-data drops spec.packages): warnings.

Given files of platform objects, it checks every VM they hold (--object
NAME or KIND/NAME: one).

--kubernetes checks the spec as a cluster reads an Instance object (kubectl
apply -f FILE): the guest is identified by the address its VMI reports, so
spec.metadataServer may set its options (imdsv2, tokenHopLimit, ...)
without addresses, which a directory, etcd or admin-API server requires.
The document is the same either way, which is why it takes a flag.

--strict makes every warning an error. It exits 0 when the spec is valid and
1 when it is not.`,
		Example: `  vminit validate instance.yaml
  vminit validate instance.yaml --datasource configdrive --json
  vminit validate examples/fcos-server.yaml --variant flatcar --transport ec2
  vminit validate instance.yaml --strict
  vminit validate --kubernetes examples/kubevirt-instance.yaml`,
		Args: minArgs(1, "a SPEC file (- for standard input), or files of platform objects"),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := report.json()
			if err != nil {
				return err
			}
			reps, err := runValidate(cmd, &in, &tf, args)
			if _, usage := err.(usageError); usage {
				return err
			}
			if !asJSON {
				for _, rep := range reps {
					printWarnings(cmd, rep.in, rep.Warnings)
				}
				if err != nil {
					return err
				}
				for _, rep := range reps {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (%s)\n", rep.in.name, rep.what)
				}
				return nil
			}
			return writeValidateJSON(cmd, reps, err, args[0])
		},
	}
	in.register(cmd)
	cmd.Flags().BoolVar(&in.identifiedByPlatform, "kubernetes", false, "check the spec as a Kubernetes Instance, whose guest its VMI identifies: spec.metadataServer without addresses is valid")
	tf.register(cmd)
	report.register(cmd)
	return cmd
}

// writeValidateJSON writes validate's --json report: the warnings of reps
// and err, the problems that failed validation (an error that is not about
// content is reported against first, the first input). err is then
// already reported.
func writeValidateJSON(cmd *cobra.Command, reps []*validated, err error, first string) error {
	out := validateReport{Valid: err == nil, Errors: []*spec.FieldError{}, Warnings: []*spec.FieldError{}}
	for _, rep := range reps {
		out.Warnings = append(out.Warnings, rep.in.locate(rep.Warnings)...)
	}
	if err != nil {
		es := spec.AsErrors(err)
		if es == nil { // not a content problem: an I/O error
			es = spec.Errors{{File: first, Message: err.Error()}}
		}
		out.Errors = es
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	if encErr := enc.Encode(out); encErr != nil {
		return encErr
	}
	if err != nil {
		return alreadyReported{Err: err}
	}
	return nil
}

// validated is what validate found in a spec that loaded.
type validated struct {
	*render.Result
	in   *specInput
	what string // what was checked, for the text report
}

// runValidate validates every VM of the files (--object's alone), and
// returns the reports of all and the problems of each.
func runValidate(cmd *cobra.Command, in *inputFlags, tf *targetFlags, paths []string) ([]*validated, error) {
	t, err := tf.target()
	if err != nil {
		return nil, err
	}
	all, err := in.loadSome(cmd, paths)
	if err != nil {
		return nil, err
	}
	var reps []*validated
	var errs spec.Errors
	for _, si := range all {
		rep, err := validateOne(si, t)
		reps = append(reps, rep)
		errs = append(errs, spec.AsErrors(err)...)
	}
	if len(errs) > 0 {
		return reps, errs
	}
	return reps, nil
}

// validateOne runs every check on one VM.
func validateOne(si *specInput, t render.Target) (*validated, error) {
	if si.inst == nil {
		return &validated{Result: &render.Result{}, in: si, what: "a sysprep answer-file disc, " + fmt.Sprint(len(si.result.Sysprep.Files)) + " files"}, nil
	}
	rep := &validated{Result: render.Instance(si.inst, t), in: si}
	switch {
	case rep.Seed != nil:
		agent := cmp.Or(t.Agent, si.inst.Spec.Agent)
		if agent != spec.AgentCloudbaseInit {
			agent = spec.AgentCloudInit
		}
		rep.what = fmt.Sprintf("%s: %s seed, %d files", agent, rep.Seed.Datasource, len(rep.Seed.Files))
	case rep.Ignition != nil:
		rep.what = fmt.Sprintf("Ignition %s, %d bytes", rep.Ignition.Version, len(rep.Ignition.Config))
		if t.Transport != "" {
			rep.what += ", within the " + t.Transport + " budget"
		}
	}
	if !rep.OK() {
		return rep, si.locate(rep.Errors)
	}
	return rep, nil
}

// reportFlags choose how a command prints its report: text, or JSON with
// --json. The older spelling, --output json (-o json), is kept hidden.
type reportFlags struct {
	asJSON bool
	legacy string
}

func (f *reportFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVarP(&f.legacy, "output", "o", "", "report format: text or json (deprecated: use --json)")
	cmd.Flags().MarkHidden("output")
}

func (f *reportFlags) json() (bool, error) {
	switch f.legacy {
	case "":
		return f.asJSON, nil
	case "json":
		return true, nil
	case "text":
		return f.asJSON, nil
	}
	return false, usagef("--output=%q: want text or json (or use --json)", f.legacy)
}
