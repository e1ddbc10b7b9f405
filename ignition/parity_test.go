package ignition

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/spec"
)

// node is a file as a renderer asks for it.
type node struct {
	mode   string
	owner  string
	data   string
	append bool
}

// ignitionTree is what an Ignition config writes: its files, plus its
// units and drop-ins where systemd reads them.
func ignitionTree(t *testing.T, config []byte) (map[string]node, map[string]map[string]any, map[string]string) {
	t.Helper()
	var cfg struct {
		Passwd struct {
			Users []map[string]any `json:"users"`
		} `json:"passwd"`
		Storage struct {
			Links []struct {
				Path, Target string
			} `json:"links"`
			Files []struct {
				Path     string `json:"path"`
				Mode     int    `json:"mode"`
				User     struct{ Name string }
				Group    struct{ Name string }
				Contents struct {
					Source      string `json:"source"`
					Compression string `json:"compression"`
				} `json:"contents"`
				Append []struct {
					Source      string `json:"source"`
					Compression string `json:"compression"`
				} `json:"append"`
			} `json:"files"`
		} `json:"storage"`
		Systemd struct {
			Units []struct {
				Name     string `json:"name"`
				Contents string `json:"contents"`
				Dropins  []struct{ Name, Contents string }
			} `json:"units"`
		} `json:"systemd"`
	}
	if err := json.Unmarshal(config, &cfg); err != nil {
		t.Fatal(err)
	}
	tree := map[string]node{}
	for _, f := range cfg.Storage.Files {
		owner := "root:root"
		if f.User.Name != "" || f.Group.Name != "" {
			owner = f.User.Name + ":" + f.Group.Name
		}
		n := node{mode: fmt.Sprintf("%04o", f.Mode), owner: owner}
		if len(f.Append) > 0 {
			n.append = true
			for _, a := range f.Append {
				n.data += decodeDataURL(t, a.Source, a.Compression)
			}
		} else {
			n.data = decodeDataURL(t, f.Contents.Source, f.Contents.Compression)
		}
		tree[f.Path] = n
	}
	for _, u := range cfg.Systemd.Units {
		if u.Contents != "" {
			tree["/etc/systemd/system/"+u.Name] = node{mode: "0644", owner: "root:root", data: u.Contents}
		}
		for _, d := range u.Dropins {
			tree["/etc/systemd/system/"+u.Name+".d/"+d.Name] = node{mode: "0644", owner: "root:root", data: d.Contents}
		}
	}
	users := map[string]map[string]any{}
	for _, u := range cfg.Passwd.Users {
		users[u["name"].(string)] = u
	}
	links := map[string]string{}
	for _, l := range cfg.Storage.Links {
		links[l.Path] = l.Target
	}
	return tree, users, links
}

func decodeDataURL(t *testing.T, src, compression string) string {
	t.Helper()
	var raw []byte
	switch {
	case strings.HasPrefix(src, "data:;base64,"):
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(src, "data:;base64,"))
		if err != nil {
			t.Fatal(err)
		}
		raw = b
	case strings.HasPrefix(src, "data:,"):
		s, err := url.PathUnescape(strings.TrimPrefix(src, "data:,"))
		if err != nil {
			t.Fatal(err)
		}
		raw = []byte(s)
	default:
		t.Fatalf("not a data URL: %.40s", src)
	}
	if compression == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ = io.ReadAll(zr)
	}
	return string(raw)
}

// paritySpecs are the specs whose two renderings are compared.
var paritySpecs = []string{
	"../examples/fcos-server.yaml", "../examples/ubuntu-server/instance.yaml", "../examples/dev-vm.yaml",
	"testdata/specs/users.yaml", "testdata/specs/files.yaml", "testdata/specs/system.yaml",
	"../examples/data-disk.yaml", // the mount and swap units
}

// TestParityWithCloudInit checks that, for the features both agents
// share, the Ignition config asks for the same guest state as the
// cloud-init rendering of the same spec: every file cloud-init's
// write_files writes, units and mount units included (content, mode,
// owner); the users with their groups, shells, home directories, system
// flag, keys, password and lock, and sudo rights; the hostname; the time
// zone; and the commands and boot commands, in order.
func TestParityWithCloudInit(t *testing.T) {
	for _, p := range paritySpecs {
		t.Run(p, func(t *testing.T) {
			inst := load(t, p)
			cc, err := cloudinit.CloudConfig(inst)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Hostname   string `yaml:"hostname"`
				Timezone   string `yaml:"timezone"`
				WriteFiles []struct {
					Path, Permissions, Owner, Content, Encoding string
					Append                                      bool
				} `yaml:"write_files"`
				Users   []any `yaml:"users"`
				BootCmd []any `yaml:"bootcmd"`
				RunCmd  []any `yaml:"runcmd"`
			}
			if err := yaml.Unmarshal(cc, &doc); err != nil {
				t.Fatal(err)
			}
			res, err := Render(inst, Options{AllowPartial: true})
			if err != nil {
				t.Fatal(err)
			}
			tree, users, links := ignitionTree(t, res.Config)
			for _, wf := range doc.WriteFiles {
				data := wf.Content
				if wf.Encoding == "b64" {
					b, _ := base64.StdEncoding.DecodeString(wf.Content)
					data = string(b)
				}
				owner := wf.Owner
				if owner == "" {
					owner = "root:root"
				}
				if !strings.Contains(owner, ":") {
					owner += ":"
				}
				got, ok := tree[wf.Path]
				switch {
				case !ok:
					t.Errorf("%s: written by cloud-init, not by Ignition", wf.Path)
				case got.data != data:
					t.Errorf("%s: contents differ:\ncloud-init %q\nIgnition   %q", wf.Path, data, got.data)
				case got.mode != wf.Permissions || got.owner != owner:
					t.Errorf("%s: cloud-init %s %s, Ignition %s %s", wf.Path, wf.Permissions, owner, got.mode, got.owner)
				case got.append != wf.Append:
					t.Errorf("%s: append: cloud-init %v, Ignition %v", wf.Path, wf.Append, got.append)
				}
			}
			if h := tree["/etc/hostname"].data; doc.Hostname != "" && h != doc.Hostname+"\n" {
				t.Errorf("hostname: cloud-init %q, Ignition /etc/hostname %q", doc.Hostname, h)
			}
			if doc.Timezone != "" && links["/etc/localtime"] != "../usr/share/zoneinfo/"+doc.Timezone {
				t.Errorf("timezone: cloud-init %q, Ignition /etc/localtime -> %q", doc.Timezone, links["/etc/localtime"])
			}
			ccUsers := map[string]map[string]any{}
			for _, u := range doc.Users {
				if m, ok := u.(map[string]any); ok {
					ccUsers[fmt.Sprint(m["name"])] = m
				}
			}
			for _, u := range inst.Spec.Users {
				iu, ok := users[u.Name]
				cu := ccUsers[u.Name]
				if !ok || cu == nil {
					t.Errorf("user %s: cloud-init %v, Ignition %v", u.Name, cu, iu)
					continue
				}
				for _, k := range [][2]string{{"groups", "groups"}, {"shell", "shell"}, {"homeDir", "homedir"}, {"gecos", "gecos"}, {"primaryGroup", "primary_group"}, {"system", "system"}} {
					if a, b := fmt.Sprint(iu[k[0]]), fmt.Sprint(cu[k[1]]); a != b && !(a == "<nil>" && b == "false") {
						t.Errorf("user %s: Ignition %s %s, cloud-init %s %s", u.Name, k[0], a, k[1], b)
					}
				}
				ikeys := toStrings(iu["sshAuthorizedKeys"])
				if u.Name == DefaultUser {
					ikeys = ikeys[len(inst.Spec.SSHAuthorizedKeys):] // meta-data's, in cloud-init
				}
				if strings.Join(ikeys, "\n") != strings.Join(toStrings(cu["ssh_authorized_keys"]), "\n") {
					t.Errorf("user %s: keys differ: Ignition %v, cloud-init %v", u.Name, ikeys, cu["ssh_authorized_keys"])
				}
				// Password and lock: cloud-init sets hashed_passwd and then
				// runs passwd -l, which prefixes "!"; Ignition gets the
				// result directly.
				hash, _ := iu["passwordHash"].(string)
				locked := strings.HasPrefix(hash, "!")
				if locked != (cu["lock_passwd"] == true) || strings.TrimPrefix(hash, "!") != fmt.Sprint(orEmpty(cu["hashed_passwd"])) {
					t.Errorf("user %s: Ignition passwordHash %q, cloud-init hashed_passwd %v lock_passwd %v", u.Name, hash, cu["hashed_passwd"], cu["lock_passwd"])
				}
				if s, _ := cu["sudo"].(string); s != "" && tree["/etc/sudoers.d/vminit-"+u.Name].data != u.Name+" "+s+"\n" {
					t.Errorf("user %s: sudo rule %q missing from Ignition", u.Name, s)
				}
			}
			checkCommands(t, "bootcmd", doc.BootCmd, tree[BootScript].data)
			// runcmd starts with the systemctl calls that Ignition's
			// presets replace; the spec's commands follow.
			run := doc.RunCmd[len(doc.RunCmd)-min(len(doc.RunCmd), len(inst.Spec.Commands)):]
			checkCommands(t, "runcmd", run, tree[FirstBootScript].data)
		})
	}
}

// checkCommands compares cloud-init's bootcmd or runcmd entries with the
// lines of the script Ignition's unit runs, as cloud-init's shellify would
// write them.
func checkCommands(t *testing.T, key string, ccCmds []any, script string) {
	t.Helper()
	var want []string
	for _, c := range ccCmds {
		switch c := c.(type) {
		case string:
			want = append(want, strings.TrimRight(c, "\n"))
		case []any:
			args := make([]string, len(c))
			for i, a := range c {
				args[i] = spec.ShellQuote(fmt.Sprint(a))
			}
			want = append(want, strings.Join(args, " "))
		}
	}
	var got []string
	lines := strings.Split(script, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "# spec.") {
			continue
		}
		var cmd []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "vminit_check "); i++ {
			cmd = append(cmd, lines[i])
		}
		got = append(got, strings.TrimRight(strings.Join(cmd, "\n"), "\n"))
	}
	if strings.Join(got, "\n---\n") != strings.Join(want, "\n---\n") {
		t.Errorf("%s: cloud-init\n%q\nIgnition script\n%q", key, want, got)
	}
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = fmt.Sprint(e)
	}
	return out
}
