package kubevirt_test

import (
	"context"
	"fmt"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/kubevirt"
	"github.com/vminit/vminit/platform/refs"
)

// Convert reads one object; the Secrets it refers to come from a Resolver,
// here refs.Objects holding the documents beside it.
func ExampleConvert() {
	docs, err := platform.Split("vm.yaml", []byte(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web-1
  namespace: prod
spec:
  template:
    spec:
      accessCredentials:
      - sshPublicKey:
          source: {secret: {secretName: web-keys}}
          propagationMethod: {configDrive: {}}
      domain:
        devices: {}
      volumes:
      - name: cloudinitdisk
        cloudInitConfigDrive:
          userData: |
            #!/bin/sh
            echo hello > /run/hello
---
apiVersion: v1
kind: Secret
metadata:
  name: web-keys
  namespace: prod
stringData:
  # Two keys in one value: KubeVirt passes them as one broken entry.
  keys: |
    ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ops@example.com
    ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBJr6Yx5Wj7uGAGK3A3dbR4bXBE2Tb0R6wi3/3vMw8jQ dev@example.com
`))
	if err != nil {
		panic(err)
	}
	var secrets refs.Objects
	if err := secrets.Add(docs[1]); err != nil {
		panic(err)
	}
	r, err := kubevirt.Convert(context.Background(), docs[0], platform.Options{Resolver: &secrets})
	if err != nil {
		panic(err)
	}
	s := r.Instance.Spec
	fmt.Println("instance-id:", s.InstanceID, "(kubevirt.LegacyUUID of the name)")
	fmt.Println("hostname:", s.Hostname)
	fmt.Println("datasource:", s.Datasource)
	fmt.Println("meta_data.json instance_id:", s.CloudInit.MetaData["instance_id"])
	fmt.Println("keys:", len(s.SSHAuthorizedKeys))
	fmt.Printf("user-data, alone as KubeVirt writes it (%v):\n%s", s.CloudInit.UserDataOnly, s.CloudInit.UserData)
	// Output:
	// instance-id: c6d9770f-afd4-5f89-9d1a-28d1dc62c4b9 (kubevirt.LegacyUUID of the name)
	// hostname: web-1
	// datasource: configdrive
	// meta_data.json instance_id: web-1.prod
	// keys: 2
	// user-data, alone as KubeVirt writes it (true):
	// #!/bin/sh
	// echo hello > /run/hello
}

func ExampleHostname() {
	fmt.Println(kubevirt.Hostname("db-0.example.com", ""))
	fmt.Println(kubevirt.Hostname("db-0", "database"))
	// Output:
	// db-0
	// database
}
