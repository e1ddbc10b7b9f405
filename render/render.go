// Package render is the pipeline from an instance to what its guest
// agent reads, with every problem on the way: the one place `vminit build`,
// `render`, `validate` and `run`, the controller and the metadata server
// get a seed or an Ignition config from a spec.
//
// Instance renders for the target agent (for cloud-init, the seed with
// seed.Build; for Ignition, the config with ignition.Render, merging the
// user's own Ignition and Butane) and then runs the checks only a reviewer
// would: the user's #cloud-config against cloud-init's own schema, the
// spec fields that cloud-config silently replaces, user data cloud-init
// ignores, every problem of the user's Ignition even when the spec has
// others, and the transport's size budget. The rendering comes first, its
// problems first in Result.Errors. The checks of the user's cloud-config
// run whether or not the seed rendered, and a failed Ignition rendering is
// followed by the user's Ignition's own problems, so every problem is
// listed at once; the transport's budget is checked on the rendered
// config. An output comes only from a rendering without error, and a
// check's error after it still stops a build (Result.OK). (The spec itself, spec.Load checks: a
// spec.ignition beside agent cloud-init is refused there.)
//
// `vminit validate` is this package; the metadata server's admin API and
// its stores run it too (Target.VerdictOnly: the verdict without the
// seed's bytes), so a spec that validates is a spec every path accepts.
package render

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vminit/vminit/cloudbaseinit"
	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// Target says which output to render and check, where the answer depends
// on it. The zero Target is what `vminit build` makes by default: the output
// for the spec's agent, a NoCloud seed with network-config version 2 or
// an Ignition config for the spec's variant.
type Target struct {
	// Agent overrides spec.agent: spec.AgentCloudInit,
	// spec.AgentIgnition or spec.AgentCloudbaseInit.
	Agent string
	// Datasource and NetworkConfigVersion choose the cloud-init seed
	// (seed.Options). An empty Datasource is the spec's datasource, else
	// NoCloud (DatasourceFor).
	Datasource           seed.Datasource
	NetworkConfigVersion int
	// Variant and IgnitionVersion override spec.ignition's.
	Variant         ignition.Variant
	IgnitionVersion string
	// AllowPartial drops what Ignition cannot express with a warning
	// (ignition.Options.AllowPartial).
	AllowPartial bool
	// Transport names a delivery.Transports budget the Ignition config
	// (without a pointer config) or the cloud-init user data, the
	// first-boot report included, must fit.
	Transport string
	// Strict makes every warning an error.
	Strict bool
	// LenientSchema reports cloud-init schema errors in the user's
	// cloud-config as warnings: `vminit build` does, since cloud-init
	// itself only warns and a newer guest may accept a newer form;
	// `vminit validate` does not.
	LenientSchema bool
	// ReportTo, the base URL of a vminit server (`--report-to`), makes the
	// seed or config report the first boot to it (seed.Options.ReportTo,
	// ignition.Options.ReportTo).
	ReportTo string
	// VerdictOnly leaves Result.Seed nil: the cloud-init seed is checked
	// with seed.BuildError, which finds what seed.Build would without encoding
	// what cannot fail. The metadata server's checks of every instance it
	// loads use it; they render nothing they keep.
	VerdictOnly bool
}

// Result is the output rendered and what the checks found. Errors stop a
// build; Warnings do not (unless Target.Strict, which moves them to
// Errors). Each names its spec field.
type Result struct {
	Errors   spec.Errors
	Warnings spec.Errors

	// Seed is the cloud-init seed, when the target is cloud-init, it
	// rendered and not VerdictOnly.
	Seed *seed.Seed
	// Ignition is the Ignition config, when the target is Ignition and it
	// rendered.
	Ignition *ignition.Result
}

// OK reports whether there are no errors.
func (r *Result) OK() bool { return len(r.Errors) == 0 }

// Instance renders a defaulted, valid instance (spec.Load gives one; its
// own problems come from there) for t and runs every check on it.
func Instance(inst *spec.Instance, t Target) *Result {
	r := &Result{}
	agent := t.Agent
	if agent == "" {
		agent = inst.Spec.Agent
	}
	if agent != inst.Spec.Agent && (agent == spec.AgentCloudbaseInit || inst.Spec.Agent == spec.AgentCloudbaseInit) {
		// The seed renders the user data of the spec's agent.
		cp := *inst
		cp.Spec.Agent = agent
		inst = &cp
	}
	switch agent {
	case spec.AgentIgnition:
		r.ignition(inst, t)
	case spec.AgentCloudbaseInit:
		// The seed's user data is cloudbase-init's (package
		// cloudbaseinit), which checks the user's own as cloudbase-init
		// reads it; cloud-init's schema and merge warnings do not apply.
		r.cloudInit(inst, t)
		r.Warnings = append(r.Warnings, cloudbaseinit.Warnings(inst)...)
	default:
		r.cloudInit(inst, t)
		r.userData(inst, t.LenientSchema)
	}
	r.keys(inst, agent)
	if t.Strict {
		r.Errors, r.Warnings = append(r.Errors, r.Warnings...), nil
	}
	return r
}

// DatasourceFor is the seed layout t means for inst: t.Datasource, else
// spec.datasource, else NoCloud.
func (t Target) DatasourceFor(inst *spec.Instance) seed.Datasource {
	switch {
	case t.Datasource != "":
		return t.Datasource
	case inst.Spec.Datasource != "":
		return seed.Datasource(inst.Spec.Datasource)
	}
	return seed.NoCloud
}

func (t Target) seedOptions() seed.Options {
	return seed.Options{NetworkConfigVersion: t.NetworkConfigVersion, ReportTo: t.ReportTo}
}

func (r *Result) cloudInit(inst *spec.Instance, t Target) {
	if t.VerdictOnly {
		if err := seed.BuildError(inst, t.DatasourceFor(inst), t.seedOptions()); err != nil {
			r.Errors = append(r.Errors, asErrors(err, "")...)
		}
		return
	}
	ds := t.DatasourceFor(inst)
	s, err := seed.Build(inst, ds, t.seedOptions())
	if err != nil {
		r.Errors = append(r.Errors, asErrors(err, "")...)
		return
	}
	r.Seed = s
	if t.Transport == "" {
		return
	}
	// cloud-init has no pointer config: user data over the budget is an
	// error. The first-boot report (ReportTo) counts: some 5 KB.
	tr, err := delivery.LookupTransport(t.Transport)
	if ud, _ := s.Lookup(ds.UserDataPath()); err == nil && tr.Size(ud) > tr.Limit {
		err = fmt.Errorf("user data too large for its transport: %d bytes; %s allows %d", tr.Size(ud), tr.Source, tr.Limit)
	}
	if err != nil {
		r.Errors = append(r.Errors, &spec.FieldError{Message: err.Error()})
	}
}

func (r *Result) ignition(inst *spec.Instance, t Target) {
	res, err := ignition.Render(inst, ignition.Options{Variant: t.Variant, Version: t.IgnitionVersion, AllowPartial: t.AllowPartial, Strict: t.Strict, ReportTo: t.ReportTo})
	if err != nil {
		errs := asErrors(err, "")
		r.Errors = append(r.Errors, errs...)
		// Render stops at the spec's own problems before it reaches the
		// user's config; every problem is wanted.
		if !slices.ContainsFunc(errs, isUserIgnition) {
			r.Errors = append(r.Errors, userIgnitionErrors(inst, t)...)
		}
		return
	}
	for _, w := range res.Warnings {
		r.Warnings = append(r.Warnings, &spec.FieldError{Message: w})
	}
	r.Ignition = res
	if t.Transport == "" {
		return
	}
	tr, err := delivery.LookupTransport(t.Transport)
	if err == nil {
		_, _, err = delivery.Fit(res.Config, tr, "", nil)
	}
	if err != nil {
		r.Errors = append(r.Errors, &spec.FieldError{Message: err.Error()})
	}
}

// userIgnitionErrors returns the problems of the user's own Ignition
// config and Butane (spec.ignition), rendering past what Ignition cannot
// express of the rest of the spec.
func userIgnitionErrors(inst *spec.Instance, t Target) spec.Errors {
	if inst.Spec.Ignition.Config == "" && inst.Spec.Ignition.Butane == "" {
		return nil
	}
	_, err := ignition.Render(inst, ignition.Options{Variant: t.Variant, Version: t.IgnitionVersion, AllowPartial: true})
	var out spec.Errors
	for _, e := range spec.AsErrors(err) {
		if isUserIgnition(e) {
			out = append(out, e)
		}
	}
	return out
}

func isUserIgnition(e *spec.FieldError) bool { return strings.HasPrefix(e.Field, "spec.ignition") }

// userData checks the user's cloud-config documents against cloud-init's
// schema, reports the spec fields they replace, and warns of a whole
// user-data (userDataOnly) that cloud-init ignores.
func (r *Result) userData(inst *spec.Instance, lenient bool) {
	for _, doc := range []struct{ field, data string }{
		{"spec.cloudInit.userData", inst.Spec.CloudInit.UserData},
		{"spec.cloudInit.vendorData", inst.Spec.CloudInit.VendorData},
	} {
		field, data := doc.field, doc.data
		if cloudinit.PartType([]byte(data)) != cloudinit.TypeCloudConfig {
			continue
		}
		findings, err := cloudinit.CheckSchema([]byte(data))
		if err != nil {
			continue // rendering reports a document cloud-init cannot load
		}
		for _, f := range findings {
			e := &spec.FieldError{Field: field, Message: f.String()}
			if f.Deprecated || lenient {
				r.Warnings = append(r.Warnings, e)
			} else {
				r.Errors = append(r.Errors, e)
			}
		}
	}
	if ci := &inst.Spec.CloudInit; ci.UserDataOnly && errors.Is(cloudinit.CheckUserData([]byte(ci.UserData)), cloudinit.ErrIgnored) {
		r.Warnings = append(r.Warnings, &spec.FieldError{Field: "spec.cloudInit.userData", Cause: cloudinit.ErrIgnored,
			Message: cloudinit.ErrIgnored.Error() + "; delivered as given (userDataOnly), as the platform that wrote it delivers it: start it with #cloud-config or #! to have it run"})
	}
	over, err := cloudinit.Overrides(inst)
	if err == nil {
		r.Warnings = append(r.Warnings, over...)
	}
}

// asErrors returns err as field errors; an error that is not one becomes
// a message on field.
func asErrors(err error, field string) spec.Errors {
	if es := spec.AsErrors(err); es != nil {
		return es
	}
	return spec.Errors{{Field: field, Message: err.Error()}}
}
