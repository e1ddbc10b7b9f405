package spec_test

import (
	"fmt"

	"github.com/vminit/vminit/spec"
)

// A spec is parsed strictly, defaulted and validated in one call; the
// renderers (cloudinit, ignition, seed) take the result.
func Example() {
	inst, err := spec.Parse([]byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: web-1
spec:
  fqdn: web-1.example.com
  users:
    - name: alice
      sudo: "ALL=(ALL) NOPASSWD:ALL"
  files:
    - path: /etc/motd
      content: "hello\n"
`), "")
	if err != nil {
		panic(err)
	}
	s := inst.Spec
	fmt.Println("hostname:", s.Hostname)
	fmt.Println("instance-id:", s.InstanceID)
	fmt.Println("agent:", s.Agent)
	fmt.Println("alice locked:", *s.Users[0].LockPassword)
	fmt.Println("/etc/motd mode:", *s.Files[0].Mode)
	// Output:
	// hostname: web-1
	// instance-id: 4cb437c5-d791-52e5-ba29-c66e61e5d07e
	// agent: cloud-init
	// alice locked: true
	// /etc/motd mode: 0644
}

// Every problem comes back at once, each naming its field and line.
func ExampleParse_errors() {
	_, err := spec.Parse([]byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: web-1
spec:
  hostname: Web_1
  users:
    - name: alice
      password: hunter2
  fiels: []
`), "")
	for _, e := range spec.AsErrors(err) {
		fmt.Println(e)
	}
	// Output:
	// 6: spec.hostname: "Web_1" is not a valid host name: one RFC 1123 label, lowercase letters, digits and '-', at most 63 characters
	// 9: spec.users[0].password: plain-text passwords are refused (they would sit readable on the seed): put a crypt hash in passwordHash, e.g. from `mkpasswd -m sha-512`
	// 10: spec.fiels: unknown field (did you mean "files"?)
}
