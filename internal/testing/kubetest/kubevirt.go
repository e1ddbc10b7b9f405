package kubetest

import (
	"bytes"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// KubeVirtCRDs are KubeVirt's VirtualMachine and VirtualMachineInstance
// CustomResourceDefinitions (kubevirt.io/v1), with structural schemas
// derived from kubevirt.io/api's Go types (CRD). Create them with
// CreateCRDs.
var KubeVirtCRDs = bytes.Join([][]byte{
	CRD("kubevirt.io", "v1", "VirtualMachine", "virtualmachines", &kubevirtv1.VirtualMachine{}),
	CRD("kubevirt.io", "v1", "VirtualMachineInstance", "virtualmachineinstances", &kubevirtv1.VirtualMachineInstance{}),
}, []byte("---\n"))
