package ignition_test

import (
	"fmt"

	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/spec"
)

// A spec with only an SSH key renders to the lowest spec version, with
// the key on the core user and the host name in /etc/hostname.
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
	// {"ignition":{"version":"3.0.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIOcQfB+HkOOjJNE+kDUn8dHs94p8jX2ceyNdSdYS5bh alice@example.com"]}]},"storage":{"files":[{"overwrite":true,"path":"/etc/hostname","contents":{"source":"data:,node-1%0A"},"mode":420}]}}
}

// Forcing an older version than a feature needs is an error naming the
// field and the version that can express it.
func ExampleRender_forcedVersion() {
	inst, _, err := spec.Decode([]byte(`
apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata: {name: node-1}
spec:
  files:
    - {path: /usr/local/bin/helper, mode: "4755", content: "#!/bin/sh\n"}
`))
	if err != nil {
		panic(err)
	}
	inst.Default()
	_, err = ignition.Render(inst, ignition.Options{Version: "3.3.0"})
	fmt.Println(err)
	res, _ := ignition.Render(inst, ignition.Options{})
	fmt.Println(res.Version)
	// Output:
	// spec.files[0].mode: needs Ignition spec 3.6.0 or newer, and 3.3.0 was requested: 4755 has setuid, setgid or sticky bits, which Ignition honours from spec 3.6.0
	// 3.6.0
}
