package kubetest

import (
	"bytes"
	"encoding/json"
	"net/netip"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/kuberules"
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

// KubeVirtObject is a VMI or VM ns/name naming instance (when not ""); a
// VMI reports ips on its pod network, as KubeVirt writes its status.
func KubeVirtObject(kind, ns, name, instance string, ips ...string) *unstructured.Unstructured {
	var ann map[string]string
	if instance != "" {
		ann = map[string]string{v1alpha1.AnnotationInstance: instance}
	}
	if kind == "VirtualMachineInstance" {
		u := VMI(ns, name, ann)
		if ips != nil {
			unstructured.SetNestedSlice(u.Object, []any{VMIInterface("default", InfoSourceAll, ips...)}, "status", "interfaces")
		}
		return u
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{}}}
	u.SetAnnotations(ann)
	return u
}

// Tenants is the operator's policy of the tests: the Instances of
// namespaces default, kube-public, a and b may list addresses in
// 10.0.0.0/8; of any other, none.
var Tenants = kuberules.AddressPolicy{SpecAddresses: map[string][]netip.Prefix{
	"default": {netip.MustParsePrefix("10.0.0.0/8")}, "kube-public": {netip.MustParsePrefix("10.0.0.0/8")},
	"a": {netip.MustParsePrefix("10.0.0.0/8")}, "b": {netip.MustParsePrefix("10.0.0.0/8")}}}
