package virtlet

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/spec"
)

// Virtlet's annotations that shape the libvirt domain it defines, not the
// guest's first-boot data (Virtlet's pkg/metadata/types/annotations.go).
const (
	AnnotationVCPUCount       = "VirtletVCPUCount"
	AnnotationDiskDriver      = "VirtletDiskDriver"
	AnnotationCPUModel        = "VirtletCPUModel"
	AnnotationCPUSetting      = "VirtletLibvirtCPUSetting"
	AnnotationRootVolumeSize  = "VirtletRootVolumeSize"
	AnnotationChown9pfsMounts = "VirtletChown9pfsMounts"
	AnnotationSystemUUID      = "VirtletSystemUUID"
)

// maxVCPUCount is Virtlet's limit on VirtletVCPUCount.
const maxVCPUCount = 255

// domainSettingInfo is one of Virtlet's domain annotations: what it sets,
// and check, which refuses what Virtlet refuses when it starts the pod
// (nil: Virtlet takes any value), or, when virtlet says what else Virtlet
// does with it, a value that would silently not do what it says.
type domainSettingInfo struct {
	name, sets string
	check      func(string) error
	virtlet    string // what Virtlet does with a value check refuses; "": virtletRefuses
}

// domainSettings are checked as Virtlet checks them, so that a pod Virtlet
// would not start is not built, and otherwise noted as ignored: a seed
// cannot set them, whoever runs the VM does.
var domainSettings = []domainSettingInfo{
	{AnnotationVCPUCount, "the number of virtual CPUs", checkVCPUCount, ""},
	{AnnotationDiskDriver, "the disk bus", oneOf("virtio", "scsi"), ""},
	{AnnotationCPUModel, "the CPU model", oneOf(CPUModelHostModel), ""},
	{AnnotationCPUSetting, "libvirt's <cpu> element", checkYAMLMapping, ""},
	{AnnotationRootVolumeSize, "the root volume's size", checkQuantity, ""},
	{AnnotationChown9pfsMounts, "the ownership of 9pfs mounts", oneOf("true", "false"), flagSilent},
	// Virtlet's meta-data keeps instance-id <pod>.<namespace> whatever the
	// SMBIOS UUID is (pkg/libvirttools/cloudinit.go), and cloud-init's
	// NoCloud and ConfigDrive take the instance-id from the seed.
	{AnnotationSystemUUID, "the SMBIOS system UUID; the instance-id stays <pod>.<namespace>, as in Virtlet's meta-data", checkUUID, ""},
}

// CPUModelHostModel is the one VirtletCPUModel Virtlet accepts.
const CPUModelHostModel = "host-model"

func domainAnnotation(name string) (domainSettingInfo, bool) {
	for _, d := range domainSettings {
		if d.name == name {
			return d, true
		}
	}
	return domainSettingInfo{}, false
}

func domainNames() []string {
	out := make([]string, len(domainSettings))
	for i, d := range domainSettings {
		out[i] = d.name
	}
	return out
}

// domainSetting refuses a value Virtlet refuses and notes any other as
// ignored.
func (c *conv) domainSetting(d domainSettingInfo) {
	v := c.pod.Annotations[d.name]
	if err := d.check(v); err != nil {
		what := d.virtlet
		if what == "" {
			what = virtletRefuses
		}
		c.b.Errorf(ann(d.name), "%q: %v (%s)", v, err, what)
		return
	}
	c.b.Warnf(ann(d.name), "ignored (not first-boot data): Virtlet applies it to the VM it defines (%s)", d.sets)
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		for _, w := range values {
			if v == w {
				return nil
			}
		}
		return fmt.Errorf("want %s", quotedList(values))
	}
}

func quotedList(values []string) string {
	s := ""
	for i, v := range values {
		switch {
		case i == 0:
		case i == len(values)-1:
			s += " or "
		default:
			s += ", "
		}
		s += strconv.Quote(v)
	}
	return s
}

func checkVCPUCount(v string) error {
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return errors.New("want a whole number of virtual CPUs")
	case n > maxVCPUCount:
		return fmt.Errorf("more than Virtlet's %d virtual CPUs", maxVCPUCount)
	}
	return nil
}

func checkYAMLMapping(v string) error {
	var m map[string]any
	if err := yamlbound.Unmarshal([]byte(v), &m, spec.FieldYAML); err != nil {
		return errors.New(yamlbound.Describe(err, "not a YAML mapping"))
	}
	return nil
}

func checkQuantity(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return errors.New("want a Kubernetes quantity of bytes, such as 4Gi")
	}
	if _, ok := q.AsInt64(); !ok {
		return errors.New("want a whole number of bytes")
	}
	return nil
}

func checkUUID(v string) error {
	if _, err := uuid.Parse(v); err != nil {
		return errors.New("want a UUID, such as 53008994-44c0-4017-ad44-9c49758083da")
	}
	return nil
}
