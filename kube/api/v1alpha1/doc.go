// Package v1alpha1 is vminit's Kubernetes API, group vminit.dev version
// v1alpha1: the Instance custom resource, whose spec is vminit's instance
// spec (spec.Spec) and whose status the controller (vminit-controller)
// writes. Programs that create or read Instance objects import it; the
// CustomResourceDefinition in deploy/kubernetes/crd is generated from these
// types by controller-gen (scripts/generate.sh), and so are the DeepCopy
// methods of the status types.
//
// An Instance object stands for the spec document SpecDocument returns:
// metadata.name and labels, and the spec as written. Every reader (the
// controller, the metadata server's Kubernetes store) loads that document
// as any other spec, so an object is valid exactly when `vminit validate`
// accepts its document, and its problems name the same fields.
//
// A KubeVirt VirtualMachine names its Instance with AnnotationInstance
// (InstanceNamedBy reads it); the KubeVirt resources that carry it
// (KubeVirtVirtualMachines, KubeVirtVirtualMachineInstances) are named
// here too, for the controller and the metadata server's Kubernetes store
// alike.
//
// +kubebuilder:object:generate=true
// +groupName=vminit.dev
package v1alpha1
