package kubetest

import (
	"bytes"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// The infoSource KubeVirt's virt-handler writes on a VMI's status
// interfaces: InfoSourceAll on the interfaces of its spec.networks that
// the domain, the guest agent and Multus all report, InfoSourceGuestAgent
// on one only the guest agent knows. Whatever it says, the pod network's
// interface reports the pod's IPs (the CNI's); a Multus network's, and a
// guest-agent-only one, report what the guest agent says.
const (
	InfoSourceAll        = "domain, guest-agent, multus-status"
	InfoSourceGuestAgent = "guest-agent"
	// InfoSourceDomain is a pod network interface of a guest that runs no
	// guest agent: its addresses are all the pod's.
	InfoSourceDomain = "domain, multus-status"
)

// VMI is a VirtualMachineInstance ns/name with annotations, as KubeVirt
// stores one: on the pod network "default" (masquerade, what KubeVirt's
// admission adds when a VMI lists no network), and on the Multus networks
// secondary (bridge, network attachment of the same name).
func VMI(ns, name string, annotations map[string]string, secondary ...string) *unstructured.Unstructured {
	networks := []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
	ifaces := []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}}
	for _, n := range secondary {
		networks = append(networks, kubevirtv1.Network{Name: n, NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: n}}})
		ifaces = append(ifaces, kubevirtv1.Interface{Name: n, InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}})
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"spec": map[string]any{"networks": toUnstructured(networks), "domain": map[string]any{"devices": map[string]any{"interfaces": toUnstructured(ifaces)}}}}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetAnnotations(annotations)
	return u
}

// VMIInterface is an entry of a VMI's status.interfaces: the interface on
// network ("" for one only the guest agent knows: KubeVirt gives it no
// network name), reporting ips (the first is its ipAddress).
func VMIInterface(network, infoSource string, ips ...string) any {
	i := kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: network, IPs: ips, InfoSource: infoSource}
	if len(ips) > 0 {
		i.IP = ips[0]
	}
	return toUnstructured(i)
}

// toUnstructured is v as JSON would have it, by KubeVirt's own field
// names.
func toUnstructured(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
