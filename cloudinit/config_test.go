package cloudinit

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

const minimalSpec = `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: dev
spec:
  sshAuthorizedKeys:
    - ` + keyAlice + `
`

func TestCloudConfigPassesSchema(t *testing.T) {
	for name, doc := range map[string]string{"full": fullSpec, "minimal": minimalSpec} {
		inst := loadSpec(t, doc, nil)
		cc, err := CloudConfig(inst)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(cc), "#cloud-config\n") {
			t.Errorf("%s: no #cloud-config header:\n%s", name, cc)
		}
		if err := cloudinittest.Schema(t, cc); err != nil {
			t.Errorf("%s: %v\n%s", name, err, cc)
		}
	}
}

// TestCloudConfigMeaning reads the generated document with cloud-init's
// loader and checks what cloud-init will act on.
func TestCloudConfigMeaning(t *testing.T) {
	inst := loadSpec(t, fullSpec, nil)
	cc, err := CloudConfig(inst)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Keys  []string         `json:"keys"`
		Doc   map[string]any   `json:"doc"`
		Files []map[string]any `json:"files"`
		Users []any            `json:"users"`
	}
	cloudinittest.Run(t, `
import json, sys, base64
from cloudinit import util
from cloudinit.config import cc_write_files
doc = util.load_yaml(json.load(sys.stdin))
files = []
for f in doc.get("write_files", []):
    data = cc_write_files.extract_contents(f.get("content", ""), cc_write_files.canonicalize_extraction(f.get("encoding")))
    if isinstance(data, str):
        data = data.encode("utf-8")
    files.append({"path": f["path"], "data": base64.b64encode(data).decode(),
                  "mode": cc_write_files.decode_perms(f.get("permissions"), 0o644),
                  "owner": list(util.extract_usergroup(f.get("owner", "root:root"))),
                  "append": util.get_cfg_option_bool(f, "append"), "defer": util.get_cfg_option_bool(f, "defer")})
json.dump({"keys": list(doc), "doc": doc, "files": files, "users": doc["users"]}, sys.stdout)
`, string(cc), &got)

	wantKeys := []string{"hostname", "fqdn", "prefer_fqdn_over_hostname", "manage_etc_hosts", "groups", "users", "write_files", "timezone", "packages", "bootcmd", "runcmd"}
	if strings.Join(got.Keys, ",") != strings.Join(wantKeys, ",") {
		t.Errorf("key order %v, want %v", got.Keys, wantKeys)
	}

	// Every spec file arrives byte for byte, with its mode and owner.
	byPath := map[string]map[string]any{}
	for _, f := range got.Files {
		byPath[f["path"].(string)] = f
	}
	for _, f := range inst.Spec.Files {
		g := byPath[f.Path]
		if g == nil {
			t.Errorf("%s: not written", f.Path)
			continue
		}
		if data, _ := base64.StdEncoding.DecodeString(g["data"].(string)); string(data) != string(f.Data()) {
			t.Errorf("%s: cloud-init writes %q, want %q", f.Path, data, f.Data())
		}
		mode := 0o644
		if f.Mode != nil {
			mode = int(*f.Mode)
		}
		if int(g["mode"].(float64)) != mode {
			t.Errorf("%s: mode %o, want %o", f.Path, int(g["mode"].(float64)), mode)
		}
		if g["append"] != f.Append {
			t.Errorf("%s: append %v", f.Path, g["append"])
		}
		wantDefer := f.Owner != "" && f.Owner != "root:root" && f.Owner != "root"
		if g["defer"] != wantDefer {
			t.Errorf("%s: defer %v, want %v", f.Path, g["defer"], wantDefer)
		}
	}
	if g := byPath["/srv/app/env"]; g != nil && strings.Join(toStrings(g["owner"]), ":") != "deploy:apps" {
		t.Errorf("owner %v", g["owner"])
	}
	// Units, drop-ins and mounts land where systemd reads them.
	for _, p := range []string{
		"/etc/systemd/system/app.service",
		"/etc/systemd/system/app.service.d/10-env.conf",
		"/etc/systemd/system/nginx.service.d/10-restart.conf",
		"/etc/systemd/system/srv-data.mount",
		`/etc/systemd/system/home-shared\x2dnfs.mount`,
	} {
		if byPath[p] == nil {
			t.Errorf("%s: not written", p)
		}
	}
	if byPath["/etc/systemd/system/nginx.service"] != nil || byPath["/etc/systemd/system/apt-daily.timer"] != nil {
		t.Error("a unit without content was written")
	}

	// The default user comes first, then the spec's users in order.
	if len(got.Users) != 3 || got.Users[0] != "default" {
		t.Fatalf("users = %v", got.Users)
	}
	alice := got.Users[1].(map[string]any)
	if alice["name"] != "alice" || alice["hashed_passwd"] != hashAlice || alice["lock_passwd"] != false || alice["sudo"] != "ALL=(ALL) NOPASSWD:ALL" {
		t.Errorf("alice = %v", alice)
	}
	if keys := toStrings(alice["ssh_authorized_keys"]); len(keys) != 2 || keys[0] != keyAlice || keys[1] != keyBob {
		t.Errorf("alice's keys = %v", keys)
	}
	deploy := got.Users[2].(map[string]any)
	if deploy["system"] != true || deploy["lock_passwd"] != true || deploy["primary_group"] != "apps" || deploy["homedir"] != "/srv/app" {
		t.Errorf("deploy = %v", deploy)
	}
	if g := toStrings(got.Doc["groups"]); len(g) != 1 || g[0] != "apps" {
		t.Errorf("groups = %v", got.Doc["groups"])
	}

	// runcmd: systemd first, then the spec's commands, argv kept as lists
	// and strings that look like YAML 1.1 scalars kept as strings.
	run := got.Doc["runcmd"].([]any)
	wantRun := []string{
		"systemctl daemon-reload",
		"systemctl enable --now srv-data.mount",
		`systemctl enable --now home-shared\x2dnfs.mount`,
		"systemctl enable --now --no-block app.service",
		"systemctl disable --now --no-block apt-daily.timer",
		"systemctl restart nginx",
	}
	for i, w := range wantRun {
		if i >= len(run) || strings.Join(toStrings(run[i]), " ") != w {
			t.Errorf("runcmd[%d] = %v, want %s", i, run[min(i, len(run)-1)], w)
		}
	}
	if s, ok := run[6].(string); !ok || !strings.HasPrefix(s, `echo "first boot done`) {
		t.Errorf("runcmd[6] = %#v", run[6])
	}
	if a := toStrings(run[7]); strings.Join(a, "|") != "echo|it's|a b|$HOME|yes|0644" {
		t.Errorf("runcmd[7] = %#v", run[7])
	}
	if got.Doc["manage_etc_hosts"] != "localhost" || got.Doc["prefer_fqdn_over_hostname"] != false {
		t.Errorf("hostname handling: %v %v", got.Doc["manage_etc_hosts"], got.Doc["prefer_fqdn_over_hostname"])
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, len(l))
	for i, x := range l {
		out[i], _ = x.(string)
	}
	return out
}

// TestCloudInitMountsDropsLabels documents why spec.mounts become systemd
// mount units rather than cloud-init's mounts module: in cloud-init 22.4
// that module silently skips LABEL= and UUID= devices (and any device that
// is not a whole disk present when it runs).
func TestCloudInitMountsDropsLabels(t *testing.T) {
	var got map[string]any
	cloudinittest.Run(t, `
import json, sys, logging
from cloudinit.config import cc_mounts
log = logging.getLogger()
json.dump({d: cc_mounts.sanitize_devname(d, lambda x: None, log) for d in json.load(sys.stdin)}, sys.stdout)
`, []string{"LABEL=data", "UUID=0a1b2c3d", "nas:/export"}, &got)
	if got["LABEL=data"] != nil || got["UUID=0a1b2c3d"] != nil {
		t.Skipf("this cloud-init mounts LABEL=/UUID= devices (%v); mount units are still correct", got)
	}
	if got["nas:/export"] != "nas:/export" {
		t.Errorf("network device: %v", got)
	}
}

func TestCloudConfigErrors(t *testing.T) {
	doc := strings.Replace(minimalSpec, "spec:\n", `spec:
  files:
    - path: /etc/systemd/system/app.service
      content: x
    - path: /srv/x
      content: y
  units:
    - name: app.service
      content: "[Unit]\n"
  mounts:
    - device: /dev/vdb
      path: /srv/data
  `+"\n", 1)
	doc = strings.Replace(doc, "  \n", "", 1)
	inst := loadSpec(t, doc, nil)
	// spec.Validate refuses numeric owners as well; the renderer checks
	// again for instances built in Go.
	inst.Spec.Files[1].Owner = "1000:1000"
	_, err := CloudConfig(inst)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`spec.files[1].owner: "1000:1000": cloud-init's write_files resolves owners by name`,
		"spec.units[0].name: /etc/systemd/system/app.service is already written by spec.files[0].path",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}
