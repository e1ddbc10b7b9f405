package cloudconfig_test

import (
	"fmt"

	"github.com/vminit/vminit/cloudconfig"
	"github.com/vminit/vminit/ignition"
)

// A #cloud-config users already have, read into a spec and rendered for
// Ignition; what cannot be carried over is named, here as a warning.
func Example() {
	inst, warnings, err := cloudconfig.ToSpec([]byte(`#cloud-config
hostname: web-1
users:
  - name: alice
    sudo: ALL=(ALL) NOPASSWD:ALL
write_files:
  - path: /etc/motd
    content: hello
runcmd:
  - [systemctl, restart, nginx]
apt:
  preserve_sources_list: true
`), cloudconfig.Options{AllowPartial: true})
	if err != nil {
		panic(err)
	}
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}
	s := inst.Spec
	fmt.Println(inst.Metadata.Name, s.Users[0].Name, s.Files[0].Path, s.Commands[0].Argv)
	res, err := ignition.Render(inst, ignition.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println("Ignition", res.Version)
	// Output:
	// warning: apt: no Ignition equivalent is known for this cloud-init module key
	// web-1 alice /etc/motd [systemctl restart nginx]
	// Ignition 3.0.0
}
