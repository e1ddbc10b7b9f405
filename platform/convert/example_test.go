package convert_test

import (
	"context"
	"fmt"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/seed"
)

// A KubeVirt VirtualMachine and the Secret it refers to, as kubectl apply
// takes them, converted to a vminit spec and built into a NoCloud seed.
func ExampleRead() {
	objects := `
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web-1
spec:
  template:
    spec:
      domain:
        devices: {}
      volumes:
      - name: cloudinitdisk
        cloudInitNoCloud:
          secretRef:
            name: web-1-userdata
---
apiVersion: v1
kind: Secret
metadata:
  name: web-1-userdata
stringData:
  userdata: |
    #cloud-config
    packages: [nginx]
`
	results, err := convert.Read(context.Background(), "vm.yaml", []byte(objects), platform.Options{})
	if err != nil {
		panic(err)
	}
	r := results[0]
	fmt.Println(r.Object)
	fmt.Printf("--- the vminit spec (vminit convert --to spec)\n%s", r.Spec)

	s, err := seed.Build(r.Instance, seed.Datasource(r.Instance.Spec.Datasource), seed.Options{})
	if err != nil {
		panic(err)
	}
	for _, f := range s.Files {
		fmt.Printf("--- %s (label %s)\n%s", f.Path, s.Label, f.Data)
	}
	// Output:
	// KubeVirt VirtualMachine default/web-1
	// --- the vminit spec (vminit convert --to spec)
	// apiVersion: vminit.dev/v1alpha1
	// kind: Instance
	// metadata:
	//   name: web-1
	// spec:
	//   hostname: web-1
	//   instanceID: c6d9770f-afd4-5f89-9d1a-28d1dc62c4b9
	//   datasource: nocloud
	//   cloudInit:
	//     userData: |
	//       #cloud-config
	//       packages: [nginx]
	//     userDataOnly: true
	// --- meta-data (label cidata)
	// instance-id: c6d9770f-afd4-5f89-9d1a-28d1dc62c4b9
	// local-hostname: web-1
	// --- user-data (label cidata)
	// #cloud-config
	// packages: [nginx]
}

// Options.Resolver finds references the files do not hold: a cluster's,
// through platform/cluster, or any other source. Here one that has none, so
// the error names the reference's field and line.
func ExampleDocuments() {
	docs, err := platform.Split("vm.yaml", []byte(`apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: db-0
  namespace: prod
spec:
  domain:
    devices: {}
  volumes:
  - name: cloudinitdisk
    cloudInitConfigDrive:
      secretRef:
        name: db-0-userdata
`))
	if err != nil {
		panic(err)
	}
	_, err = convert.Documents(context.Background(), docs, platform.Options{Resolver: platform.Chain{}})
	fmt.Println(err)
	// Output:
	// vm.yaml:13: spec.volumes[0].cloudInitConfigDrive.secretRef.name: secret "db-0-userdata" not found in namespace "prod": KubeVirt's virt-launcher pod mounts it as a volume and does not start without it (in VirtualMachineInstance/db-0)
}
