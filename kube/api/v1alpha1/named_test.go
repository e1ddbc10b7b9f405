package v1alpha1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/kube/api/v1alpha1"
)

// TestInstanceNamedBy: an object's own annotation, else its template's.
func TestInstanceNamedBy(t *testing.T) {
	vm := &unstructured.Unstructured{Object: map[string]any{}}
	if n := v1alpha1.InstanceNamedBy(vm); n != "" {
		t.Errorf("none: %q", n)
	}
	unstructured.SetNestedStringMap(vm.Object, map[string]string{v1alpha1.AnnotationInstance: "tpl"}, "spec", "template", "metadata", "annotations")
	if n := v1alpha1.InstanceNamedBy(vm); n != "tpl" {
		t.Errorf("template: %q", n)
	}
	vm.SetAnnotations(map[string]string{v1alpha1.AnnotationInstance: "own"})
	if n := v1alpha1.InstanceNamedBy(vm); n != "own" {
		t.Errorf("own over template: %q", n)
	}
}
