package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The labels KubeVirt's virt-controller keeps on a VirtualMachineInstance:
// the node it runs on and, while a migration runs, the node it moves to.
const (
	KubeVirtLabelNodeName            = "kubevirt.io/nodeName"
	KubeVirtLabelMigrationTargetNode = "kubevirt.io/migrationTargetNodeName"
)

// NodeLabelPrefix begins the labels the controller keeps on an Instance,
// one per node a VirtualMachineInstance that counts for it runs on (or
// migrates to): NodeLabel(node), value "". A node agent (`vminit serve
// --kubernetes --node NODE`) lists and watches the Instances carrying its
// node's label, one selected watch, rather than each Instance by name
// (docs/design.md, "Node agents watch a label"). They are not part of the
// spec document (SpecDocumentOf leaves them out): a VM moving changes no
// Instance's data.
const NodeLabelPrefix = "node.vminit.dev/"

// maxLabelName is the longest name a label's key may have after its
// prefix (Kubernetes: 63 characters).
const maxLabelName = 63

// NodeLabel is the label that says an Instance is used on node: the
// node's name when it fits a label's name (63 characters), else its
// first 46 characters, "-" and 16 hex digits of the SHA-256 of the whole
// name (node names are DNS subdomains of up to 253 characters, all valid
// in a label's name). The controller writes it and the node agent selects
// on it, both through this one function.
func NodeLabel(node string) string {
	if len(node) <= maxLabelName {
		return NodeLabelPrefix + node
	}
	sum := sha256.Sum256([]byte(node))
	return NodeLabelPrefix + strings.TrimRight(node[:46], ".-") + "-" + hex.EncodeToString(sum[:8])
}

// IsNodeLabel reports whether a label's key is one of NodeLabel's.
func IsNodeLabel(key string) bool { return strings.HasPrefix(key, NodeLabelPrefix) }

// NodesOf returns the nodes a VirtualMachineInstance runs on, as KubeVirt
// labels it: its node and, during a migration, the target node (sorted,
// without duplicates or empties). The target's agent must hold the
// Instance before the guest switches over.
func NodesOf(vmi *unstructured.Unstructured) []string {
	l := vmi.GetLabels()
	var out []string
	for _, k := range []string{KubeVirtLabelNodeName, KubeVirtLabelMigrationTargetNode} {
		if n := l[k]; n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// withoutNodeLabels is labels less NodeLabel's (labels itself when it has
// none).
func withoutNodeLabels(labels map[string]string) map[string]string {
	var out map[string]string
	for k := range labels {
		if IsNodeLabel(k) {
			out = maps.Clone(labels)
			maps.DeleteFunc(out, func(k, _ string) bool { return IsNodeLabel(k) })
			break
		}
	}
	if out == nil {
		return labels
	}
	return out
}
