package kubetest

import "fmt"

// KubeVirtCRDs are KubeVirt's VirtualMachine and VirtualMachineInstance
// CustomResourceDefinitions (kubevirt.io/v1) in the shape tests need: the
// real group, version, kinds and names, a status subresource, and schemas
// that keep every field (KubeVirt's operator generates its own, thousands
// of lines long; the tests here read objects, not KubeVirt's validation).
// Create them with CreateCRDs.
var KubeVirtCRDs = []byte(kubeVirtCRD("VirtualMachine", "virtualmachine", "vm") + "---\n" +
	kubeVirtCRD("VirtualMachineInstance", "virtualmachineinstance", "vmi"))

func kubeVirtCRD(kind, singular, short string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]ss.kubevirt.io}
spec:
  group: kubevirt.io
  scope: Namespaced
  names: {plural: %[2]ss, singular: %[2]s, kind: %[1]s, listKind: %[1]sList, shortNames: [%[3]s, %[3]ss]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, kind, singular, short)
}
