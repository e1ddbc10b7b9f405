package seed

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vminit/vminit/spec"
)

// FuzzBuildError holds BuildError to Build: for every spec that loads,
// both return the same error (or none), for each datasource and
// network-config version.
func FuzzBuildError(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/instance.yaml")
	more, _ := filepath.Glob("../examples/*.yaml")
	for _, p := range append(seeds, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	const head = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: x}\nspec:\n"
	for _, s := range []string{
		"  hostname: h\n  cloudInit:\n    metaData: {instance-id: i}\n",
		"  cloudInit:\n    metaData: {a: [1, {b: null}], c: \"\\u00e9\"}\n",
		"  cloudInit:\n    userData: \"#cloud-config\\nruncmd: [a]\\n\"\n",
		"  cloudInit:\n    userData: \"   \\n\"\n",
		"  cloudInit:\n    userData: \"#cloud-config\\n: [\"\n",
		"  cloudInit:\n    vendorData: \"#cloud-config\\n: [\"\n",
		"  cloudInit:\n    networkConfig: \"version: 2\\n\"\n",
		"  network:\n    ethernets:\n      - name: eth0\n        dhcp4: true\n",
		"  users: [{name: \"yes\", groups: [\"on\", \"0644\"]}]\n  files: [{path: /x, content: \"\\n\\tx\"}]\n",
		"  fqdn: a.example.com\n  hostname: a\n  packages: [\"a: b\", \"- c\"]\n",
	} {
		f.Add([]byte(head + s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		inst, err := spec.Parse(doc, "")
		if err != nil {
			return
		}
		for _, ds := range []Datasource{NoCloud, ConfigDrive} {
			for _, v := range []int{0, 1} {
				opts := Options{NetworkConfigVersion: v}
				_, want := Build(inst, ds, opts)
				got := BuildError(inst, ds, opts)
				if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
					t.Fatalf("%s v%d: BuildError = %v, Build = %v", ds, v, got, want)
				}
			}
		}
	})
}
