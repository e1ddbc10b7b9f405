package cloudinit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// schemaCases are #cloud-config documents with and without schema
// problems; TestCheckSchemaMatchesCloudInit holds CheckSchema to cloud-init's
// own validator on each.
var schemaCases = map[string]string{
	"issue":         "#cloud-config\npackages: notalist\nruncmd: 5\nssh_pwauth: maybe\n",
	"valid":         "#cloud-config\npackages: [git, [make, \"4.3\"]]\nruncmd:\n  - echo hi\n  - [ls, -l]\nssh_pwauth: true\n",
	"yaml11-bool":   "#cloud-config\nssh_pwauth: yes\npackage_update: on\n",
	"unknown-keys":  "#cloud-config\nno_such_module: 1\nhostname: web\n",
	"octal-mode":    "#cloud-config\nwrite_files:\n  - path: /x\n    permissions: 0644\n    content: hi\n",
	"binary":        "#cloud-config\nwrite_files:\n  - path: /x\n    content: !!binary aGVsbG8=\n",
	"users":         "#cloud-config\nusers:\n  - default\n  - name: bob\n    sudo: false\n    lock-passwd: true\n    groups: [a, b]\n  - name: carol\n    sudo: ALL=(ALL) ALL\n    ssh_authorized_keys: notalist\n",
	"users-string":  "#cloud-config\nusers: bob, carol\n",
	"user-bad-key":  "#cloud-config\nusers:\n  - name: bob\n    no_such: 1\n",
	"date":          "#cloud-config\nusers:\n  - name: bob\n    expiredate: 2024-01-02\n  - name: carol\n    expiredate: '2024-01-02'\n  - name: dave\n    expiredate: 'tomorrow'\n",
	"mounts":        "#cloud-config\nmounts:\n  - [/dev/vdb, /data, ext4]\n  - /dev/vdc\n",
	"apt":           "#cloud-config\napt:\n  preserve_sources_list: maybe\n  sources:\n    x:\n      source: deb http://example.com/ stable main\n",
	"ntp":           "#cloud-config\nntp:\n  enabled: true\n  servers: pool.example.com\n",
	"chpasswd":      "#cloud-config\nchpasswd:\n  expire: false\n  list: |\n    root:x\n",
	"power-state":   "#cloud-config\npower_state:\n  mode: sideways\n  delay: now\n",
	"nested-oneof":  "#cloud-config\nbootcmd:\n  - [echo, 1]\n  - 2\n",
	"runcmd-null":   "#cloud-config\nruncmd: null\n",
	"timezone-num":  "#cloud-config\ntimezone: 5\n",
	"ca-certs-old":  "#cloud-config\nca-certs:\n  trusted: [x]\n",
	"growpart":      "#cloud-config\ngrowpart:\n  mode: off\n  devices: [/]\n",
	"resize-rootfs": "#cloud-config\nresize_rootfs: noblock\n",
	"final-message": "#cloud-config\nfinal_message: 5\n",
	"snap":          "#cloud-config\nsnap:\n  commands: [x]\n",
	"disk-setup":    "#cloud-config\ndisk_setup:\n  /dev/vdb:\n    table_type: gpt\n    layout: true\n    overwrite: maybe\n",
	"fs-setup":      "#cloud-config\nfs_setup:\n  - label: data\n    filesystem: ext4\n    device: /dev/vdb\n    partition: auto\n",
	"empty":         "#cloud-config\n",
	"anchors":       "#cloud-config\nx: &k [a, b]\npackages: *k\nruncmd: *k\n",
	// Draft 4 integers are Python ints: 1.0 is a float, not an integer.
	"float-integer": "#cloud-config\npower_state:\n  mode: reboot\n  delay: 1.0\n",
	"float-nan":     "#cloud-config\npower_state:\n  mode: reboot\n  delay: .nan\n",
	// Values YAML loads as Python objects fail every type, nothing else.
	"dates":  "#cloud-config\ntimezone: 2024-01-02\nntp:\n  servers: [2024-01-02, 2024-01-02]\nruncmd: [2024-01-02 10:00:00]\n",
	"unique": "#cloud-config\nntp:\n  servers: [1, 1.0]\n  pools: [[1], [1.0], a]\nsnap:\n  assertions: [a, b, a]\n",
}

// TestCheckSchemaMatchesCloudInit runs each case through cloud-init's own
// schema validator (validate_cloudconfig_schema with strict=True, as
// `cloud-init schema` does) and compares the locations of its errors and
// deprecations with CheckSchema's.
func TestCheckSchemaMatchesCloudInit(t *testing.T) {
	docs := map[string]string{}
	for name, doc := range schemaCases {
		docs[name] = doc
	}
	// The fuzz corpus's documents too: what the fuzzer found interesting.
	for _, f := range corpusDocs(t, "FuzzCheckSchema") {
		docs[filepath.Base(f.name)] = f.doc
	}
	matchCloudInit(t, docs)
}

// TestCheckSchemaMatchesCloudInitGenerated: the same on documents
// generated from the schema (docGen), which reach every module's keys.
func TestCheckSchemaMatchesCloudInitGenerated(t *testing.T) {
	matchCloudInit(t, generatedDocs(t, 400))
}

// matchCloudInit compares CheckSchema's findings on each document with
// those of cloud-init's validator.
func matchCloudInit(t *testing.T, docs map[string]string) {
	var oracle map[string]struct {
		Errors       []string `json:"errors"`
		Deprecations []string `json:"deprecations"`
		Skip         string   `json:"skip"`
	}
	cloudinittest.Run(t, pySchema, docs, &oracle)
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			want := oracle[name]
			findings, err := CheckSchema([]byte(doc))
			if want.Skip != "" {
				if err == nil {
					t.Errorf("cloud-init cannot load it (%s), CheckSchema could: %v", want.Skip, findings)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckSchema: %v (cloud-init loads it)", err)
			}
			var errs, deps []string
			for _, f := range findings {
				if f.Deprecated {
					deps = append(deps, f.Path)
				} else {
					errs = append(errs, f.Path)
				}
			}
			if !samePaths(errs, want.Errors) || !samePaths(deps, want.Deprecations) {
				t.Errorf("document:\n%s\nvminit:     errors %q deprecations %q\ncloud-init: errors %q deprecations %q\nfindings: %v",
					doc, errs, deps, want.Errors, want.Deprecations, findings)
			}
		})
	}
}

// samePaths compares sets of locations, written "users[0].sudo" by vminit
// and "users.0.sudo" by cloud-init. Where a value matches none of a
// oneOf's forms, cloud-init names the value and vminit may name the key
// inside it that is wrong: each path must be one of the other side's or
// lie under it.
func samePaths(ours, theirs []string) bool {
	dotted := func(p string) string { return strings.NewReplacer("[", ".", "]", "").Replace(p) }
	under := func(p, parent string) bool {
		return p == parent || parent == "" || strings.HasPrefix(p, parent+".")
	}
	for _, o := range ours {
		if !slices.ContainsFunc(theirs, func(t string) bool { return under(dotted(o), t) }) {
			return false
		}
	}
	for _, t := range theirs {
		if !slices.ContainsFunc(ours, func(o string) bool { return under(dotted(o), t) }) {
			return false
		}
	}
	return true
}

const pySchema = `
import json, sys
from cloudinit import safeyaml
from cloudinit.config.schema import validate_cloudconfig_schema, SchemaValidationError
out = {}
for name, doc in json.load(sys.stdin).items():
    # util.load_yaml's loader, without its fallback to "no config" on a
    # YAML error: such a document is one CheckSchema must refuse.
    try:
        cfg = safeyaml.load(doc)
    except Exception as e:
        out[name] = {"skip": str(e)}
        continue
    if cfg is None:
        out[name] = {"errors": [], "deprecations": []}
        continue
    if not isinstance(cfg, dict):
        out[name] = {"skip": "not a mapping"}
        continue
    try:
        validate_cloudconfig_schema(cfg, strict=True, log_details=False)
        out[name] = {"errors": [], "deprecations": []}
    except SchemaValidationError as e:
        out[name] = {"errors": [p.path for p in e.schema_errors], "deprecations": [p.path for p in e.schema_deprecations]}
json.dump(out, sys.stdout)
`

// TestCheckSchemaLines: findings carry the line of the key they name.
func TestCheckSchemaLines(t *testing.T) {
	findings, err := CheckSchema([]byte(schemaCases["issue"]))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(findings)
	for _, want := range []string{"packages (line 2)", "runcmd (line 3)", "ssh_pwauth (line 4): deprecated"} {
		if !strings.Contains(got, want) {
			t.Errorf("findings %s lack %q", got, want)
		}
	}
}

// TestCheckSchemaPythonObjects: a value cloud-init's loader reads as a
// date (or another Python object) is reported as such, with the advice to
// quote it, at its own key.
func TestCheckSchemaPythonObjects(t *testing.T) {
	findings, err := CheckSchema([]byte(schemaCases["dates"]))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(findings)
	for _, want := range []string{
		"timezone (line 2): cloud-init's YAML loader reads this unquoted value as a date, which no form here accepts: quote it",
		"ntp.servers[0] (line 4): cloud-init's YAML loader reads this unquoted value as a date,",
		"runcmd[0] (line 5): cloud-init's YAML loader reads this unquoted value as a date and time,",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("findings %s lack %q", got, want)
		}
	}
}

func FuzzCheckSchema(f *testing.F) {
	for _, doc := range schemaCases {
		f.Add(doc)
	}
	for _, doc := range generatedDocs(f, 40) {
		f.Add(doc)
	}
	// It must not panic or hang, and must find what jsonschema/v6 found.
	f.Fuzz(func(t *testing.T, doc string) {
		compareWithV6(t, doc)
	})
}

type corpusDoc struct{ name, doc string }

// corpusDocs reads the committed fuzz corpus of a target (string inputs).
func corpusDocs(t *testing.T, target string) []corpusDoc {
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	var out []corpusDoc
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(b), "\n", 2)
		if len(lines) < 2 {
			continue
		}
		var s string
		if _, err := fmt.Sscanf(strings.TrimSpace(lines[1]), "string(%q)", &s); err == nil {
			out = append(out, corpusDoc{f, s})
		}
	}
	return out
}
