package render_test

import (
	"fmt"

	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/spec"
)

// What `vminit validate` does for an instance: every check its agent's
// output would run. Here the user's cloud-config replaces a field the spec
// sets, which is worth a warning.
func ExampleInstance() {
	inst, err := spec.Parse([]byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: web-1}
spec:
  commands: ["echo from the spec"]
  cloudInit:
    userData: |
      #cloud-config
      runcmd: ["echo from the user"]
`), "")
	if err != nil {
		panic(err)
	}
	rep := render.Instance(inst, render.Target{})
	fmt.Println("ok:", rep.OK(), "seed files:", len(rep.Seed.Files))
	for _, w := range rep.Warnings {
		fmt.Println("warning:", w)
	}
	// Output:
	// ok: true seed files: 2
	// warning: spec.cloudInit.userData: runcmd (user-data line 2) replaces the runcmd that spec.commands, spec.units, spec.mounts and spec.storage's swap filesystems generates: cloud-init's merge (dict(replace)+list()+str(), the default) keeps only the user-data's value; put the values in the spec, or give the user-data a merge_how that appends, e.g. merge_how: 'dict(recurse_array,no_replace)+list(append)'
}
