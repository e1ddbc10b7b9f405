package ignition

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/coreos/butane/config"
	"github.com/coreos/butane/config/common"
	"github.com/coreos/go-semver/semver"
	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_6"
	"github.com/coreos/vcontext/report"

	types "github.com/coreos/ignition/v2/config/v3_0/types"
	t31 "github.com/coreos/ignition/v2/config/v3_1/types"
	t32 "github.com/coreos/ignition/v2/config/v3_2/types"
	t33 "github.com/coreos/ignition/v2/config/v3_3/types"
	t34 "github.com/coreos/ignition/v2/config/v3_4/types"
	t35 "github.com/coreos/ignition/v2/config/v3_5/types"
	t36 "github.com/coreos/ignition/v2/config/v3_6/types"

	tr31 "github.com/coreos/ignition/v2/config/v3_1/translate"
	tr32 "github.com/coreos/ignition/v2/config/v3_2/translate"
	tr33 "github.com/coreos/ignition/v2/config/v3_3/translate"
	tr34 "github.com/coreos/ignition/v2/config/v3_4/translate"
	tr35 "github.com/coreos/ignition/v2/config/v3_5/translate"
	tr36 "github.com/coreos/ignition/v2/config/v3_6/translate"

	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/spec"
)

// specVersion is a spec version Render can emit. Experimental versions
// are never emitted: a guest whose Ignition has since stabilised that
// number rejects them.
type specVersion struct {
	v      semver.Version
	legacy bool
	// For 3.x: the version's config type, a decoder of JSON into it (as
	// Ignition's parser decodes) that stamps the version unless it is
	// empty, and Ignition's translation of the version's config up to
	// spec 3.6.0, which a guest with a newer Ignition applies.
	config reflect.Type
	decode func(raw []byte, version string) (any, error)
	up     func(cfg any) t36.Config
}

// version3 describes the 3.x version whose config type is C.
func version3[C any](v string, up func(C) t36.Config) specVersion {
	return specVersion{
		v:      *semver.New(v),
		config: reflect.TypeFor[C](),
		decode: func(raw []byte, version string) (any, error) {
			var c C
			if err := json.Unmarshal(raw, &c); err != nil {
				return nil, err
			}
			if version != "" {
				reflect.ValueOf(&c).Elem().FieldByName("Ignition").FieldByName("Version").SetString(version)
			}
			return c, nil
		},
		up: func(cfg any) t36.Config { return up(cfg.(C)) },
	}
}

// specVersions are oldest first: the 2.x versions, then 3.0.0 to 3.6.0.
var specVersions = []specVersion{
	{v: *semver.New("2.2.0"), legacy: true},
	{v: *semver.New("2.3.0"), legacy: true},
	version3("3.0.0", func(c types.Config) t36.Config { return up31(tr31.Translate(c)) }),
	version3("3.1.0", up31),
	version3("3.2.0", up32),
	version3("3.3.0", up33),
	version3("3.4.0", up34),
	version3("3.5.0", up35),
	version3("3.6.0", func(c t36.Config) t36.Config { return c }),
}

func up31(c t31.Config) t36.Config { return up32(tr32.Translate(c)) }
func up32(c t32.Config) t36.Config { return up33(tr33.Translate(c)) }
func up33(c t33.Config) t36.Config { return up34(tr34.Translate(c)) }
func up34(c t34.Config) t36.Config { return up35(tr35.Translate(c)) }
func up35(c t35.Config) t36.Config { return tr36.Translate(c) }

// emit turns a config stamped with a 3.x version into the output: decoded
// into the version's types, validated by Ignition's rules for the version,
// and marshalled cleanly. Validating the struct gives the verdict of the
// version's Parse (which also insists on the version) without the
// position tree Parse builds for line numbers; every config it sees is
// ours, marshalled from Ignition's types, with no unknown keys to warn
// about.
func (sv specVersion) emit(raw []byte) ([]byte, report.Report, error) {
	cfg, err := sv.decode(raw, "")
	if err != nil {
		return nil, report.Report{}, err
	}
	out, err := marshalClean(cfg)
	return out, validateStruct(cfg), err
}

// at is the 3.x version a config must be expressible in to be emitted as
// sv: sv itself, or 3.0.0, which the 2.x versions are translated from.
func (sv specVersion) at() semver.Version {
	if sv.legacy {
		return v300
	}
	return sv.v
}

// Versions lists the spec versions Render can emit, oldest first.
func Versions() []string {
	out := make([]string, len(specVersions))
	for i, sv := range specVersions {
		out[i] = sv.v.String()
	}
	return out
}

func lookupVersion(s string) (specVersion, bool) {
	v, err := semver.NewVersion(s)
	if err != nil {
		return specVersion{}, false
	}
	for _, sv := range specVersions {
		if sv.v == *v {
			return sv, true
		}
	}
	return specVersion{}, false
}

// stable3 are the 3.x versions, oldest first.
func stable3() []specVersion {
	var out []specVersion
	for _, sv := range specVersions {
		if !sv.legacy {
			out = append(out, sv)
		}
	}
	return out
}

// child is a user-supplied config to merge into the generated one.
type child struct {
	field string
	raw   []byte
}

// finish merges the user's Ignition and Butane into the generated config,
// picks the spec version, validates the result and canonicalises it.
func (r *renderer) finish(generated *types.Config) (*Result, error) {
	children := r.children()
	if err := r.errs.Err(); err != nil {
		return nil, err
	}
	var (
		e   emitted
		err error
	)
	if len(children) == 0 {
		e, err = r.emitGenerated(generated)
	} else {
		e, err = r.emitMerged(generated, children)
	}
	if err != nil {
		return nil, err
	}
	if rerr := r.errs.Err(); rerr != nil {
		return nil, rerr // toLegacy's
	}
	switch {
	case (e.err != nil || e.rpt.IsFatal()) && len(children) == 0:
		return nil, fmt.Errorf("internal error: the rendered Ignition %s config does not validate: %v%s", e.target.v, e.err, reportSuffix(e.rpt))
	case e.err != nil, e.rpt.IsFatal():
		r.errs.Add("spec.ignition", "merged with the generated config, it does not validate as Ignition %s: %v%s", e.target.v, e.err, reportSuffix(e.rpt))
	}
	for _, entry := range e.rpt.Entries {
		if entry.Kind != report.Error {
			r.warn(r.fieldOf(entry.Context.String(), generated), "%s", entry.Message)
		}
	}
	if err := r.errs.Err(); err != nil {
		return nil, err
	}
	return &Result{Config: e.out, Version: e.target.v.String(), Warnings: r.warnings}, nil
}

// emitted is a config written in its target version, with what Ignition's
// validation reported on it; err is a failure to express or validate it
// there, which finish reports against the right field.
type emitted struct {
	target specVersion
	out    []byte
	rpt    report.Report
	err    error
}

// emitGenerated writes the generated config alone, the common case kept
// fast: it needs r.floor, or the forced version.
func (r *renderer) emitGenerated(generated *types.Config) (e emitted, err error) {
	e.target, _ = lookupVersion(r.floor.String())
	if f := r.forced; f != nil {
		if f.at().LessThan(r.floor) {
			return e, r.tooOld(f.v, r.floor, r.floorField, r.floorWhy)
		}
		e.target = *f
	}
	generated.Ignition.Version = e.target.at().String()
	switch {
	case e.target.v == v300:
		// The struct is already of the version's types.
		e.rpt = validateStruct(*generated)
		e.out, e.err = marshalClean(generated)
	case e.target.legacy:
		var raw []byte
		if raw, e.err = json.Marshal(generated); e.err == nil {
			if raw, e.err = canonical(raw); e.err == nil {
				e.out, e.rpt, e.err = r.toLegacy(raw, e.target)
			}
		}
	default:
		var raw []byte
		if raw, e.err = json.Marshal(generated); e.err == nil {
			e.out, e.rpt, e.err = e.target.emit(raw)
		}
	}
	return e, nil
}

// emitMerged merges the user's configs into the generated one and writes
// the result in the lowest version that expresses every user config and
// the merged config, or the forced version.
func (r *renderer) emitMerged(generated *types.Config, children []child) (e emitted, err error) {
	merged, parts, err := r.merge(generated, children)
	if err != nil {
		return e, err
	}
	// The merged config holds every key and value of the last user config
	// (the child's win), so that one need not be tried on its own; an
	// earlier one's may have been overridden.
	lowest := r.floor
	for _, p := range parts[:max(len(parts)-1, 0)] {
		c, err := newConfig36(p.cfg)
		if err != nil {
			return e, err
		}
		lowest, _, _ = c.lowest(lowest)
	}
	var cfg any
	lowest, cfg, e.rpt = merged.lowest(lowest)
	e.target, _ = lookupVersion(lowest.String())
	if f := r.forced; f != nil {
		if at := f.at(); at.LessThan(lowest) {
			if at.LessThan(r.floor) {
				return e, r.tooOld(f.v, r.floor, r.floorField, r.floorWhy)
			}
			field, why := whyNot(at, merged, parts)
			return e, r.tooOld(f.v, lowest, field, why)
		}
		if e.target = *f; !e.target.legacy && e.target.v != lowest {
			cfg, e.rpt, e.err = merged.in(e.target)
		}
	}
	switch {
	case e.target.legacy:
		var raw []byte
		if raw, e.err = restamp(merged.raw, v300); e.err == nil {
			e.out, e.rpt, e.err = r.toLegacy(raw, e.target)
		}
	case e.err == nil:
		e.out, e.err = marshalClean(cfg)
	}
	return e, nil
}

// tooOld is the error for a forced version below what the config needs.
func (r *renderer) tooOld(forced, need semver.Version, field, why string) error {
	if forced.Major == 2 {
		r.errs.Add(field, "needs Ignition spec %s, and spec %s is made from spec 3.0.0: %s", need, forced, why)
	} else {
		r.errs.Add(field, "needs Ignition spec %s or newer, and %s was requested: %s", need, forced, why)
	}
	return r.errs.Err()
}

// fieldOf names the spec field behind a path in the rendered config, for
// warnings of Ignition's validator.
func (r *renderer) fieldOf(p string, generated *types.Config) string {
	var i int
	if _, err := fmt.Sscanf(p, "$.systemd.units.%d", &i); err == nil && i < len(generated.Systemd.Units) {
		name := generated.Systemd.Units[i].Name
		for j, u := range r.inst.Spec.Units {
			if u.Name == name {
				return fmt.Sprintf("spec.units[%d]", j)
			}
		}
		return "systemd unit " + name
	}
	return "the rendered config, " + p
}

// children collects the renderer's generated configs, spec.ignition.config
// and the translation of spec.ignition.butane, in merge order.
func (r *renderer) children() []child {
	ig := r.inst.Spec.Ignition
	out := append([]child(nil), r.generated...)
	if strings.TrimSpace(ig.Config) != "" {
		if c, ok := r.userConfig(ig.Config); ok {
			out = append(out, c)
		}
	}
	if strings.TrimSpace(ig.Butane) != "" {
		if c, ok := r.butane(ig.Butane); ok {
			out = append(out, c)
		}
	}
	for _, c := range out {
		v, rpt, err := util.GetConfigVersion(c.raw)
		switch {
		case err != nil:
			r.errs.Add(c.field, "%v%s", err, reportSuffix(rpt))
		case v.Major != 3 || v.PreRelease != "" || v360.LessThan(v):
			r.errs.Add(c.field, "Ignition spec %s: want a stable 3.x version, 3.0.0 to 3.6.0 (or 2.x, translated to 3.0.0)", v)
		}
	}
	return out
}

// userConfig is spec.ignition.config, a spec 2.x config translated to
// spec 3.0.0 first (Upgrade, as the KubeVirt and oVirt importers do):
// Ignition itself translates 2.x configs at boot, and RHCOS before 4.6
// and Cluster API's kubeadm bootstrap write them.
func (r *renderer) userConfig(cfg string) (child, bool) {
	const field = "spec.ignition.config"
	raw := []byte(cfg)
	if v, _, err := util.GetConfigVersion(raw); err != nil || v.Major != 2 {
		return child{field, raw}, true // a problem is children's to report
	}
	up, _, err := Upgrade(raw)
	if err != nil {
		r.errs.Add(field, "%v", err)
		return child{}, false
	}
	return child{field, up}, true
}

// butane translates spec.ignition.butane, reporting its problems.
func (r *renderer) butane(doc string) (child, bool) {
	const field = "spec.ignition.butane"
	// Butane's translator expands aliases as it decodes: bound them first.
	head, err := yamlbound.Parse([]byte(doc), spec.FieldYAML)
	var be *yamlbound.Error
	if errors.As(err, &be) {
		r.errs.Add(field, "%v", err)
		return child{}, false
	}
	var variant struct {
		Variant string `yaml:"variant"`
	}
	var files butaneFiles
	if err == nil {
		head.Decode(&variant) // a problem is Butane's to report, below
		head.Decode(&files)
	}
	if want := map[string]Variant{"fcos": FCOS, "openshift": RHCOS, "flatcar": Flatcar}[variant.Variant]; want != "" && want != r.opts.Variant {
		r.warn(field, "Butane variant %q is meant for %s guests, and this config is for %s", variant.Variant, want, r.opts.Variant)
	}
	// Raw: the openshift variant's bare Ignition, not a MachineConfig.
	out, rpt, err := config.TranslateBytes([]byte(doc), common.TranslateBytesOptions{
		TranslateOptions: common.TranslateOptions{FilesDir: r.opts.FilesDir},
		Raw:              true,
	})
	rpt = files.emptied(rpt)
	r.report(field, rpt)
	switch {
	case err != nil && !rpt.IsFatal():
		r.errs.Add(field, "%s", butaneError(err))
	case err == nil:
		return child{field, out}, true
	}
	return child{}, false
}

// butaneFiles are the files of a Butane document, to tell a typo that
// empties one.
type butaneFiles struct {
	Storage struct {
		Files []struct {
			Path     string         `yaml:"path"`
			Contents map[string]any `yaml:"contents"`
		} `yaml:"files"`
	} `yaml:"storage"`
}

// emptied makes an error of Butane's "unused key" warning inside a file's
// contents ($.storage.files.N.contents.inlin) when the file has no other
// content source: the typo would leave the file empty on the guest.
func (f butaneFiles) emptied(rpt report.Report) report.Report {
	for i, e := range rpt.Entries {
		p := e.Context.Path
		if e.Kind != report.Warn || len(p) != 5 || p[0] != "storage" || p[1] != "files" || p[3] != "contents" {
			continue
		}
		n, ok := p[2].(int)
		if !ok || n < 0 || n >= len(f.Storage.Files) {
			continue
		}
		file := f.Storage.Files[n]
		if file.Contents["inline"] != nil || file.Contents["local"] != nil || file.Contents["source"] != nil {
			continue
		}
		rpt.Entries[i].Kind = report.Error
		rpt.Entries[i].Message += fmt.Sprintf(": %s would be empty (contents takes inline, local or source)", file.Path)
	}
	return rpt
}

// butaneError words Butane's errors, which may carry the YAML position.
func butaneError(err error) string {
	var ue common.ErrUnmarshal
	if errors.As(err, &ue) {
		return strings.TrimPrefix(ue.Detail, "yaml: ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// part is a user config translated to spec 3.6.0.
type part struct {
	field string
	cfg   t36.Config
}

// merge merges the children into the generated config with Ignition's
// merge, in spec 3.6.0 types (every stable config translates up to it),
// and returns the result, with each child on its own to say why a version
// cannot express it.
func (r *renderer) merge(generated *types.Config, children []child) (*config36, []part, error) {
	// The generated config uses only spec 3.0.0 fields, which every later
	// version has unchanged: stamping 3.6.0 is its translation.
	generated.Ignition.Version = v360.String()
	raw, err := json.Marshal(generated)
	if err != nil {
		return nil, nil, err
	}
	var merged t36.Config
	if err := json.Unmarshal(raw, &merged); err != nil {
		return nil, nil, fmt.Errorf("internal error: the generated config does not decode as 3.6.0: %v", err)
	}
	var parts []part
	for _, c := range children {
		cfg, rpt, err := parseChild(c.raw)
		r.report(c.field, rpt)
		if err != nil {
			if !rpt.IsFatal() {
				r.errs.Add(c.field, "%v", err)
			}
			continue
		}
		parts = append(parts, part{c.field, cfg})
		// Ignition's own merge: the user's config is the child, so its
		// values win, and lists keyed by path or name merge by key.
		merged = v3_6.Merge(merged, cfg)
	}
	if r.errs.Err() == nil {
		m, err := newConfig36(merged)
		if err != nil || !m.base.IsFatal() {
			return m, parts, err
		}
	}
	return nil, nil, r.mergeError(raw, parts)
}

// mergeError explains why merging failed, in Ignition's words and with
// the positions of its parser: the generated config or a user config that
// does not validate as spec 3.6.0 (a bug of ours or Ignition's
// translation), the user configs' own errors, or the merged config. Only
// a failed render takes this path.
func (r *renderer) mergeError(generated []byte, parts []part) error {
	merged, rpt, err := v3_6.Parse(generated)
	if err != nil {
		return fmt.Errorf("internal error: the generated config does not parse as 3.6.0: %v%s", err, reportSuffix(rpt))
	}
	for _, p := range parts {
		raw, err := canonicalOf(p.cfg)
		if err != nil {
			return err
		}
		if _, _, err := v3_6.Parse(raw); err != nil {
			return fmt.Errorf("internal error: %s does not parse again as 3.6.0: %v", p.field, err)
		}
		merged = v3_6.Merge(merged, p.cfg)
	}
	if err := r.errs.Err(); err != nil {
		return err
	}
	raw, err := canonicalOf(merged)
	if err != nil {
		return err
	}
	_, rpt, err = v3_6.Parse(raw)
	r.errs.Add("spec.ignition", "merged with the generated config, it does not validate: %v%s", err, reportSuffix(rpt))
	return r.errs.Err()
}

// whyNot names the user config, and its key, that version v cannot
// express, or says what of the merged config it cannot.
func whyNot(v semver.Version, merged *config36, parts []part) (field, why string) {
	sv, _ := lookupVersion(v.String())
	for _, p := range parts {
		c, err := newConfig36(p.cfg)
		if err != nil {
			return p.field, err.Error()
		}
		if _, _, why := c.express(sv); why != "" {
			return p.field, why
		}
	}
	_, _, why = merged.express(sv)
	return "spec.ignition", "the merged config " + why
}

// report records a library report's entries about field: errors as field
// errors, warnings as warnings (errors under Strict).
func (r *renderer) report(field string, rpt report.Report) {
	for _, e := range rpt.Entries {
		msg := entryString(e)
		if e.Kind == report.Error {
			r.errs.Add(field, "%s", msg)
		} else {
			r.warn(field, "%s", msg)
		}
	}
}

// entryString words a report entry with its position in the user's text
// first, the way editors expect: "line 3 col 5: unused key filez
// ($.storage.filez)".
func entryString(e report.Entry) string {
	var b strings.Builder
	if p := e.Marker.StartP; p != nil && p.Line > 0 {
		fmt.Fprintf(&b, "line %d col %d: ", p.Line, p.Column)
	}
	b.WriteString(e.Message)
	if c := e.Context.String(); c != "" && c != "$" {
		fmt.Fprintf(&b, " (%s)", c)
	}
	return b.String()
}

func reportSuffix(rpt report.Report) string {
	if len(rpt.Entries) == 0 {
		return ""
	}
	var s []string
	for _, e := range rpt.Entries {
		s = append(s, e.Kind.String()+": "+entryString(e))
	}
	return ": " + strings.Join(s, "; ")
}
