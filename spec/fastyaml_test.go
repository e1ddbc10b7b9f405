package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// fastCases are documents inside the fast subset, each a rule that
// fastParse must get exactly right.
var fastCases = []string{
	"a: 1\nb:\nc:\n  - x\n  -\n  - y: z\n    w: |\n      hi\n\n      there\n    q: [a, 'b', \"c\\n\"]\nd:\n- e\nf: {k: v, m: n}\ng: \"x\" # c\n",
	"\n\n# c\n  a: b\n",
	"a:   \n  b: c\n",
	"a:\n",
	"a: ~\nb: null\nc: true\nd: 0644\ne: 1.5\nf: yes\ng: 0x1f\nh: .inf\ni: 2001-12-14\n",
	"a: |-\n  x\n  y\n\nb: |+\n  x\n\n\nc: |\n\n  x\n",
	"a: |\n   lead\n  \n      deeper\n    \n",
	"a: |\n  x",
	"a: |\n",
	"a: |\nb: c\n",
	"a: |\n  x\n \t  tab in content\n",
	"a: 'it''s'\nb: \"q\\\"\\\\\\/\\t\"\n",
	"- a\n",
	"a:\n- b: c\n  d:\n  - e\n  f: g\nh: i\n",
	"a: b#c\nd: e #f\ng: h   \ni: j:k\n",
	"a: [--now, x y,  z  ]\nb: []\nc: {}\nd: {k: 'v'}\n",
	"a:\n  -\n    b: c\n  - - d\n",
	"a:\n    # comment\n  b: c\n# trailing\n",
	"apiVersion: v1\nkind: Instance\nspec:\n  files:\n    - path: /etc/motd\n      mode: 0644\n      content: |\n        hello\n",
	"a: b\n  c\n",
	"a: b\n\n  c: d\n",
	"a: 'x'y\n",
	"a: \"x\n  y\"\n",
	"a: &x b\nc: *x\n",
	"a: !!str 1\n",
	"a: >\n  folded\n",
	"--- \na: b\n",
	"a: b\n---\nc: d\n",
	"a:\tb\n",
	"a: b\r\n",
	"a: ü\n",
	"a: [b, [c]]\n",
	"a: {b: c, d: [e]}\n",
	"a: [b,\n  c]\n",
	"? a\n: b\n",
	"a: b: c\n",
	"a:b\n",
	"a: b\n c: d\n",
	"a: |2\n   x\n",
	"a: |\n    x\n  y\n",
	"a:\n  b: c\n d: e\n",
	"a: \"\\u00e9\"\n",
	"a: [b, ]\n",
	"a: {b: }\n",
	"- [a, b]\n- c\n",
	"a: -\n",
	"a: - b\n",
	"a: '\n",
}

// TestFastYAMLMatchesYAMLv3 checks fastParse against yaml.v3 on the cases
// above, on the spec examples, and on the fuzz corpus.
func TestFastYAMLMatchesYAMLv3(t *testing.T) {
	docs := append([]string(nil), fastCases...)
	for _, pattern := range []string{"../examples/*.yaml", "../examples/*/*.yaml", "testdata/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, string(b))
		}
	}
	docs = append(docs, specCases...)
	fast := 0
	for _, d := range docs {
		if checkFast(t, []byte(d)) {
			fast++
		}
		checkFastDecode(t, []byte(d))
	}
	if fast < len(docs)/3 {
		t.Errorf("only %d of %d documents took the fast path", fast, len(docs))
	}
}

// TestFastYAMLTakesSpecs makes sure the documents the fast path exists for
// do take it: a regression here is no bug, only a slow load.
func TestFastYAMLTakesSpecs(t *testing.T) {
	for _, f := range []string{"../examples/dev-vm.yaml", "../examples/ubuntu-server/instance.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if fastParse(b) == nil {
			t.Errorf("%s: not taken by the fast path", f)
		}
	}
}

// FuzzFastYAML is the differential test: whenever fastParse builds a tree,
// yaml.v3 must accept the document and build the same one.
func FuzzFastYAML(f *testing.F) {
	for _, d := range fastCases {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFast(t, data)
	})
}

// checkFast compares fastParse with yaml.Unmarshal on data and reports
// whether the fast path took it.
func checkFast(t *testing.T, data []byte) bool {
	t.Helper()
	got := fastParse(data)
	if got == nil {
		return false
	}
	var want yaml.Node
	if err := yaml.Unmarshal(data, &want); err != nil {
		t.Fatalf("fast path accepted what yaml.v3 refuses (%v):\n%q", err, data)
	}
	if diff := nodeDiff(got, &want, "doc"); diff != "" {
		t.Fatalf("fast path differs from yaml.v3 at %s:\n%q\nfast:\n%syaml.v3:\n%s", diff, data, dumpNode(got, 0), dumpNode(&want, 0))
	}
	return true
}

// nodeDiff returns where two trees first differ, ignoring comments (the
// decoder does not read them).
func nodeDiff(a, b *yaml.Node, at string) string {
	if a.Kind != b.Kind || a.Style != b.Style || a.Tag != b.Tag || a.Value != b.Value ||
		a.Anchor != b.Anchor || a.Line != b.Line || a.Column != b.Column || len(a.Content) != len(b.Content) {
		return at
	}
	for i := range a.Content {
		if d := nodeDiff(a.Content[i], b.Content[i], fmt.Sprintf("%s[%d]", at, i)); d != "" {
			return d
		}
	}
	return ""
}

func dumpNode(n *yaml.Node, depth int) string {
	s := fmt.Sprintf("%skind=%d tag=%q style=%d value=%q at %d:%d\n", strings.Repeat("  ", depth), n.Kind, n.Tag, n.Style, n.Value, n.Line, n.Column)
	for _, c := range n.Content {
		s += dumpNode(c, depth+1)
	}
	return s
}

func BenchmarkFastYAML(b *testing.B) {
	data, err := os.ReadFile("../examples/dev-vm.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := parsers.Get().(*fastParser)
			if d, _ := p.parse(data); d == nil {
				b.Fatal("not fast")
			}
			p.release()
		}
	})
	b.Run("yaml.v3", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var n yaml.Node
			if err := yaml.Unmarshal(data, &n); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzFastDecode compares Decode with and without the fast paths: the same
// instance (or none) and the same errors, for every input.
func FuzzFastDecode(f *testing.F) {
	for _, d := range fastCases {
		f.Add([]byte(d))
	}
	for _, d := range specCases {
		f.Add([]byte(d))
	}
	for _, pattern := range []string{"../examples/*.yaml", "../examples/*/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastDecode(t, data)
	})
}

func checkFastDecode(t *testing.T, data []byte) {
	t.Helper()
	fast, _, ferr := decode(data, true)
	slow, _, serr := decode(data, false)
	if fmt.Sprint(ferr) != fmt.Sprint(serr) {
		t.Fatalf("errors differ on %q:\nfast: %v\nslow: %v", data, ferr, serr)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("instances differ on %q:\nfast: %#v\nslow: %#v", data, fast, slow)
	}
}

// specCases are spec-shaped documents: every field type, and the mistakes
// the fast decoder must hand back to the careful path.
var specCases = []string{
	storageDoc,
	specHeader + "spec:\n  storage:\n    disks:\n      - {device: /dev/vdb, wipeTable: yes, partitions: [{number: '1'}]}\n    growRoot: 1\n",
	specHeader + "spec:\n  storage:\n    filesystems:\n      - {device: /dev/vdb, partition: x, wipeFilesystem: \"true\", options: [-F, 3]}\n    swap: []\n",
	specHeader + "spec:\n  hostname: h\n  users:\n    - name: ops\n      lockPassword: false\n      system: yes\n      groups: [wheel, adm]\n",
	specHeader + "spec:\n  files:\n    - path: /a\n      mode: 0644\n      content: |\n        x\n    - path: /b\n      mode: '600'\n      contentBase64: eA==\n      append: true\n",
	specHeader + "spec:\n  commands:\n    - [a, b]\n    - echo hi\n    - []\n  bootCommands:\n  - x\n",
	specHeader + "spec:\n  network:\n    ethernets:\n      eth0:\n        match: {macAddress: '00:11:22:33:44:55'}\n        dhcp4: true\n        mtu: 9000\n        addresses: [10.0.0.2/24]\n        routes:\n          - to: default\n            via: 10.0.0.1\n            metric: 100\n    vlans:\n      v1: {id: 5, link: eth0}\n",
	specHeader + "spec:\n  cloudInit:\n    metaData:\n      a: 1\n      b: [x, y]\n      c: {d: e}\n",
	specHeader + "  labels:\n    a: b\n    c:\n    d: ''\nspec:\n  packages: []\n  sshAuthorizedKeys:\n  units: {}\n",
	specHeader + "spec:\n  hostnme: typo\n",
	specHeader + "spec:\n  hostname: a\n  hostname: b\n",
	specHeader + "spec:\n  users:\n    - name: ops\n      system: maybe\n",
	specHeader + "spec:\n  packages:\n    - a\n    -\n    - b\n",
	specHeader + "spec:\n  metadataServer:\n    addresses: [127.0.0.2]\n    tokenHopLimit: 0x2\n    imdsv2: required\n",
	specHeader + "spec:\n  files:\n    - path: /a\n      mode: rwx\n",
	specHeader + "spec:\n  commands:\n    - {a: b}\n",
	specHeader + "spec:\n  commands:\n    - [a, 1, true, 0x1f, ~, '']\n    - [a, [b]]\n    - [a, {b: c}]\n    - - x\n      - null\n    - [!!binary eA==]\n",
	specHeader + "spec:\n  network: {}\n  mounts:\n    - device: /dev/vdb\n      path: /data\n      options: [defaults, nofail]\n",
	specHeader + "spec:\n  units:\n    - name: a.service\n      enabled: true\n      dropins:\n        - name: x.conf\n          content: \"[Service]\\n\"\n",
	specHeader + "spec: ~\n",
	specHeader + "spec:\n  users: ops\n",
	specHeader + "spec:\n  ignition:\n    config: '{}'\n  timezone: 1\n",
	refsDoc, // every reference field (refs_internal_test.go)
}

const specHeader = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: vm-1\n"
