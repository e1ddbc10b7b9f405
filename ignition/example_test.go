package ignition_test

import (
	"fmt"

	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/spec"
)

func Example() {
	inst, _, err := spec.Decode([]byte(`
apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: node-1}
spec:
  sshAuthorizedKeys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOcQfB+HkOOjJNE+kDUn8dHs94p8jX2ceyNdSdYS5bh alice@example.com"]
`))
	if err != nil {
		panic(err)
	}
	inst.Default()
	res, err := ignition.Render(inst, ignition.Options{Variant: ignition.FCOS})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Version)
	fmt.Println(string(res.Config))
	// Output:
	// 3.0.0
	// {"ignition":{"version":"3.0.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOcQfB+HkOOjJNE+kDUn8dHs94p8jX2ceyNdSdYS5bh alice@example.com"]}]},"storage":{"files":[{"contents":{"source":"data:,node-1%0A"},"mode":420,"overwrite":true,"path":"/etc/hostname"}]}}
}
