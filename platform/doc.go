// Package platform is what the platform readers share: vminit reads the
// objects that KubeVirt, Virtlet, oVirt and Cluster API users already
// write, and gives the guest what the platform would have given it, minus
// the platform's known bugs.
//
// Each platform has a small package of the same shape (as Ignition's
// providers do), which decodes the platform's objects with the platform's
// own Go API types and turns them into a vminit spec.Instance, rendered by
// the same renderers as any spec:
//
//	platform/kubevirt  VirtualMachine, VirtualMachineInstance, VirtualMachinePool
//	platform/virtlet   Pod (Virtlet's annotations, env and volume mounts)
//	platform/ovirt     REST vm with initialization (XML or JSON)
//	platform/capi      KubeadmConfig, KubeadmConfigTemplate, KubeadmControlPlane(Template)
//
// and package platform/convert recognises an object by its apiVersion and
// kind (or, for oVirt, its shape) and calls the right one.
//
// This package holds what they share: Document (one object as read, with
// strict decoding into Go types and errors naming the field path, its line
// and the object, as --object picks it: "(in Pod/cirros-vm)"; each
// platform's messages add what the platform itself does with the input),
// Resolver (the Secrets and ConfigMaps an object refers to, as plain
// data: platform/refs holds those given in the same files, platform/cluster
// reads them from a cluster, so that this package and a reader that
// refers to none link no Kubernetes API), Result (the instance and the output choices the
// platform implies), and the sentinel errors.
//
// A Result's instance is always the vminit spec of Result.Spec parsed back
// by spec.Parse, so building the converted spec gives the same bytes as
// building the platform object (the corpus test checks every object that
// builds); Result.Locate names the object's field for problems found in
// the instance later, by a check or a renderer. Scopes says which objects
// each option of Options concerns, so that a command refuses a flag given
// for objects it would do nothing for (Unconcerned).
package platform
