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
	mode  string
	owner string
	data  string
}

// ignitionTree is what an Ignition config writes: its files, plus its
// units and drop-ins where systemd reads them.
func ignitionTree(t *testing.T, config []byte) (map[string]node, map[string]map[string]any) {
	t.Helper()
	var cfg struct {
		Passwd struct {
			Users []map[string]any `json:"users"`
		} `json:"passwd"`
		Storage struct {
			Files []struct {
				Path     string `json:"path"`
				Mode     int    `json:"mode"`
				User     struct{ Name string }
				Group    struct{ Name string }
				Contents struct {
					Source      string `json:"source"`
					Compression string `json:"compression"`
				} `json:"contents"`
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
		tree[f.Path] = node{mode: fmt.Sprintf("%04o", f.Mode), owner: owner, data: decodeDataURL(t, f.Contents.Source, f.Contents.Compression)}
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
	return tree, users
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

// TestParityWithCloudInit checks that, for the features both agents
// share, the Ignition config asks for the same guest state as the
// cloud-init rendering of the same spec: every file cloud-init's
// write_files writes (content, mode, owner), the users with their groups,
// shells, keys and sudo rights, the hostname and the time zone.
func TestParityWithCloudInit(t *testing.T) {
	for _, p := range []string{"../examples/fcos-server.yaml", "../examples/ubuntu-server/instance.yaml", "../examples/dev-vm.yaml"} {
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
				} `yaml:"write_files"`
				Users []any `yaml:"users"`
			}
			if err := yaml.Unmarshal(cc, &doc); err != nil {
				t.Fatal(err)
			}
			res, err := Render(inst, Options{AllowPartial: true})
			if err != nil {
				t.Fatal(err)
			}
			tree, users := ignitionTree(t, res.Config)
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
				got, ok := tree[wf.Path]
				switch {
				case !ok:
					t.Errorf("%s: written by cloud-init, not by Ignition", wf.Path)
				case got.data != data:
					t.Errorf("%s: contents differ:\ncloud-init %q\nIgnition   %q", wf.Path, data, got.data)
				case got.mode != wf.Permissions || got.owner != owner:
					t.Errorf("%s: cloud-init %s %s, Ignition %s %s", wf.Path, wf.Permissions, owner, got.mode, got.owner)
				}
			}
			if h := tree["/etc/hostname"].data; doc.Hostname != "" && h != doc.Hostname+"\n" {
				t.Errorf("hostname: cloud-init %q, Ignition /etc/hostname %q", doc.Hostname, h)
			}
			for _, u := range inst.Spec.Users {
				iu, ok := users[u.Name]
				if !ok {
					t.Errorf("user %s: created by cloud-init, not by Ignition", u.Name)
					continue
				}
				if strings.Join(toStrings(iu["groups"]), ",") != strings.Join(u.Groups, ",") || (u.Shell != "" && iu["shell"] != u.Shell) {
					t.Errorf("user %s: Ignition %v", u.Name, iu)
				}
				if strings.Join(toStrings(iu["sshAuthorizedKeys"]), "\n") != strings.Join(u.SSHAuthorizedKeys, "\n") {
					t.Errorf("user %s: keys differ: %v", u.Name, iu["sshAuthorizedKeys"])
				}
				if u.Sudo != "" && tree["/etc/sudoers.d/vminit-"+u.Name].data != u.Name+" "+u.Sudo+"\n" {
					t.Errorf("user %s: sudo rule missing from Ignition", u.Name)
				}
			}
			checkUsersInCloudConfig(t, doc.Users, inst.Spec.Users)
		})
	}
}

// checkUsersInCloudConfig makes sure the comparison above compares
// something: cloud-init's rendering lists the same users.
func checkUsersInCloudConfig(t *testing.T, ccUsers []any, users []spec.User) {
	names := map[string]bool{}
	for _, u := range ccUsers {
		if m, ok := u.(map[string]any); ok {
			names[fmt.Sprint(m["name"])] = true
		}
	}
	for _, u := range users {
		if !names[u.Name] {
			t.Errorf("user %s missing from the cloud-config", u.Name)
		}
	}
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = fmt.Sprint(e)
	}
	return out
}
