package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/internal/testing/laughs"
)

// TestLoadLaughs: the controller's load of an Instance whose user data is
// the issue's attack (1 GB of aliases) reports the field, and renders
// nothing, where it rendered the gigabyte under a 1 Gi memory limit and
// crash-looped while the object persisted.
func TestLoadLaughs(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "vminit.dev/v1alpha1", "kind": "Instance",
		"metadata": map[string]any{"name": "laughs", "namespace": "default", "resourceVersion": "1"},
		"spec":     map[string]any{"cloudInit": map[string]any{"userData": laughs.Issue()}}}}
	l := (&term{c: &Controller{}}).load(context.Background(), u, nil)
	found := false
	for _, p := range l.problems {
		found = found || p.Field == "spec.cloudInit.userData" && strings.Contains(p.Message, "aliases expand the document past 16777216 bytes at bootcmd[0]")
	}
	if !found || len(l.outputs) != 0 {
		t.Errorf("problems %v, %d outputs", l.problems, len(l.outputs))
	}
}
