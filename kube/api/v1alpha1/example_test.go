package v1alpha1_test

import (
	"fmt"

	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/spec"
)

// An Instance object made from a spec, and the document it stands for,
// which loads as any spec does.
func ExampleFromSpec() {
	inst, _, err := spec.Decode([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: web-1}\nspec:\n  hostname: web\n  files: [{path: /etc/motd, mode: 0600, content: hi}]\n"))
	if err != nil {
		panic(err)
	}
	obj := v1alpha1.FromSpec(inst)
	obj.Namespace = "vms"
	doc, err := obj.SpecDocument()
	if err != nil {
		panic(err)
	}
	fmt.Println(string(doc))
	loaded, err := spec.Parse(doc, "")
	fmt.Println(loaded.Spec.Hostname, *loaded.Spec.Files[0].Mode, err)
	// Output:
	// {"apiVersion":"vminit.dev/v1alpha1","kind":"Instance","metadata":{"name":"web-1"},"spec":{"hostname":"web","files":[{"path":"/etc/motd","mode":"0600","content":"hi"}],"cloudInit":{},"ignition":{}}}
	// web 0600 <nil>
}
