package cloudinit_test

import (
	"fmt"

	"github.com/vminit/vminit/cloudinit"
)

// A user's #cloud-config is merged the way cloud-init merges a second
// part; here merge_how asks for lists to be appended instead of replaced.
func ExampleMergeCloudConfig() {
	generated := []byte("#cloud-config\nhostname: web-1\nruncmd:\n  - [systemctl, daemon-reload]\n")
	user := []byte(`#cloud-config
merge_how:
  - name: list
    settings: [append]
  - name: dict
    settings: [no_replace, recurse_list]
runcmd:
  - echo from the user
packages: [git]
`)
	out, err := cloudinit.MergeCloudConfig(generated, user)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(out))
	// Output:
	// #cloud-config
	// hostname: web-1
	// runcmd:
	//   - [systemctl, daemon-reload]
	//   - echo from the user
	// packages: [git]
}

// Any other kind of user-data is sent alongside the generated document in
// a MIME multipart message, the generated part first.
func ExampleCombine() {
	generated := []byte("#cloud-config\nhostname: web-1\n")
	out, err := cloudinit.Combine(generated, []byte("#!/bin/sh\necho hello\n"))
	if err != nil {
		panic(err)
	}
	fmt.Print(string(out))
	// Output:
	// Content-Type: multipart/mixed; boundary="vminit-92854b0d407c57a7bdd5af88d70227b5664e403e"
	// MIME-Version: 1.0
	//
	// --vminit-92854b0d407c57a7bdd5af88d70227b5664e403e
	// Content-Type: text/cloud-config; charset="utf-8"
	// MIME-Version: 1.0
	// Content-Transfer-Encoding: 7bit
	//
	// #cloud-config
	// hostname: web-1
	//
	// --vminit-92854b0d407c57a7bdd5af88d70227b5664e403e
	// Content-Type: text/x-shellscript; charset="utf-8"
	// MIME-Version: 1.0
	// Content-Transfer-Encoding: 7bit
	//
	// #!/bin/sh
	// echo hello
	//
	// --vminit-92854b0d407c57a7bdd5af88d70227b5664e403e--
}
