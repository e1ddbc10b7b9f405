package kubevirt

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "kubevirt.io/api/core/v1"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// kubevirt.io/v1alpha2 as KubeVirt v0.7 to v0.12 (2018-07 to 2019-01)
// served it. kubevirt.io/api has no Go types for it any more, so it is
// declared as today's v1 types plus what v1alpha2 had and v1 dropped: a
// disk names its volume in volumeName (v1 matches them by name), a
// container image volume is a registryDisk (containerDisk from v0.12),
// and a disk may be a floppy. KubeVirt's cloud-init design document
// showed cloud-init data on a disk (disks[].cloudinit.nocloud) under
// v1alpha2, but no release had that shape (only v0.1.0, under v1alpha1):
// it is refused as the unknown field it was.
type (
	v1alpha2VMI struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata,omitempty"`
		Spec              v1alpha2Spec   `json:"spec"`
		Status            map[string]any `json:"status,omitempty"`
	}
	v1alpha2VM struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata,omitempty"`
		Spec              struct {
			Running  *bool `json:"running,omitempty"`
			Template *struct {
				metav1.ObjectMeta `json:"metadata,omitempty"`
				Spec              v1alpha2Spec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
		Status map[string]any `json:"status,omitempty"`
	}
	// v1alpha2Spec's own fields shadow those of the embedded v1 spec
	// (a field nearer the top wins, for encoding/json as for
	// jsonfields). vmiSpecFields drops the v1 spec's UnmarshalJSON, which
	// would otherwise be promoted and decode the v1 shape alone.
	v1alpha2Spec struct {
		vmiSpecFields `json:",inline"`
		Domain        v1alpha2Domain   `json:"domain"`
		Volumes       []v1alpha2Volume `json:"volumes,omitempty"`
	}
	vmiSpecFields  v1.VirtualMachineInstanceSpec
	v1alpha2Domain struct {
		v1.DomainSpec `json:",inline"`
		Devices       struct {
			v1.Devices `json:",inline"`
			Disks      []v1alpha2Disk `json:"disks,omitempty"`
		} `json:"devices"`
	}
	v1alpha2Disk struct {
		v1.Disk    `json:",inline"`
		VolumeName string `json:"volumeName"`
		Floppy     *struct {
			ReadOnly bool   `json:"readonly,omitempty"`
			Tray     string `json:"tray,omitempty"`
		} `json:"floppy,omitempty"`
	}
	v1alpha2Volume struct {
		v1.Volume    `json:",inline"`
		RegistryDisk *v1.ContainerDiskSource `json:"registryDisk,omitempty"`
	}
)

// convertV1alpha2 reads a v1alpha2 VirtualMachine or VirtualMachineInstance
// as its v1 equivalent and builds what KubeVirt of its time delivered.
func convertV1alpha2(ctx context.Context, doc *platform.Document, opts platform.Options) (*platform.Result, error) {
	var m vmi
	var s *v1alpha2Spec
	switch doc.Kind {
	case "VirtualMachine":
		var vm v1alpha2VM
		if err := decode(doc, &vm); err != nil {
			return nil, err
		}
		t := vm.Spec.Template
		if t == nil {
			return nil, spec.Errors{doc.Error("spec.template", templateRequired)}
		}
		m = vmi{name: vm.Name, namespace: vm.Namespace, annotations: t.Annotations,
			annPath: "spec.template.metadata.annotations", path: "spec.template.spec"}
		s = &t.Spec
	default:
		var v v1alpha2VMI
		if err := decode(doc, &v); err != nil {
			return nil, err
		}
		m = vmi{name: v.Name, namespace: v.Namespace, annotations: v.Annotations, annPath: annotationPrefix, path: "spec"}
		s = &v.Spec
	}
	if m.name == "" {
		return nil, spec.Errors{doc.Error("metadata.name", nameRequired)}
	}
	m.namespace = opts.NamespaceOf(m.namespace)
	m.v1alpha2 = true
	var errs spec.Errors
	m.spec, errs = s.v1(doc, m.path)
	if len(errs) > 0 {
		return nil, errs
	}
	return m.convert(ctx, doc, opts)
}

// v1 is s in today's shape: each disk named after the volume its
// volumeName names, registryDisk volumes as containerDisk. A volumeName
// that names no volume, or one two disks name, is refused, as v1alpha2's
// admission webhook refused it.
func (s *v1alpha2Spec) v1(doc *platform.Document, path string) (*v1.VirtualMachineInstanceSpec, spec.Errors) {
	out := v1.VirtualMachineInstanceSpec(s.vmiSpecFields)
	out.Domain = s.Domain.DomainSpec
	out.Domain.Devices = s.Domain.Devices.Devices
	out.Domain.Devices.Disks = nil
	out.Volumes = nil
	names := map[string]bool{}
	for _, v := range s.Volumes {
		vol := v.Volume
		if v.RegistryDisk != nil {
			vol.ContainerDisk = v.RegistryDisk
		}
		names[vol.Name] = true
		out.Volumes = append(out.Volumes, vol)
	}
	var errs spec.Errors
	used := map[string]int{}
	for i, d := range s.Domain.Devices.Disks {
		p := fmt.Sprintf("%s.domain.devices.disks[%d].volumeName", path, i)
		switch other, dup := used[d.VolumeName]; {
		case !names[d.VolumeName]:
			errs = append(errs, doc.Error(p, fmt.Sprintf("no volume is named %q: KubeVirt's virt-api webhook refuses the object (%q not found)", d.VolumeName, d.VolumeName)))
		case dup:
			errs = append(errs, doc.Error(p, fmt.Sprintf("disks[%d] names volume %q too: KubeVirt's virt-api webhook refuses the object (two disks reference the same volumeName)", other, d.VolumeName)))
		}
		if _, dup := used[d.VolumeName]; !dup {
			used[d.VolumeName] = i
		}
		disk := d.Disk
		disk.Name = d.VolumeName
		out.Domain.Devices.Disks = append(out.Domain.Devices.Disks, disk)
	}
	return &out, errs
}
