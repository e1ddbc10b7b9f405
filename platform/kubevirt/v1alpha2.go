package kubevirt

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "kubevirt.io/api/core/v1"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// v1alpha2VMI is the 2018 kubevirt.io/v1alpha2 VirtualMachineInstance, as
// KubeVirt's cloud-init design document shows it: cloud-init data on a
// disk of the domain, not in a volume. kubevirt.io/api has no Go types for
// it any more (the version was removed in 2019), so the fields it had for
// cloud-init are declared here; everything else is kept opaque.
type v1alpha2VMI struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Domain struct {
			Devices struct {
				Disks []struct {
					Type      string          `json:"type,omitempty"`
					Source    json.RawMessage `json:"source,omitempty"`
					Target    json.RawMessage `json:"target,omitempty"`
					Cloudinit *struct {
						Nocloud *struct {
							UserDataBase64    string `json:"userDataBase64,omitempty"`
							UserDataSecretRef string `json:"userDataSecretRef,omitempty"`
						} `json:"nocloud,omitempty"`
					} `json:"cloudinit,omitempty"`
				} `json:"disks,omitempty"`
				Interfaces []json.RawMessage `json:"interfaces,omitempty"`
			} `json:"devices"`
			Memory json.RawMessage `json:"memory,omitempty"`
			OS     json.RawMessage `json:"os,omitempty"`
			Type   string          `json:"type,omitempty"`
		} `json:"domain"`
	} `json:"spec"`
}

// convertV1alpha2 reads a v1alpha2 VMI's NoCloud data with the same rules
// as today's volumes.
func convertV1alpha2(ctx context.Context, doc *platform.Document, opts platform.Options) (*platform.Result, error) {
	var old v1alpha2VMI
	if err := doc.Decode(&old); err != nil {
		return nil, err
	}
	m := vmi{name: old.Metadata.Name, namespace: opts.NamespaceOf(old.Metadata.Namespace),
		annotations: old.Metadata.Annotations, annPath: annotationPrefix, spec: &v1.VirtualMachineInstanceSpec{}, path: "spec"}
	if m.name == "" {
		return nil, spec.Errors{doc.Error("metadata.name", "required")}
	}
	for i, d := range old.Spec.Domain.Devices.Disks {
		if d.Cloudinit == nil || d.Cloudinit.Nocloud == nil {
			continue
		}
		p := fmt.Sprintf("spec.domain.devices.disks[%d].cloudinit.nocloud", i)
		if m.legacy != nil {
			continue
		}
		n := d.Cloudinit.Nocloud
		c := &cloudInit{userDataBase64: n.UserDataBase64, legacyRef: "userDataSecretRef"}
		if n.UserDataSecretRef != "" {
			c.userDataSecret = &corev1.LocalObjectReference{Name: n.UserDataSecretRef}
		}
		m.legacy, m.legacyPath = c, p
	}
	return m.convert(ctx, doc, opts)
}
