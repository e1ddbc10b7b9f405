package v1alpha1_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vminit/vminit/kube/api/v1alpha1"
)

// TestNodeLabel: a node's label is a valid label key whatever the node's
// name (a DNS subdomain of up to 253 characters), the name itself when
// it fits, stable, and different for two long names sharing a prefix.
func TestNodeLabel(t *testing.T) {
	long := strings.Repeat("n", 45) + "-." + strings.Repeat("a", 200)
	other := strings.Repeat("n", 45) + "-." + strings.Repeat("b", 200)
	for _, node := range []string{"node-a", "ip-10-0-0-1.ec2.internal", strings.Repeat("x", 63), long, other} {
		l := v1alpha1.NodeLabel(node)
		if errs := validation.IsQualifiedName(l); len(errs) > 0 {
			t.Errorf("NodeLabel(%q) = %q: %v", node, l, errs)
		}
		if len(node) <= 63 && l != v1alpha1.NodeLabelPrefix+node {
			t.Errorf("NodeLabel(%q) = %q, want the name", node, l)
		}
		if !v1alpha1.IsNodeLabel(l) || l != v1alpha1.NodeLabel(node) {
			t.Errorf("NodeLabel(%q) = %q: not stable, or not IsNodeLabel", node, l)
		}
	}
	if v1alpha1.NodeLabel(long) == v1alpha1.NodeLabel(other) {
		t.Error("two long names share a label")
	}
}

// TestSpecDocumentWithoutNodeLabels: the controller's node labels are
// not part of the spec document, so a VM moving changes no Instance's
// data (nor its digest, nor what a server renders).
func TestSpecDocumentWithoutNodeLabels(t *testing.T) {
	spec := map[string]any{"hostname": "web"}
	plain, err := v1alpha1.SpecDocumentOf("web", map[string]string{"team": "a"}, spec)
	if err != nil {
		t.Fatal(err)
	}
	labelled, err := v1alpha1.SpecDocumentOf("web", map[string]string{"team": "a", v1alpha1.NodeLabel("node-a"): ""}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if string(plain) != string(labelled) {
		t.Errorf("node labels change the document:\n%s\n%s", plain, labelled)
	}
}
