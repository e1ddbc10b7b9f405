package cloudinit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// mergeBase is the generated side of most cases: a bit of every type.
const mergeBase = `#cloud-config
hostname: web-1
users:
  - default
  - name: alice
    groups: [adm]
runcmd:
  - [systemctl, daemon-reload]
  - echo generated
write_files:
  - path: /etc/motd
    content: hello
packages: [nginx]
timezone: UTC
nested:
  a: 1
  list: [x, y]
  s: abc
  sub: {k: v}
nothing: null
`

// mergeCases are user documents merged into mergeBase (or into their own
// base). Each is checked against cloud-init's CloudConfigPartHandler.
var mergeCases = []struct {
	name, base, overlay string
}{
	{name: "default replaces keys", overlay: "#cloud-config\nruncmd: [echo user]\npackages: [git]\nnew: 1\n"},
	{name: "empty", overlay: "#cloud-config\n"},
	{name: "null", overlay: "#cloud-config\n~\n"},
	{name: "comments only", overlay: "#cloud-config\n# nothing here\n"},
	{name: "list append", overlay: "#cloud-config\nmerge_how: 'list(append)+dict(no_replace,recurse_list)+str()'\nruncmd: [echo user]\npackages: [git]\n"},
	{name: "list prepend", overlay: "#cloud-config\nmerge_how: 'list(prepend)+dict(no_replace,recurse_list)+str()'\nruncmd: [echo user]\n"},
	{name: "list form", overlay: "#cloud-config\nmerge_how:\n  - name: list\n    settings: [append]\n  - name: dict\n    settings: [no_replace, recurse_list]\nruncmd: [echo user]\nusers: [{name: bob}]\n"},
	{name: "list form with dashes", overlay: "#cloud-config\nmerge_how:\n  - {name: m-list, settings: [append]}\n  - {name: ' dict ', settings: [recurse_array]}\nruncmd: [echo user]\n"},
	{name: "merge_type", overlay: "#cloud-config\nmerge_type: 'list(append)+dict(recurse_array)+str()'\nruncmd: [echo user]\n"},
	{name: "merge_how wins over merge_type", overlay: "#cloud-config\nmerge_how: 'dict(replace)+list()'\nmerge_type: 'list(append)+dict(recurse_array)'\nruncmd: [echo user]\n"},
	{name: "null merge_how falls back to merge_type", overlay: "#cloud-config\nmerge_how: null\nmerge_type: 'list(append)+dict(recurse_array)'\nruncmd: [echo user]\n"},
	{name: "empty merge_how is the default", overlay: "#cloud-config\nmerge_how: ''\nruncmd: [echo user]\n"},
	{name: "no_replace keeps ours", overlay: "#cloud-config\nmerge_how: 'dict(no_replace)+list()'\nhostname: other\nruncmd: [echo user]\nextra: 1\n"},
	{name: "recurse dict no_replace", overlay: "#cloud-config\nmerge_how: 'dict(no_replace)'\nnested: {a: 2, b: 3, sub: {k: w, j: x}}\n"},
	{name: "recurse dict replace", overlay: "#cloud-config\nmerge_how: 'dict(replace)'\nnested: {a: 2, b: 3}\n"},
	{name: "recurse_list replace lists by index", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_list)+list(replace)'\nnested: {list: [z]}\nruncmd: [a, b, c]\n"},
	{name: "list no_replace", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_list)+list(no_replace)'\nnested: {list: [z, w, v]}\n"},
	{name: "list replace recurse_dict", base: "#cloud-config\nusers: [{name: a, groups: [x]}, {name: b}]\n", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_list)+list(replace,recurse_dict)'\nusers: [{name: a2, shell: /bin/sh}]\n"},
	{name: "str append", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_str)+str(append)'\nnested: {s: def}\nhostname: '-x'\n"},
	{name: "str no append", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_str)+str()'\nnested: {s: def}\n"},
	{name: "str recurse into list", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_str)+list(append)+str()'\nruncmd: xyz\n"},
	{name: "list replaced by string", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_list,recurse_str)+list(replace)'\nruncmd: xyz\n"},
	{name: "allow_delete", overlay: "#cloud-config\nmerge_how: 'dict(allow_delete,no_replace)+list()'\ntimezone: null\nnested: {a: null}\n"},
	{name: "no dict merger ignores everything", overlay: "#cloud-config\nmerge_how: 'list(append)'\nruncmd: [echo user]\nnew: 1\n"},
	{name: "only str merger", overlay: "#cloud-config\nmerge_how: 'str(append)'\nhostname: x\n"},
	{name: "first dict merger wins", overlay: "#cloud-config\nmerge_how: 'dict(no_replace)+dict(replace)'\nhostname: x\n"},
	{name: "settings as a string", overlay: "#cloud-config\nmerge_how:\n  - {name: dict, settings: 'no_replace'}\nhostname: x\nnew: 2\n"},
	{name: "settings as a dict", overlay: "#cloud-config\nmerge_how:\n  - {name: dict, settings: {no_replace: 1, recurse_list: 1}}\n  - {name: list, settings: {append: x}}\nruncmd: [u]\n"},
	{name: "list entries as lists", overlay: "#cloud-config\nmerge_how: [[list, append], [dict, no_replace, recurse_list]]\nruncmd: [u]\n"},
	{name: "case and spaces", overlay: "#cloud-config\nmerge_how: ' LIST( Append ) + Dict(No-Replace , Recurse_List) '\nruncmd: [u]\n"},
	{name: "append a mapping to a list", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_dict)+list(append)'\nruncmd: {a: 1, b: 2}\n"},
	{name: "append a string to a list", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_str)+list(append)'\nruncmd: ab\n"},
	{name: "mapping into null", overlay: "#cloud-config\nmerge_how: 'dict(no_replace)'\nnothing: {a: 1}\n"},
	{name: "mapping into scalar", overlay: "#cloud-config\nmerge_how: 'dict(no_replace)'\ntimezone: {a: 1}\n"},
	{name: "scalars keep YAML 1.1 meaning", overlay: "#cloud-config\nflags: [yes, no, on, off, 0644, 1:20, 2024-01-02, ~, 0x1f, 1_000, .5, '0755', !!str 0600]\nmac: 52:54:00:12:34:56\n"},
	{name: "anchors and merge keys", overlay: "#cloud-config\nbase: &b {a: 1, b: 2}\nother:\n  <<: *b\n  b: 3\n  c: 4\nmulti:\n  <<: [{x: 1, y: 1}, {y: 2, z: 2}]\n  z: 3\nlist: &l [1, 2]\nagain: *l\n"},
	{name: "duplicate merge of same anchor", overlay: "#cloud-config\nd: &d {k: v}\nu: [*d, *d]\n"},
	{name: "equal keys collapse", overlay: "#cloud-config\n1: a\n1.0: b\ntrue: c\n0x1: d\nfoo: e\n'1': f\n"},
	{name: "bool keys replace ours", base: "#cloud-config\n'on': x\ntrue: y\n", overlay: "#cloud-config\non: z\n"},
	{name: "binary and timestamps", overlay: "#cloud-config\nwrite_files:\n  - path: /x\n    content: !!binary aGVsbG8=\nwhen: 2001-12-14 21:59:43.10 -5\n"},
	{name: "unicode and multi-line", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_str)+str(append)'\nhostname: \"J\\u00fcrgen\"\nbootcmd:\n  - |\n    echo one\n    echo two\n"},
	{name: "awkward block scalars", overlay: "#cloud-config\na: |\n\n  starts with a blank line\nb: |\n  x\n  \tsecond line starts with a tab\nc: >\n  folded\n  text\n\n   more indented\n  end\nd: |+\n  keep\n\n\ne: \"nel\\x85 ls\\u2028 cr\\r\\n\"\n"},
	{name: "flow style", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_list)+list(append)'\nruncmd: [[ls, -l], 'echo {x}']\n"},
	{name: "jsonish", overlay: "#cloud-config\n{\"runcmd\": [\"echo json\"], \"merge_how\": \"list(append)+dict(recurse_array)\"}\n"},

	// Cases cloud-init refuses (it skips the part); we must refuse them too.
	{name: "bad merge string", overlay: "#cloud-config\nmerge_how: 'list'\nruncmd: [x]\n"},
	{name: "unknown merger", overlay: "#cloud-config\nmerge_how: 'set(append)'\nruncmd: [x]\n"},
	{name: "dict entry without settings", overlay: "#cloud-config\nmerge_how: [{name: list}]\nruncmd: [x]\n"},
	{name: "string entry", overlay: "#cloud-config\nmerge_how: ['list(append)']\nruncmd: [x]\n"},
	{name: "append null to a list", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_list)+list(append)'\nruncmd: [x]\nnested: {list: null}\n"},
	{name: "append number to a list", base: "#cloud-config\na: [1]\n", overlay: "#cloud-config\nmerge_how: 'dict(recurse_str)+list(append)+str()'\na: '2'\n"},
	{name: "append list to string", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_list)+str(append)'\ntimezone: [x]\n"},
	{name: "mapping into list by index", overlay: "#cloud-config\nmerge_how: 'dict(no_replace,recurse_dict)+list(no_replace)'\nruncmd: {a: 1}\n"},
	{name: "not a mapping", overlay: "#cloud-config\n- a\n- b\n"},
	{name: "plain value tag", overlay: "#cloud-config\na: =\n"},
	{name: "python tag", overlay: "#cloud-config\na: !!python/object:os.system x\n"},
	{name: "two documents", overlay: "#cloud-config\na: 1\n---\nb: 2\n"},
}

// pyMerge runs cloud-init's own handler on (base, overlay) pairs. For each
// pair it returns the merged document (JSON of an order-preserving form)
// or the error cloud-init raises when it would skip the part.
const pyMerge = `
import json, sys, datetime
from cloudinit.handlers.cloud_config import CloudConfigPartHandler
from cloudinit import safeyaml

def canon(v):
    if isinstance(v, dict):
        return ["dict", [[canon(k), canon(x)] for k, x in v.items()]]
    if isinstance(v, list):
        return ["list", [canon(x) for x in v]]
    if isinstance(v, bool):
        return ["bool", v]
    if isinstance(v, (int, float)):
        return [type(v).__name__, repr(v)]
    if v is None or isinstance(v, str):
        return v
    return [type(v).__name__, repr(v)]

out = []
for base, overlay, ours in json.load(sys.stdin):
    h = CloudConfigPartHandler.__new__(CloudConfigPartHandler)
    h.cloud_buf = {}
    h._merge_part(base, {})
    res = {"base": canon(h.cloud_buf)}
    if ours is not None:
        # Our output, read back the way cloud-init reads user-data.
        h2 = CloudConfigPartHandler.__new__(CloudConfigPartHandler)
        h2.cloud_buf = {}
        try:
            safeyaml.load(ours)
            h2._merge_part(ours, {})
            res["ours"] = canon(h2.cloud_buf)
        except Exception as e:
            res["ours"] = "cloud-init cannot read our output: %r" % e
    # cloud-init's util.load_yaml turns a document it cannot load, or one
    # that is not a mapping, into None, and the handler then skips the part
    # as "empty cloud config": the user's data is silently ignored. vminit
    # refuses such documents instead, so they count as errors here.
    try:
        loaded = safeyaml.load(overlay)
    except Exception as e:
        loaded = e
    res["none"] = loaded is None
    if isinstance(loaded, Exception) or (loaded is not None and not isinstance(loaded, dict)):
        res["error"] = "cloud-init skips it: %r" % (loaded,)
        out.append(res)
        continue
    try:
        h._merge_part(overlay, {})
        res["merged"] = canon(h.cloud_buf)
    except ValueError as e:
        if "empty cloud config" in str(e):
            res["merged"] = canon(h.cloud_buf)
        else:
            res["error"] = repr(e)
    except Exception as e:
        res["error"] = repr(e)
    if "merged" in res:
        # A merge_type left in the merged dict means nothing to cloud-init's
        # modules; vminit drops it (see mergeDocs).
        buf = dict(h.cloud_buf)
        buf.pop("merge_how", None)
        buf.pop("merge_type", None)
        res["merged"] = canon(buf)
    out.append(res)
json.dump(out, sys.stdout)
`

// fuzzCorpus reads the overlays of a fuzzing corpus directory.
func fuzzCorpus(t *testing.T, dir string) []struct{ name, base, overlay string } {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []struct{ name, base, overlay string }
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		_, arg, _ := strings.Cut(string(data), "\nstring(")
		s, err := strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(arg), ")")))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out = append(out, struct{ name, base, overlay string }{"corpus " + e.Name(), "", s})
	}
	return out
}

type pyMergeResult struct {
	Base   any    `json:"base"`
	None   bool   `json:"none"`
	Merged any    `json:"merged"`
	Ours   any    `json:"ours"`
	Error  string `json:"error"`
}

func TestMergeMatchesCloudInit(t *testing.T) {
	cases := append(slices.Clone(mergeCases), fuzzCorpus(t, "testdata/fuzz/FuzzMerge")...)
	if dir := os.Getenv("VMINIT_FUZZ_CORPUS"); dir != "" {
		// Check a whole fuzzing cache against cloud-init:
		// VMINIT_FUZZ_CORPUS=$(go env GOCACHE)/fuzz/github.com/vminit/vminit/cloudinit/FuzzMerge
		cases = append(cases, fuzzCorpus(t, dir)...)
	}
	var in [][3]any
	var goErrs []error
	var sent []int // indexes into cases
	for i, c := range cases {
		base := c.base
		if base == "" {
			base = mergeBase
		}
		if !utf8.ValidString(c.overlay) {
			continue // not comparable: JSON carries it to Python altered
		}
		out, err := MergeCloudConfig([]byte(base), []byte(c.overlay))
		var ours any
		if err == nil {
			ours = string(out)
		}
		in = append(in, [3]any{base, c.overlay, ours})
		goErrs = append(goErrs, err)
		sent = append(sent, i)
	}
	var res []pyMergeResult
	cloudinittest.Run(t, pyMerge, in, &res)
	for i, ci := range sent {
		c, r := cases[ci], res[i]
		switch {
		case r.Error != "" && goErrs[i] == nil && fmt.Sprint(r.Ours) == fmt.Sprint(r.Base):
			// cloud-init skips the part and we keep the base unchanged
			// (yaml.v3 reads it as an empty document): the same result.
		case r.Error == "" && goErrs[i] != nil && r.None && strings.TrimSpace(c.overlay) != "":
			// PyYAML loads something it calls None (such as "! >"),
			// which cloud-init skips; we refuse it. Both ignore it.
		case r.Error != "" && goErrs[i] == nil && (strings.Contains(r.Error, "ParserError") || strings.Contains(r.Error, "ScannerError")):
			// yaml.v3 accepts some documents that PyYAML rejects (a tab
			// between tokens, a root mapping whose first key is indented
			// deeper than the next); cloud-init would skip such a part,
			// vminit applies it.
			t.Logf("%s: PyYAML rejects what yaml.v3 reads: %s", c.name, r.Error)
		case r.Error != "" && goErrs[i] == nil:
			t.Errorf("%s: cloud-init fails (%s) but we merged:\n%s", c.name, r.Error, in[i][2])
		case r.Error == "" && goErrs[i] != nil:
			t.Errorf("%s: cloud-init merges but we fail: %v", c.name, goErrs[i])
		case r.Error == "" && fmt.Sprint(r.Merged) != fmt.Sprint(r.Ours):
			t.Errorf("%s:\ncloud-init: %v\nours:       %v\nour document:\n%s", c.name, r.Merged, r.Ours, in[i][2])
		}
	}
}

func TestMergeErrorsNameTheProblem(t *testing.T) {
	for _, c := range []struct{ overlay, want string }{
		{"#cloud-config\nmerge_how: 'list'\n", `not in the form name(option,…)`},
		{"#cloud-config\nmerge_how: 'set(append)'\n", `unknown merger "set"`},
		{"#cloud-config\n- a\n", "must be a mapping"},
		{"#cloud-config\na: [\n", "not valid YAML"},
		{"#cloud-config\na: 1\n---\nb: 2\n", "more than one YAML document"},
	} {
		_, err := MergeCloudConfig([]byte(mergeBase), []byte(c.overlay))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.overlay, err, c.want)
		}
	}
}

func TestMergeBillionLaughs(t *testing.T) {
	doc := "#cloud-config\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := range 12 {
		name := fmt.Sprintf("l%d", i)
		doc += fmt.Sprintf("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = name
	}
	if _, err := MergeCloudConfig([]byte(mergeBase), []byte(doc)); err == nil || !strings.Contains(err.Error(), "aliases expand the document past") {
		t.Fatalf("got %v, want a refusal", err)
	}
}

func TestOverrides(t *testing.T) {
	base := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: dev}\nspec:\n  packages: [git]\n  timezone: UTC\n  commands: [echo hi]\n  cloudInit:\n    userData: |\n"
	for name, tc := range map[string]struct {
		userData string
		want     []string // keys reported
	}{
		"replaced":        {"#cloud-config\npackages: [make]\ntimezone: UTC\n", []string{"packages (user-data line 2)"}},
		"appended":        {"#cloud-config\nmerge_how: 'dict(recurse_array,no_replace)+list(append)'\npackages: [make]\nruncmd: [ls]\n", nil},
		"new keys only":   {"#cloud-config\nntp: {enabled: true}\n", nil},
		"runcmd replaced": {"#cloud-config\nruncmd: [ls]\n", []string{"runcmd (user-data line 2) replaces the runcmd that spec.commands"}},
		"script":          {"#!/bin/sh\necho hi\n", nil},
	} {
		t.Run(name, func(t *testing.T) {
			doc := base
			for _, l := range strings.SplitAfter(tc.userData, "\n") {
				if l != "" {
					doc += "      " + l
				}
			}
			inst := loadSpec(t, doc, nil)
			es, err := Overrides(inst)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != len(tc.want) {
				t.Fatalf("got %v, want %d reports", es, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(es[i].Message, w) || es[i].Field != "spec.cloudInit.userData" {
					t.Errorf("report %v lacks %q", es[i], w)
				}
			}
			if len(tc.want) == 0 {
				return
			}
			// What the report claims is what cloud-init does: the merged
			// user-data, read by cloud-init, lacks the spec's value.
			ud, err := UserData(inst)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			cloudinittest.Run(t, "import json, sys\nfrom cloudinit import util\nprint(json.dumps(util.load_yaml(json.load(sys.stdin))))", string(ud), &got)
			if strings.Contains(tc.want[0], "packages") && fmt.Sprint(got["packages"]) != "[make]" {
				t.Errorf("cloud-init reads packages %v", got["packages"])
			}
			if strings.Contains(tc.want[0], "runcmd") && fmt.Sprint(got["runcmd"]) != "[ls]" {
				t.Errorf("cloud-init reads runcmd %v", got["runcmd"])
			}
		})
	}
}
