package nodecmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/vminit/vminit/cmd/internal/cniplugin"
)

const agent = "172.31.0.10:8775"

// TestConflistEntry: on published lists (testdata/README.md) and compact
// ones, with adds one vminit-cni entry at the end of plugins that libcni
// reads and vminit-cni accepts; with again changes nothing, another
// agent replaces the entry (never two); without gives back the file byte
// for byte.
func TestConflistEntry(t *testing.T) {
	files := map[string][]byte{
		"compact.conflist": []byte(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"ptp"}]}`),
		"one.conflist":     []byte("{\n  \"name\": \"n\",\n  \"cniVersion\": \"1.0.0\",\n  \"plugins\": [\n    {\"type\": \"ptp\"}\n  ],\n  \"x\": 1\n}\n"),
	}
	for _, f := range []string{"10-containerd-net.conflist", "spec-example.conflist", "10-flannel.conflist"} {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = data
	}
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			list, err := parseConflist(name, data)
			if err != nil {
				t.Fatal(err)
			}
			with, err := list.with(agent, "")
			if err != nil {
				t.Fatal(err)
			}
			lib, err := libcni.ConfListFromBytes(with)
			if err != nil {
				t.Fatalf("libcni: %v\n%s", err, with)
			}
			last := lib.Plugins[len(lib.Plugins)-1]
			if len(lib.Plugins) != len(list.plugins)+1 || last.Network.Type != pluginType {
				t.Fatalf("plugins after with: %d, the last %q\n%s", len(lib.Plugins), last.Network.Type, with)
			}
			// The entry as the runtime hands it to vminit-cni.
			var conf map[string]any
			json.Unmarshal(last.Bytes, &conf)
			conf["cniVersion"], conf["name"] = lib.CNIVersion, lib.Name
			b, _ := json.Marshal(conf)
			if c, err := cniplugin.ParseConfig(b); err != nil || c.Table.Agent().String() != agent {
				t.Errorf("vminit-cni's reading of the entry %s: %v", b, err)
			}

			again, _ := parseConflist(name, with)
			if twice, _ := again.with(agent, ""); !bytes.Equal(twice, with) {
				t.Errorf("with twice:\n%s\nthen\n%s", with, twice)
			}
			other, _ := again.with("172.31.0.11:8775", "")
			if n := strings.Count(string(other), pluginType); n != 1 || !strings.Contains(string(other), "172.31.0.11:8775") {
				t.Errorf("another agent: %d entries\n%s", n, other)
			}
			if got := again.without(); !bytes.Equal(got, data) {
				t.Errorf("without(with(x)) is not x:\n%s\nthen\n%s", data, got)
			}
		})
	}
}

// TestConflistRefused: each file vminit-cni cannot be chained in is
// refused with a message naming the file and the problem.
func TestConflistRefused(t *testing.T) {
	for _, c := range []struct {
		name, data string
		want       []string
	}{
		{"a.conflist", `{"cniVersion": "0.2.0", "plugins": [{"type": "ptp"}]}`, []string{`a.conflist: cniVersion "0.2.0": vminit-cni speaks CNI 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0`, "--intercept host"}},
		{"a.conflist", `{"cniVersion": "1.0.0", "cniVersions": ["1.0.0", "1.2.0"], "plugins": [{"type": "ptp"}]}`, []string{`a.conflist: cniVersion "1.2.0"`}},
		{"87-podman.conf", `{"cniVersion": "1.0.0", "name": "podman", "type": "bridge"}`, []string{"87-podman.conf is a single-plugin network configuration (.conf)", "have the CNI write a .conflist"}},
		{"a.json", `{"cniVersion": "1.0.0", "type": "bridge"}`, []string{"a.json is a single-plugin network configuration (.json)"}},
		{"a.conflist", `{"cniVersion": "1.0.0", "plugins": [{"type": "ptp"}`, []string{"a.conflist: not a network configuration list"}},
		{"a.conflist", `{"plugins": {"type": "ptp"}}`, []string{"a.conflist: cniVersion: missing", "a.conflist: plugins: not a list"}},
		{"a.conflist", `{"cniVersion": "1.0.0"}`, []string{"a.conflist: plugins: missing"}},
		{"a.conflist", `{"cniVersion": "1.0.0", "plugins": []}`, []string{"a.conflist: plugins: no pod network plugin"}},
		{"a.conflist", `{"cniVersion": "1.0.0", "plugins": [{"type": "vminit-cni", "agent": "10.0.0.1:1"}]}`, []string{"a.conflist: plugins: no pod network plugin"}},
		{"a.conflist", `{"cniVersion": "1.0.0", "plugins": [{"type": "ptp"}, {"kind": "x"}, 3]}`, []string{"a.conflist: plugins: [2]: not an object"}},
		{"a.conflist", `{"cniVersion": "1.0.0", "plugins": [{"type": "ptp"}, {"kind": "x"}]}`, []string{"a.conflist: plugins[1]: no type"}},
	} {
		_, err := parseConflist(c.name, []byte(c.data))
		if err == nil {
			t.Errorf("%s %s: accepted", c.name, c.data)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s:\n%v\nwant %q", c.name, c.data, err, w)
			}
		}
	}
}
