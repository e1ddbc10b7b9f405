package kubetest

import "k8s.io/apimachinery/pkg/runtime/schema"

// KubeVirtCRDs are KubeVirt's VirtualMachine and VirtualMachineInstance
// CustomResourceDefinitions (kubevirt.io/v1) in the shape tests need: the
// real group, version, kinds and names, a status subresource, and schemas
// that keep every field (KubeVirt's operator generates its own, thousands
// of lines long; the tests here read objects, not KubeVirt's validation).
// Create them with CreateCRDs.
const KubeVirtCRDs = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: virtualmachines.kubevirt.io}
spec:
  group: kubevirt.io
  scope: Namespaced
  names: {plural: virtualmachines, singular: virtualmachine, kind: VirtualMachine, listKind: VirtualMachineList, shortNames: [vm, vms]}
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
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: virtualmachineinstances.kubevirt.io}
spec:
  group: kubevirt.io
  scope: Namespaced
  names: {plural: virtualmachineinstances, singular: virtualmachineinstance, kind: VirtualMachineInstance, listKind: VirtualMachineInstanceList, shortNames: [vmi, vmis]}
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
`

// The resources KubeVirtCRDs define.
var (
	VirtualMachines         = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	VirtualMachineInstances = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
)
