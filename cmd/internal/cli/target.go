package cli

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// targetFlags choose the output a command renders or checks: build,
// render and validate share them, so validate checks what build makes.
type targetFlags struct {
	format          string
	datasource      string
	networkVersion  int
	variant         string
	ignitionVersion string
	allowPartial    bool
	strict          bool
	transport       string
	reportTo        string
}

// formats maps --format values to the agent they render for.
var formats = map[string]string{"seed": spec.AgentCloudInit, "cloud-init": spec.AgentCloudInit, "ignition": spec.AgentIgnition, "cloudbase-init": spec.AgentCloudbaseInit}

func (f *targetFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "", "what to make: seed (cloud-init), ignition, or cloudbase-init (a seed for Windows) (default: the spec's agent)")
	fl.StringVar(&f.datasource, "datasource", "", "seed layout: "+datasourceNames()+" (default: the spec's datasource, else nocloud); with Ignition, the config drive that carries the config")
	fl.IntVar(&f.networkVersion, "network-config-version", 2, "NoCloud network-config format: 2 (netplan) or 1")
	fl.StringVar(&f.variant, "variant", "", "Ignition guest: fcos, rhcos or flatcar (default: the spec's ignition.variant, else fcos)")
	fl.StringVar(&f.ignitionVersion, "ignition-version", "", "force the Ignition spec version, e.g. 3.4.0 (default: the spec's ignition.version, else the lowest that expresses the config)")
	fl.BoolVar(&f.allowPartial, "allow-partial", false, "drop spec features Ignition cannot express (packages, groups the image keeps outside /etc/group) with a warning instead of failing")
	fl.BoolVar(&f.strict, "strict", false, "treat every warning as an error (unused Ignition or Butane keys, spec fields the user-data replaces, cloud-config the schema rejects)")
	fl.StringVar(&f.transport, "transport", "", "check the Ignition config, or the cloud-init user data with its first-boot report, against a transport's size budget: "+transportNames())
	fl.StringVar(&f.reportTo, "report-to", "", "have the guest report its first boot to the vminit server at this base URL (cloud-init's reporting webhook and a final report; Ignition's completion unit), e.g. http://192.0.2.1:8080")
	cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"seed", "ignition", "cloudbase-init"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("datasource", cobra.FixedCompletions(datasourceList(), cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("variant", cobra.FixedCompletions(variantNames, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("ignition-version", cobra.FixedCompletions(ignition.Versions(), cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("transport", cobra.FixedCompletions(transportList(), cobra.ShellCompDirectiveNoFileComp))
}

var variantNames = []string{string(ignition.FCOS), string(ignition.RHCOS), string(ignition.Flatcar)}

// target checks the flags and returns the render.Target they describe.
func (f *targetFlags) target() (render.Target, error) {
	var t render.Target
	if f.format != "" {
		agent, ok := formats[f.format]
		if !ok {
			return t, usagef("--format=%q: want seed, ignition or cloudbase-init", f.format)
		}
		t.Agent = agent
	}
	var ds seed.Datasource
	if f.datasource != "" {
		var err error
		if ds, err = seed.ParseDatasource(f.datasource); err != nil {
			return t, usagef("--datasource=%q: want %s", f.datasource, datasourceNames())
		}
	}
	if f.networkVersion != 1 && f.networkVersion != 2 {
		return t, usagef("--network-config-version=%d: want 1 or 2", f.networkVersion)
	}
	if f.variant != "" && !contains(variantNames, f.variant) {
		return t, usagef("--variant=%q: want fcos, rhcos or flatcar", f.variant)
	}
	if f.ignitionVersion != "" && !contains(ignition.Versions(), f.ignitionVersion) {
		return t, usagef("--ignition-version=%q: want one of %s", f.ignitionVersion, strings.Join(ignition.Versions(), ", "))
	}
	if f.transport != "" {
		if _, err := delivery.LookupTransport(f.transport); err != nil {
			return t, usageError{Err: err}
		}
	}
	if f.reportTo != "" {
		base, err := bootreport.ParseBaseURL(f.reportTo)
		if err != nil {
			return t, usagef("--report-to=%q: %v", f.reportTo, err)
		}
		t.ReportTo = base
	}
	t.Datasource, t.NetworkConfigVersion = ds, f.networkVersion
	t.Variant, t.IgnitionVersion = ignition.Variant(f.variant), f.ignitionVersion
	t.AllowPartial, t.Strict, t.Transport = f.allowPartial, f.strict, f.transport
	return t, nil
}

// agent is the agent the command renders for.
func agentOf(inst *spec.Instance, t render.Target) string {
	if t.Agent != "" {
		return t.Agent
	}
	return inst.Spec.Agent
}

func datasourceList() []string {
	var out []string
	for _, d := range seed.Datasources {
		out = append(out, string(d))
	}
	return out
}

func datasourceNames() string { return strings.Join(datasourceList(), " or ") }

func transportList() []string {
	var out []string
	for _, t := range delivery.Transports {
		out = append(out, t.Name)
	}
	return out
}

func transportNames() string { return strings.Join(transportList(), ", ") }

func contains(list []string, s string) bool { return slices.Contains(list, s) }
