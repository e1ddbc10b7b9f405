package cloudconfig

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/laughs"
	"github.com/vminit/vminit/spec"
)

// anchored uses anchors, aliases and merge keys in keys the spec takes
// (users, write_files, runcmd) and in keys it keeps as cloud-config (apt,
// x-user).
const anchored = `#cloud-config
x-user: &u {shell: /bin/bash, groups: [wheel], lock_passwd: true}
users:
  - <<: *u
    name: alice
  - {<<: *u, name: bob, shell: /bin/zsh}
write_files:
  - &motd {path: /etc/motd, content: &hello hello}
  - {<<: *motd, path: /etc/issue}
runcmd: [[echo, *hello]]
apt: {sources: {a: &src {source: "deb http://a.example x main"}, b: *src}}
`

// TestAnchorsAndMergeKeys: a cloud-config with anchors, aliases and "<<"
// converts to a spec that loads, and whose user-data cloud-init reads as
// it reads the original: the aliases and merge keys are resolved as
// PyYAML resolves them, not copied without their anchors.
func TestAnchorsAndMergeKeys(t *testing.T) {
	inst, _, err := ToSpec([]byte(anchored), Options{For: ForSpec})
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(inst) // what vminit convert --to spec writes
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := spec.Parse(out, "")
	if err != nil {
		t.Fatalf("the converted spec does not load: %v\n%s", err, out)
	}
	ud, err := cloudinit.UserData(loaded)
	if err != nil {
		t.Fatal(err)
	}
	const read = "import json, sys\nfrom cloudinit import util\nprint(json.dumps(util.load_yaml(json.load(sys.stdin)), sort_keys=True, default=str))"
	var orig, got map[string]any
	cloudinittest.Run(t, read, anchored, &orig)
	cloudinittest.Run(t, read, string(ud), &got)
	for _, k := range []string{"x-user", "apt", "runcmd"} {
		if a, b := jsonOf(orig[k]), jsonOf(got[k]); a != b {
			t.Errorf("%s: cloud-init reads %s from the original, %s from the converted spec", k, a, b)
		}
	}
	files := map[string]string{}
	for _, f := range loaded.Spec.Files {
		files[f.Path] = string(f.Data())
	}
	if files["/etc/motd"] != "hello" || files["/etc/issue"] != "hello" {
		t.Errorf("files %v", files)
	}
	users := map[string]spec.User{}
	for _, u := range loaded.Spec.Users {
		users[u.Name] = u
	}
	if a, b := users["alice"], users["bob"]; a.Shell != "/bin/bash" || b.Shell != "/bin/zsh" || strings.Join(b.Groups, ",") != "wheel" {
		t.Errorf("users %+v", loaded.Spec.Users)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestConvertLaughs: the issue's 1 GB of aliases is refused naming the
// alias's line, before any key is converted.
func TestConvertLaughs(t *testing.T) {
	for _, target := range []Target{ForSpec, ForIgnition} {
		_, _, err := ToSpec([]byte(laughs.Issue()), Options{For: target})
		var be *yamlbound.Error
		if !errors.As(err, &be) || be.Line != 4 || be.Path != "bootcmd[0]" {
			t.Errorf("target %d: %v", target, err)
		}
	}
}
