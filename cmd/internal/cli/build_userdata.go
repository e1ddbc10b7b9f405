package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// localdsMetaData is the meta-data cloud-localds writes when it is given
// none (cloud-image-utils 0.33): an instance-id, as JSON.
const localdsMetaData = "{\n\"instance-id\": \"iid-local01\"\n}\n"

// userDataFlags are build's flags for a raw user-data input.
type userDataFlags struct {
	networkConfig string // --network-config
	vendorData    string // --vendor-data
}

func (f *userDataFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.networkConfig, "network-config", "", "with a USER-DATA file (as cloud-localds -N): the NoCloud network-config file to put on the seed")
	fl.StringVar(&f.vendorData, "vendor-data", "", "with a USER-DATA file (as cloud-localds -V): the vendor-data file to put on the seed")
}

// specOnlyFlags are build's flags that concern a spec's rendering, which
// a raw user-data seed does not have: given with one, they would do
// nothing.
var specOnlyFlags = []string{"format", "datasource", "network-config-version", "variant", "ignition-version",
	"allow-partial", "transport", "report-to", "publish-url", "publish-out", "publish-header", "sysprep-out", "object", "objects"}

// readUserData reads build's first input and returns it when it is
// cloud-init user data (#cloud-config, a script, MIME: isUserData) rather
// than a spec or platform objects, nil otherwise. Standard input, once
// read, is given back to the spec loader.
func (f *buildFlags) readUserData(cmd *cobra.Command, path string) ([]byte, error) {
	data, err := f.in.read(cmd, path)
	if err != nil {
		return nil, err
	}
	if path == "-" {
		cmd.SetIn(bytes.NewReader(data))
	}
	if !isUserData(data) {
		return nil, nil
	}
	return data, nil
}

// buildUserData builds a NoCloud seed from cloud-localds's input: the
// user data as given, the meta-data file (default: cloud-localds's own,
// an instance-id) and --network-config and --vendor-data, each checked
// as cloud-init reads it (seed.Check: its warnings, what cloud-init
// ignores, are build's too) and a #cloud-config against cloud-init's
// schema (warnings, as build's; --strict: errors). Nothing
// is written when a check fails.
func (f *buildFlags) buildUserData(cmd *cobra.Command, paths []string, userData []byte, opts media.Options, perm fs.FileMode) error {
	if len(paths) > 2 {
		return usagef("%s is cloud-init user data: want USER-DATA [META-DATA] (as cloud-localds), got %d files", paths[0], len(paths))
	}
	var given []string
	for _, name := range specOnlyFlags {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			given = append(given, "--"+name)
		}
	}
	if len(given) > 0 {
		return usagef("%s is cloud-init user data, built as given onto a NoCloud seed: %s concern a spec (vminit convert %s --to spec -o instance.yaml makes one)",
			paths[0], strings.Join(given, ", "), paths[0])
	}
	format, err := f.mediaFormat(f.out.path, false)
	if err == nil {
		err = checkTarget(f.out.path, format == media.Dir)
	}
	if err != nil {
		return err
	}
	// names are the seed's files by where they came from, for messages.
	names := map[string]string{"user-data": paths[0], "meta-data": "meta-data (cloud-localds's default)"}
	s := &seed.Seed{Datasource: seed.NoCloud, Label: "cidata", Files: []seed.File{{Path: "user-data", Data: userData}}}
	add := func(file, path string) error {
		data, err := f.in.read(cmd, path)
		if err != nil {
			return err
		}
		s.Files, names[file] = append(s.Files, seed.File{Path: file, Data: data}), path
		return nil
	}
	if len(paths) == 2 {
		if err := add("meta-data", paths[1]); err != nil {
			return err
		}
	} else {
		s.Files = append(s.Files, seed.File{Path: "meta-data", Data: []byte(localdsMetaData)})
	}
	for _, o := range []struct{ file, path string }{{"network-config", f.ud.networkConfig}, {"vendor-data", f.ud.vendorData}} {
		if o.path != "" {
			if err := add(o.file, o.path); err != nil {
				return err
			}
		}
	}
	slices.SortFunc(s.Files, func(a, b seed.File) int { return strings.Compare(a.Path, b.Path) })

	var problems spec.Errors
	warnings, err := seed.Check(s)
	if err != nil {
		if problems = spec.AsErrors(err); problems == nil {
			return err
		}
	}
	if f.target.strict { // as inspect --strict: what cloud-init ignores is a problem
		problems, warnings = append(problems, warnings...), nil
	}
	for _, file := range []string{"user-data", "vendor-data"} {
		data, ok := s.Lookup(file)
		if !ok || cloudinit.PartType(data) != cloudinit.TypeCloudConfig {
			continue
		}
		findings, _ := cloudinit.CheckSchema(data) // a document cloud-init cannot load: seed.Check said so
		for _, fd := range findings {
			e := &spec.FieldError{Field: file, Message: "cloud-init's schema: " + fd.String()}
			if f.target.strict && !fd.Deprecated {
				problems = append(problems, e)
			} else {
				warnings = append(warnings, e)
			}
		}
	}
	named := func(es spec.Errors) error {
		var out []error
		for _, e := range es {
			out = append(out, fmt.Errorf("%s: %s", names[e.Field], e.Message))
		}
		return errors.Join(out...)
	}
	for _, w := range warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "vminit: warning: %v\n", named(spec.Errors{w}))
	}
	if len(problems) > 0 {
		return exitError{Code: ExitInvalid, Err: named(problems)}
	}
	return f.writeSeed(cmd, s, format, opts, perm)
}
