// Package kuberules holds the rules that the metadata servers' Kubernetes
// store (mdserver/kubestore) and the controller (cmd/internal/controller)
// both apply, so that what a server serves and what the controller reports
// of it are one rule, not two that drift:
//
//   - who is served at which address (Claims, claims.go): with KubeVirt,
//     the addresses in a VirtualMachineInstance's status.interfaces
//     (ipAddress, ipAddresses) of its pod network, which the CNI gave and
//     the guest does not choose, go to the Instance that the VMI names with
//     the vminit.dev/instance annotation, or that its VirtualMachine (of
//     the same name) names (v1alpha1.InstanceNamedBy: on the VM or its
//     template), and beat the addresses specs list; a spec's addresses
//     count only inside the networks the operator's AddressPolicy gives its
//     namespace; equal claims serve nobody. The answer does not depend on
//     the order the objects arrive in, so replicas and the controller
//     agree.
//   - which references an Instance reads (Refs, refs.go): its Secret and
//     ConfigMap references (secretKeyRef, configMapKeyRef) in its own
//     namespace, never another, each noted by RefKey so that a change of
//     one loads the Instance again.
//
// It is not a store and holds no client: it reads the objects handed to
// it (a store's watch, the controller's informers), and a reader of
// Secrets and ConfigMaps (platform.Resolver) handed to NewRefs. The
// controller imports it and no store (cmd/vminit's TestLeanGraph).
package kuberules
