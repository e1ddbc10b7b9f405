package spec

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// identifyCases are documents Identify must read as Parse does, or
// decline.
var identifyCases = []string{
	specHeader + "spec:\n  metadataServer:\n    addresses: [10.0.0.1, 'fd00::1']\n",
	specHeader + "spec:\n  metadataServer:\n    addresses:\n    - 10.0.0.1\n    - \"10.0.0.2\"\n",
	specHeader + "spec:\n  hostname: h\n",
	specHeader + "spec:\n  metadataServer:\n    addresses:\n",
	"apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: 123\nspec:\n  metadataServer:\n    addresses: [10.0.0.1]\n",
	"apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: a\n  name: b\nspec: {}\n",
	"apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  metadataServer: {addresses: [10.0.0.1]}\n",
	specHeader + "spec:\n  metadataServer:\n    addresses: [10.0.0.1]\n  metadataServer:\n    addresses: [10.0.0.2]\n",
	specHeader + "spec:\n  metadataServer:\n    addresses: [1, true, ~]\n",
	specHeader + "spec:\n  userData: |\n    metadataServer:\n      addresses: [10.9.9.9]\n  metadataServer:\n    addresses: [10.0.0.1]\n",
	`{"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance", "metadata": {"name": "j"}}`,
	"metadata:\n  name: &n a\nspec:\n  metadataServer:\n    addresses: [*n]\n",
}

// TestIdentifyAgreesWithParse: whatever Identify reads from a document,
// Parse reads the same, on the cases above, the examples and the
// spec-shaped cases of the fast path's tests; and the documents a server
// loads by the thousand are identified, not declined.
func TestIdentifyAgreesWithParse(t *testing.T) {
	docs := slices.Concat(identifyCases, specCases, fastCases)
	for _, pattern := range []string{"../examples/*.yaml", "../examples/*/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, string(b))
		}
	}
	identified := 0
	for _, d := range docs {
		if checkIdentify(t, []byte(d)) {
			identified++
		}
	}
	if identified < 5 {
		t.Errorf("only %d of %d documents identified", identified, len(docs))
	}
	if _, ok := Identify([]byte(identifyCases[0])); !ok {
		t.Errorf("a plain spec was not identified:\n%s", identifyCases[0])
	}
}

// FuzzIdentify is the differential test of Identify against Parse.
func FuzzIdentify(f *testing.F) {
	for _, d := range slices.Concat(identifyCases, specCases) {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkIdentify(t, data) })
}

// checkIdentify fails when Identify reads data differently from Parse, and
// reports whether it identified it.
func checkIdentify(t *testing.T, data []byte) bool {
	t.Helper()
	id, ok := Identify(data)
	if !ok {
		return false
	}
	inst, err := Parse(data, "")
	if err != nil {
		return true // an invalid document: Parse's errors are what counts
	}
	var addrs []string
	if ms := inst.Spec.MetadataServer; ms != nil {
		addrs = ms.Addresses
	}
	if id.Name != inst.Metadata.Name || !slices.Equal(id.Addresses, addrs) {
		t.Fatalf("Identify read %q %q, Parse %q %q, from:\n%s", id.Name, id.Addresses, inst.Metadata.Name, addrs, data)
	}
	return true
}

// BenchmarkIdentify is Identify on a metadata server's typical spec
// (internal/bench/mdbench.SpecFile), beside Parse.
func BenchmarkIdentify(b *testing.B) {
	doc := []byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: vm-000007
  labels: {rack: r7}
spec:
  sshAuthorizedKeys:
    - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@example
  users:
    - name: ops
      sudo: ALL=(ALL) NOPASSWD:ALL
  files:
    - path: /etc/motd
      content: "welcome to vm-000007\n"
  commands:
    - [systemctl, enable, --now, app.service]
  metadataServer:
    addresses: [10.0.0.7]
`)
	b.Run("Identify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := Identify(doc); !ok {
				b.Fatal("not identified")
			}
		}
	})
	b.Run("Parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse(doc, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}
