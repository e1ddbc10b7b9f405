package virtlet_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/platformtest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/spec"
)

// corpusPod converts the Pod of Virtlet's published file name (from
// platform/testdata/corpus/virtlet) alone, as `vminit build` does.
func corpusPod(t *testing.T, name string) *platform.Result {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", "virtlet", name))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := platform.Split(name, data)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(docs, func(d *platform.Document) bool { return d.Kind == "Pod" })
	if i < 0 {
		t.Fatalf("%s: no Pod", name)
	}
	rs, err := convert.Documents(t.Context(), docs[i:i+1], platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rs[0]
}

// TestCorpusDomainAnnotations: Virtlet's published pods that set the VM's
// CPUs, disk bus, CPU model or root volume size build, each such
// annotation noted as ignored at its line.
func TestCorpusDomainAnnotations(t *testing.T) {
	const note = `"]: ignored (not first-boot data): Virtlet applies it to the VM it defines`
	for _, c := range []struct {
		file, pod string
		notes     []string // FILE:LINE: metadata.annotations["NAME
	}{
		{"virtlet-cirros-vm.yaml", "cirros-vm", []string{`:10: metadata.annotations["VirtletDiskDriver`, `:15: metadata.annotations["VirtletRootVolumeSize`}},
		{"virtlet-cirros-vm-with-additional-annotations.yaml", "cirros-vm-with-additional-annotations",
			[]string{`:15: metadata.annotations["VirtletVCPUCount`, `:17: metadata.annotations["VirtletDiskDriver`}},
		{"virtlet-docs-reference-vm-pod-spec-L42.yaml", "cirros-vm",
			[]string{`:14: metadata.annotations["VirtletVCPUCount`, `:16: metadata.annotations["VirtletDiskDriver`, `:21: metadata.annotations["VirtletRootVolumeSize`}},
		{"virtlet-ubuntu-vm-with-libvirt-cpusetting.yaml", "ubuntu-vm-with-nested-virtualization",
			[]string{`:12: metadata.annotations["VirtletCPUModel`, `:17: metadata.annotations["VirtletLibvirtCPUSetting`}},
		{"virtlet-ubuntu-vm-with-nested-virtualization.yaml", "ubuntu-vm-with-nested-virtualization", []string{`:12: metadata.annotations["VirtletCPUModel`}},
		{"virtlet-debian-vm.yaml", "debian-vm", []string{`:11: metadata.annotations["VirtletRootVolumeSize`}},
		{"virtlet-cirros-vm-persistent-rootfs-local.yaml", "cirros-vm-pl", []string{`:51: metadata.annotations["VirtletDiskDriver`}},
	} {
		t.Run(c.file, func(t *testing.T) {
			r := corpusPod(t, c.file)
			ws := strings.Join(r.Warnings, "\n")
			for _, n := range c.notes {
				if !strings.Contains(ws, c.file+n+note) {
					t.Errorf("warnings lack %q:\n%s", c.file+n+note, ws)
				}
			}
			s := r.Instance.Spec
			platformtest.Eq(t, "instanceID", s.InstanceID, c.pod+".default")
			platformtest.Eq(t, "hostname", s.Hostname, c.pod)
		})
	}
}

// TestDomainAnnotationValues: a value Virtlet refuses at pod start is
// refused, naming the annotation and its line; VirtletSystemUUID leaves the
// instance-id Virtlet's meta-data gives.
func TestDomainAnnotationValues(t *testing.T) {
	const dhcp = "VirtletForceDHCPNetworkConfig: \"true\"\n"
	platformtest.Run(t, []platformtest.Case{
		{Name: "every domain annotation", Doc: pod(dhcp+"VirtletVCPUCount: \"255\"\nVirtletDiskDriver: scsi\nVirtletCPUModel: host-model\nVirtletLibvirtCPUSetting: |\n  mode: host-passthrough\nVirtletRootVolumeSize: 1Gi\nVirtletChown9pfsMounts: \"true\"\nVirtletSystemUUID: 53008994-44c0-4017-ad44-9c49758083da\n", "", ""),
			Warns: []string{`vm.yaml:9: metadata.annotations["VirtletVCPUCount"]: ignored (not first-boot data): Virtlet applies it to the VM it defines (the number of virtual CPUs)`,
				`vm.yaml:16: metadata.annotations["VirtletSystemUUID"]: ignored (not first-boot data): Virtlet applies it to the VM it defines (the SMBIOS system UUID; the instance-id stays <pod>.<namespace>`,
				`VirtletDiskDriver"]: ignored`, `VirtletCPUModel"]: ignored`, `VirtletLibvirtCPUSetting"]: ignored`, `VirtletRootVolumeSize"]: ignored`, `VirtletChown9pfsMounts"]: ignored`},
			Check: func(t *testing.T, s *spec.Spec, r *platform.Result) {
				platformtest.Eq(t, "instanceID", s.InstanceID, "vm-1.ns")
			}},
		{Name: "values Virtlet refuses", Doc: pod(dhcp+"VirtletVCPUCount: \"256\"\nVirtletDiskDriver: ide\nVirtletCPUModel: Westmere\nVirtletLibvirtCPUSetting: \"[a\"\nVirtletRootVolumeSize: big\nVirtletChown9pfsMounts: \"yes\"\nVirtletSystemUUID: \"1234\"\n", "", ""),
			Errs: []string{`vm.yaml:9: metadata.annotations["VirtletVCPUCount"]: "256": more than Virtlet's 255 virtual CPUs (Virtlet refuses to start the pod: its CreateContainer fails)`,
				`vm.yaml:10: metadata.annotations["VirtletDiskDriver"]: "ide": want "virtio" or "scsi" (Virtlet refuses`,
				`metadata.annotations["VirtletCPUModel"]: "Westmere": want "host-model"`,
				`metadata.annotations["VirtletLibvirtCPUSetting"]: "[a": not a YAML mapping`,
				`metadata.annotations["VirtletRootVolumeSize"]: "big": want a Kubernetes quantity of bytes`,
				`metadata.annotations["VirtletChown9pfsMounts"]: "yes": want "true" or "false" (Virtlet reads anything but "true" as false, silently) (in Pod/vm-1)`,
				`vm.yaml:15: metadata.annotations["VirtletSystemUUID"]: "1234": want a UUID`}},
		{Name: "VCPU count not a number", Doc: pod(dhcp+"VirtletVCPUCount: two\n", "", ""),
			Errs: []string{`metadata.annotations["VirtletVCPUCount"]: "two": want a whole number of virtual CPUs`}},
	})
}

// TestAnnotationProblemsInOrder: the problems with the annotations come in
// name order on every run (they came in the map's random order).
func TestAnnotationProblemsInOrder(t *testing.T) {
	doc := pod("VirtletZeta: x\nVirtletAlpha: x\nVirtletVCPUCount: many\nVirtletMid: x\nVirtletBeta: x\nVirtletDiskDriver: ide\n", "", "")
	var first string
	for range 20 {
		_, err := platformtest.Convert(t, doc, platform.Options{})
		if err == nil {
			t.Fatal("converted")
		}
		if first == "" {
			first = err.Error()
			continue
		}
		if err.Error() != first {
			t.Fatalf("the problems came in another order:\n%v\nthen:\n%s", err, first)
		}
	}
	var order []int
	for _, name := range []string{"VirtletAlpha", "VirtletBeta", "VirtletDiskDriver", "VirtletMid", "VirtletVCPUCount", "VirtletZeta"} {
		order = append(order, strings.Index(first, `["`+name+`"]`))
	}
	if !slices.IsSorted(order) || order[0] < 0 {
		t.Errorf("problems not in name order:\n%s", first)
	}
}

// TestCorpusRuntimeNameBefore10: Virtlet 0.8's published pod names the
// runtime "virtlet", as Virtlet before 1.0 did: no warning about it.
func TestCorpusRuntimeNameBefore10(t *testing.T) {
	r := corpusPod(t, "virtlet-v0.8.0-cirros-vm.yaml")
	for _, w := range r.Warnings {
		if strings.Contains(w, "target-runtime") {
			t.Errorf("warning: %s", w)
		}
	}
}
