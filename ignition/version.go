package ignition

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/coreos/butane/config"
	"github.com/coreos/butane/config/common"
	"github.com/coreos/go-semver/semver"
	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_0"
	"github.com/coreos/ignition/v2/config/v3_1"
	"github.com/coreos/ignition/v2/config/v3_2"
	"github.com/coreos/ignition/v2/config/v3_3"
	"github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_5"
	"github.com/coreos/ignition/v2/config/v3_6"
	"github.com/coreos/ignition/v2/config/validate"
	"github.com/coreos/vcontext/report"

	types "github.com/coreos/ignition/v2/config/v3_0/types"
)

// specVersion is one stable Ignition spec version and the library calls
// that work in its types. Experimental versions are never emitted: a guest
// whose Ignition stabilised that number rejects them.
type specVersion struct {
	v semver.Version
	// merge parses both configs (any version up to v, translated up) and
	// merges child into parent with Ignition's own rules.
	merge func(parent, child []byte) ([]byte, report.Report, error)
	// check validates a config of version v by Ignition's rules.
	check func(raw []byte) (report.Report, error)
}

func entry[C any](v string, compat func([]byte) (C, report.Report, error), merge func(C, C) C) specVersion {
	return specVersion{
		v: *semver.New(v),
		merge: func(parent, child []byte) ([]byte, report.Report, error) {
			p, rp, err := compat(parent)
			if err != nil {
				return nil, rp, err
			}
			c, rc, err := compat(child)
			if err != nil {
				return nil, rc, err
			}
			out, err := json.Marshal(merge(p, c))
			return out, rc, err
		},
		check: func(raw []byte) (report.Report, error) {
			// The generated config has no unknown keys to warn about and
			// needs no line numbers, so validating the typed struct gives
			// Ignition's verdict without its position tree (3x faster).
			var c C
			if err := json.Unmarshal(raw, &c); err != nil {
				return report.Report{}, err
			}
			return validate.ValidateWithContext(c, nil), nil
		},
	}
}

var specVersions = []specVersion{
	entry("3.0.0", v3_0.ParseCompatibleVersion, v3_0.Merge),
	entry("3.1.0", v3_1.ParseCompatibleVersion, v3_1.Merge),
	entry("3.2.0", v3_2.ParseCompatibleVersion, v3_2.Merge),
	entry("3.3.0", v3_3.ParseCompatibleVersion, v3_3.Merge),
	entry("3.4.0", v3_4.ParseCompatibleVersion, v3_4.Merge),
	entry("3.5.0", v3_5.ParseCompatibleVersion, v3_5.Merge),
	entry("3.6.0", v3_6.ParseCompatibleVersion, v3_6.Merge),
}

// Versions lists the spec versions Render can emit, oldest first.
func Versions() []string {
	out := make([]string, len(specVersions))
	for i, sv := range specVersions {
		out[i] = sv.v.String()
	}
	return out
}

func lookupVersion(v semver.Version) (specVersion, bool) {
	for _, sv := range specVersions {
		if sv.v == v {
			return sv, true
		}
	}
	return specVersion{}, false
}

// finish picks the spec version, merges the user's Ignition and Butane
// into the generated config, validates the result and canonicalises it.
func (r *renderer) finish(generated *types.Config) (*Result, error) {
	ig := r.inst.Spec.Ignition
	type child struct {
		field string
		raw   []byte
	}
	var children []child
	if strings.TrimSpace(ig.Config) != "" {
		children = append(children, child{"spec.ignition.config", []byte(ig.Config)})
	}
	if strings.TrimSpace(ig.Butane) != "" {
		out, rep, err := config.TranslateBytes([]byte(ig.Butane), common.TranslateBytesOptions{Raw: true})
		r.report("spec.ignition.butane", rep)
		if err != nil {
			r.errs.Add("spec.ignition.butane", "%v", err)
		} else {
			children = append(children, child{"spec.ignition.butane", out})
		}
	}
	for _, c := range children {
		v, rep, err := util.GetConfigVersion(c.raw)
		if err != nil {
			r.errs.Add(c.field, "%v%s", err, reportSuffix(rep))
			continue
		}
		if _, ok := lookupVersion(v); !ok {
			r.errs.Add(c.field, "Ignition spec version %s is not a stable 3.x version (%s)", v, strings.Join(Versions(), ", "))
			continue
		}
		r.needs(v, c.field)
	}
	target := r.need
	if r.opts.Version != "" {
		forced, err := semver.NewVersion(r.opts.Version)
		if _, ok := lookupVersion(derefVersion(forced)); err != nil || !ok {
			return nil, fmt.Errorf("Ignition spec version %q: want one of %s", r.opts.Version, strings.Join(Versions(), ", "))
		}
		if forced.LessThan(r.need) {
			r.errs.Add("", "the config needs Ignition spec %s or newer (%s), and %s was requested", r.need, strings.Join(r.warnings, "; "), forced)
		}
		target = *forced
	}
	if err := r.errs.Err(); err != nil {
		return nil, err
	}
	sv, _ := lookupVersion(target)
	// The generated part uses only 3.0 fields, which every later 3.x
	// version has unchanged: stamping the target version is the whole
	// translation.
	generated.Ignition.Version = target.String()
	cfg, err := json.Marshal(generated)
	if err != nil {
		return nil, err
	}
	for _, c := range children {
		merged, rep, err := sv.merge(cfg, c.raw)
		r.report(c.field, rep)
		if err != nil {
			r.errs.Add(c.field, "%v%s", err, reportSuffix(rep))
			continue
		}
		cfg = merged
	}
	if err := r.errs.Err(); err != nil {
		return nil, err
	}
	cfg, err = canonical(cfg)
	if err != nil {
		return nil, err
	}
	rep, err := sv.check(cfg)
	if err != nil || rep.IsFatal() {
		return nil, fmt.Errorf("internal error: the rendered Ignition %s config does not validate: %v%s", target, err, reportSuffix(rep))
	}
	return &Result{Config: cfg, Version: target.String(), Warnings: r.warnings}, nil
}

func derefVersion(v *semver.Version) semver.Version {
	if v == nil {
		return semver.Version{}
	}
	return *v
}

// report records a library report's entries: errors as field errors,
// warnings as warnings (errors under Strict).
func (r *renderer) report(field string, rep report.Report) {
	for _, e := range rep.Entries {
		switch {
		case e.Kind == report.Error:
			r.errs.Add(field, "%s", e.String())
		case r.opts.Strict:
			r.errs.Add(field, "%s (an error under --strict)", e.String())
		default:
			r.warnings = append(r.warnings, field+": "+e.String())
		}
	}
}

func reportSuffix(rep report.Report) string {
	if len(rep.Entries) == 0 {
		return ""
	}
	return ": " + strings.TrimSpace(rep.String())
}

// canonical drops what encoding/json writes for unset optional structs
// ("verification":{}, "user":{}, empty lists) and sorts keys, so that the
// same spec always gives the same, smallest config.
func canonical(raw []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	v, _ = prune(v)
	return json.Marshal(v)
}

func prune(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if pe, keep := prune(e); keep {
				t[k] = pe
			} else {
				delete(t, k)
			}
		}
		return t, len(t) > 0
	case []any:
		out := t[:0]
		for _, e := range t {
			if pe, keep := prune(e); keep {
				out = append(out, pe)
			}
		}
		return out, len(out) > 0
	case nil:
		return nil, false
	}
	return v, true
}
