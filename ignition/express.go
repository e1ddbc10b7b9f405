package ignition

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/coreos/go-semver/semver"
	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_6"
	"github.com/coreos/vcontext/path"
	"github.com/coreos/vcontext/report"

	t36 "github.com/coreos/ignition/v2/config/v3_6/types"
)

// config36 is a merged or user config in spec 3.6.0, in the canonical form
// in which the versions that can express it are found.
type config36 struct {
	raw  []byte        // canonical JSON (see canonical)
	tree any           // raw, decoded with exact numbers
	cfg  t36.Config    // raw, decoded into Ignition's types
	base report.Report // Ignition's validation of cfg
}

func newConfig36(cfg t36.Config) (*config36, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	c := new(config36)
	if c.tree, c.raw, err = canonicalTree(b); err != nil {
		return nil, err
	}
	// Decoded again, the config is what the canonical JSON says: list
	// entries that carried nothing are gone.
	if err := json.Unmarshal(c.raw, &c.cfg); err != nil {
		return nil, err
	}
	c.base = validateStruct(c.cfg)
	return c, nil
}

// canonicalOf is the canonical JSON of a config.
func canonicalOf(cfg t36.Config) ([]byte, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	_, raw, err := canonicalTree(b)
	return raw, err
}

// in returns the config in the types of version sv, stamped with it, and
// Ignition's validation of it there.
func (c *config36) in(sv specVersion) (any, report.Report, error) {
	if sv.v == v360 {
		// The merged config has the user config's spelling of the
		// version, say "03.6.0".
		cfg := c.cfg
		cfg.Ignition.Version = v360.String()
		return cfg, c.base, nil
	}
	cfg, err := sv.decode(c.raw, sv.v.String())
	if err != nil {
		return nil, report.Report{}, err
	}
	return cfg, validateStruct(cfg), nil
}

// lowest returns the lowest version from from on that expresses the
// config, the config in that version and Ignition's validation of it
// there. A version without a key the config uses cannot express it
// (Ignition would drop the key), so only the first version that has them
// all is tried, and the next if Ignition's rules or translation there
// disagree.
func (c *config36) lowest(from semver.Version) (semver.Version, any, report.Report) {
	for _, sv := range stable3() {
		if sv.v.LessThan(from) || sv.v != v360 && c.unusedKey(sv) != nil {
			continue
		}
		// express always succeeds at 3.6.0, the config's own version.
		if cfg, rpt, why := c.express(sv); why == "" {
			return sv.v, cfg, rpt
		}
	}
	return v360, nil, report.Report{} // from is past 3.6.0: not a version
}

// express returns the config in version sv, with Ignition's validation of
// it there, if it means the same in sv; if not, it says why. It means the
// same when Ignition, reading it as sv, has nothing to say that it did not
// already say at 3.6.0 (a rule of sv's, or a key sv does not have, which
// Ignition warns about and drops), and translates it back up to exactly
// the same config (setuid, setgid and sticky bits do not survive the
// translation from before 3.6.0). This is the verdict of Ignition's own
// parser for sv followed by its translation to 3.6.0, without the parse.
func (c *config36) express(sv specVersion) (any, report.Report, string) {
	cfg, rpt, err := c.in(sv)
	if sv.v == v360 || err != nil {
		if err != nil {
			return nil, rpt, fmt.Sprintf("does not parse as spec %s: %v", sv.v, err)
		}
		return cfg, rpt, ""
	}
	known := map[string]bool{}
	for _, e := range c.base.Entries {
		known[entryKey(e)] = true
	}
	for _, e := range rpt.Entries {
		if !known[entryKey(e)] {
			return nil, rpt, fmt.Sprintf("at %s: %s (spec %s)", e.Context, e.Message, sv.v)
		}
	}
	if p := c.unusedKey(sv); p != nil && p.Len() > 0 {
		return nil, rpt, fmt.Sprintf("at %s: unused key %v (spec %s)", *p, p.Path[p.Len()-1], sv.v)
	} else if p != nil {
		return nil, rpt, fmt.Sprintf("does not parse as spec %s", sv.v)
	}
	if up := sv.up(cfg); !reflect.DeepEqual(up, c.cfg) {
		// Equal configs are equal as JSON; unequal ones may differ only
		// in what the JSON leaves out (a nil and an empty list).
		back, err := canonicalOf(up)
		if err != nil {
			return nil, rpt, err.Error()
		}
		if p, same := diff(c.raw, back); !same {
			return nil, rpt, fmt.Sprintf("at %s: does not mean the same in spec %s", p, sv.v)
		}
	}
	return cfg, rpt, ""
}

func entryKey(e report.Entry) string {
	return e.Kind.String() + e.Context.String() + e.Message
}

// unusedKey returns the path of the first key in the config that is not
// a field of version sv's types, as Ignition's check for unused keys finds
// them (struct by struct, each struct's keys in sorted order), or nil.
func (c *config36) unusedKey(sv specVersion) *path.ContextPath {
	p := path.New("json")
	return unusedKey(c.tree, sv.config, &p)
}

func unusedKey(node any, t reflect.Type, p *path.ContextPath) *path.ContextPath {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// Where the JSON's shape is not the types' (null for a struct or a
	// list, say), Ignition's check gives up with a warning of its own:
	// reported like a key, which only sends a user config to Ignition's
	// parser.
	switch n := node.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct {
			return p
		}
		fields := flatten(t).fields
		var keys []string
		for k := range n {
			if !slices.ContainsFunc(fields, func(f flatField) bool { return f.name == k }) {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			slices.Sort(keys)
			q := p.Append(keys[0]).Copy()
			return &q
		}
		for _, f := range fields {
			if v, ok := n[f.name]; ok {
				q := p.Append(f.name)
				if found := unusedKey(v, f.typ, &q); found != nil {
					return found
				}
			}
		}
	case []any:
		if t.Kind() != reflect.Slice {
			return p
		}
		for i, e := range n {
			q := p.Append(i)
			if found := unusedKey(e, t.Elem(), &q); found != nil {
				return found
			}
		}
	default:
		if t.Kind() == reflect.Struct || t.Kind() == reflect.Slice {
			return p
		}
	}
	return nil
}

// parseChild is Ignition's v3_6.ParseCompatibleVersion for a user config:
// the config translated to spec 3.6.0, with the report of Ignition's
// parser for the config's own version. That parser builds a tree of the
// JSON's positions for its report, the most costly part of a parse, in
// vain when it has nothing to report; so a config is first decoded into
// its version's types as the parser decodes it, validated, and checked for
// unused keys, and only one that has something to report (or does not
// decode, or has a version Render does not know) goes through the parser,
// for its words and positions. The translation is Ignition's either way.
func parseChild(raw []byte) (t36.Config, report.Report, error) {
	if v, _, err := util.GetConfigVersion(raw); err == nil {
		if sv, ok := lookupVersion(v.String()); ok && !sv.legacy && sv.v == v {
			if cfg, err := sv.decode(raw, ""); err == nil && len(validateStruct(cfg).Entries) == 0 {
				p := path.New("json")
				if tree, err := decode(raw); err == nil && unusedKey(tree, sv.config, &p) == nil {
					return sv.up(cfg), report.Report{}, nil
				}
			}
		}
	}
	return v3_6.ParseCompatibleVersion(raw)
}
