package ignition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/ign-converter/translate/v23tov30"
	"github.com/coreos/ign-converter/translate/v30tov22"
	v22 "github.com/coreos/ignition/config/v2_2"
	v23 "github.com/coreos/ignition/config/v2_3"
	legacyreport "github.com/coreos/ignition/config/validate/report"
	"github.com/coreos/ignition/v2/config/v3_0"
	"github.com/coreos/vcontext/report"
)

// Spec 2.x is for guests whose Ignition predates spec 3: RHCOS before 4.6
// (spec 2.2) and tools that still speak 2.3 to Flatcar, whose Ignition
// translates 2.x to 3.x at boot (Cluster API's kubeadm bootstrap emits
// 2.3). It is made from the spec 3.0.0 config with ign-converter (3.0 to
// 2.2), and Ignition 0.35's own translation from 2.2 to 2.3, which adds
// nothing a 3.0 config can use.

// toLegacy translates a canonical 3.0.0 config to target (2.2.0 or
// 2.3.0), and checks that the result translates back to the same config,
// so that nothing the converters do not carry is lost silently.
func (r *renderer) toLegacy(cfg30 []byte, target specVersion) ([]byte, report.Report, error) {
	if r.opts.Variant == FCOS {
		r.errs.Add("", "Fedora CoreOS reads only Ignition spec 3; spec %s is for RHCOS before 4.6 and for Flatcar", target.v)
		return nil, report.Report{}, nil
	}
	c30, rpt, err := v3_0.Parse(cfg30)
	if err != nil {
		return nil, rpt, err
	}
	c22, err := v30tov22.Translate(c30)
	if err != nil {
		r.errs.Add("", "the config cannot be translated to Ignition spec %s: %v", target.v, firstLine(err))
		return nil, report.Report{}, nil
	}
	c23 := v23.Translate(c22)
	var out []byte
	if target.v.Minor == 3 {
		out, err = marshalClean(c23)
	} else {
		out, err = marshalClean(c22)
	}
	if err != nil {
		return nil, report.Report{}, err
	}
	back, err := v23tov30.Translate(c23, nil)
	if err != nil {
		r.errs.Add("", "the config cannot be expressed in Ignition spec %s: %v", target.v, firstLine(err))
		return nil, report.Report{}, nil
	}
	b, err := json.Marshal(back)
	if err == nil {
		b, err = canonical(b)
	}
	if err != nil {
		return nil, report.Report{}, err
	}
	if p, same := diff(cfg30, b); !same {
		r.errs.Add("", "the config cannot be expressed in Ignition spec %s: %s does not survive the translation", target.v, p)
		return nil, report.Report{}, nil
	}
	// Ignition 0.35's own parser for the exact version has the last word.
	check := legacyCheck22
	if target.v.Minor == 3 {
		check = legacyCheck23
	}
	rpt, err = check(out)
	return out, rpt, err
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	return s
}

// legacyCheck22 and legacyCheck23 validate with Ignition 0.35's parser for
// the exact version (its Parse also accepts older versions, translating
// them, so the version is checked first).
func legacyCheck22(raw []byte) (report.Report, error) {
	return legacyCheck(raw, "2.2.0", func(b []byte) (legacyreport.Report, error) { _, r, err := v22.Parse(b); return r, err })
}

func legacyCheck23(raw []byte) (report.Report, error) {
	return legacyCheck(raw, "2.3.0", func(b []byte) (legacyreport.Report, error) { _, r, err := v23.Parse(b); return r, err })
}

func legacyCheck(raw []byte, version string, parse func([]byte) (legacyreport.Report, error)) (report.Report, error) {
	var head struct {
		Ignition struct{ Version string } `json:"ignition"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return report.Report{}, err
	}
	if head.Ignition.Version != version {
		return report.Report{}, fmt.Errorf("version %q, want %s", head.Ignition.Version, version)
	}
	lr, err := parse(raw)
	// The legacy report, in the words of the current one.
	var rpt report.Report
	for _, e := range lr.Entries {
		kind := report.Warn
		switch e.Kind {
		case legacyreport.EntryError:
			kind = report.Error
		case legacyreport.EntryInfo, legacyreport.EntryDeprecated:
			kind = report.Info
		}
		rpt.Entries = append(rpt.Entries, report.Entry{Kind: kind, Message: e.Message})
	}
	return rpt, err
}

// LooksLikeConfig reports whether data, user data on a config drive or a
// NoCloud disk, is meant for Ignition rather than cloud-init: a JSON
// object with an "ignition" key. Both read the same file (Ignition's
// openstack, kubevirt and proxmoxve platforms; cloud-init's datasources),
// and cloud-init ignores user-data that starts with "{" (no part type).
func LooksLikeConfig(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) > 0 && t[0] == '{' && bytes.Contains(t, []byte(`"ignition"`))
}

// Upgrade returns config as a spec 3 config: unchanged when it is spec 3
// already; translated to spec 3.0.0 when it is spec 2.0 to 2.3 (what
// KubeVirt's and oVirt's documented examples, RHCOS before 4.6 and Cluster
// API's kubeadm bootstrap write), by Ignition 0.35's own parser, which
// brings 2.0–2.2 up to 2.3, and ign-converter's 2.3 to 3.0 translation,
// the one Ignition itself applies at boot. from is the config's version.
// Spec 2's networkd units and filesystems other than "root" have no spec 3
// equivalent and are errors. Text that is not JSON is a *SyntaxError.
func Upgrade(config []byte) (out []byte, from string, err error) {
	var head struct {
		Ignition struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	if err := json.Unmarshal(config, &head); err != nil {
		return nil, "", jsonSyntax(config, err)
	}
	from = head.Ignition.Version
	if strings.HasPrefix(from, "3.") {
		return config, from, nil
	}
	if !strings.HasPrefix(from, "2.") && !strings.HasPrefix(from, "1") {
		return nil, from, fmt.Errorf("ignition.version %q is not an Ignition spec version (2.x or 3.x)", from)
	}
	c23, rpt, err := v23.Parse(config)
	if err != nil {
		msg := firstLine(err)
		if s := strings.TrimSpace(rpt.String()); s != "" {
			msg += ": " + s
		}
		return nil, from, fmt.Errorf("an Ignition spec %s config: %s", from, msg)
	}
	c30, err := v23tov30.Translate(c23, nil)
	if err != nil {
		return nil, from, fmt.Errorf("the spec %s config cannot be translated to spec 3: %v", from, firstLine(err))
	}
	b, err := json.Marshal(c30)
	if err == nil {
		b, err = canonical(b)
	}
	return b, from, err
}

// SyntaxError is a config that is not JSON, with the position of the
// problem in the config's text (1-based), so that a caller holding the
// config inside another document can name its own line.
type SyntaxError struct {
	Line, Column int
	Err          error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("not JSON: line %d, column %d: %v", e.Line, e.Column, e.Err)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// jsonSyntax says where JSON does not parse, by line and column.
func jsonSyntax(data []byte, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fmt.Errorf("not JSON: %v", err)
	}
	// Offset counts the byte that went wrong.
	line, col := 1, 1
	for _, c := range data[:max(0, min(int(se.Offset)-1, len(data)))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Line: line, Column: col, Err: se}
}
