package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/kubevirt"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// The paths of a VM's template in the object.
var (
	templateAnnotations = []string{"spec", "template", "metadata", "annotations"}
	templateVolumes     = []string{"spec", "template", "spec", "volumes"}
	templateDisks       = []string{"spec", "template", "spec", "domain", "devices", "disks"}
)

func vmInstanceIndex(obj any) ([]string, error) {
	vm, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	if n := v1alpha1.InstanceNamedBy(vm); n != "" {
		return []string{vm.GetNamespace() + "/" + n}, nil
	}
	return nil, nil
}

func (t *term) vmChanged(old, obj any) {
	m, ok := metaOf(obj)
	if !ok {
		return
	}
	t.queue.Add(key{kindVM, m.GetNamespace(), m.GetName()})
	// The Instance it names is the one its VMI's addresses count for,
	// when the VMI names none (the informer's cache lost it when deleted).
	cur, _ := get(t.vms, m.GetNamespace(), m.GetName())
	vm, _ := cur.(*unstructured.Unstructured)
	t.mu.Lock()
	affected := t.claims.SetVM(m.GetNamespace()+"/"+m.GetName(), vm)
	t.mu.Unlock()
	t.requeue(affected)
	// The Instances it named and names list it in their status.
	for _, o := range []any{old, obj} {
		if vm, ok := o.(*unstructured.Unstructured); ok {
			if n := v1alpha1.InstanceNamedBy(vm); n != "" {
				t.queue.Add(key{kindInstance, vm.GetNamespace(), n})
			}
		}
	}
}

func (t *term) secretChanged(obj any) {
	m, ok := metaOf(obj)
	if !ok {
		return
	}
	// One of ours: its VM (which restores it if someone else changed it),
	// and through it the Instance listing it.
	if m.GetLabels()[LabelManagedBy] == managedBy {
		if vm := m.GetLabels()[LabelVirtualMachine]; vm != "" {
			t.queue.Add(key{kindVM, m.GetNamespace(), vm})
			if o, ok := get(t.vms, m.GetNamespace(), vm); ok {
				if n := v1alpha1.InstanceNamedBy(o.(*unstructured.Unstructured)); n != "" {
					t.queue.Add(key{kindInstance, m.GetNamespace(), n})
				}
			}
		}
	}
	// The VMs whose first-boot data reads it (a rotated key).
	t.mu.Lock()
	vms := t.deps.Dependents(m.GetNamespace() + "/" + m.GetName())
	t.mu.Unlock()
	for _, vm := range vms {
		ns, name, _ := strings.Cut(vm, "/")
		t.queue.Add(key{kindVM, ns, name})
	}
}

// virtualMachines lists the VMs that name an Instance, for its status.
func (t *term) virtualMachines(ns, name string) []v1alpha1.VirtualMachine {
	inf := informerFor(t.vms, ns)
	if inf == nil {
		return nil
	}
	vms, _ := inf.GetIndexer().ByIndex(indexInstance, ns+"/"+name)
	var out []v1alpha1.VirtualMachine
	for _, o := range vms {
		vm := o.(*unstructured.Unstructured)
		ref := v1alpha1.VirtualMachine{Name: vm.GetName(), Patched: vm.GetAnnotations()[AnnotationPatched] != ""}
		if s, ok := get(t.secrets, ns, vm.GetName()+SecretSuffix); ok {
			if m, ok := metaOf(s); ok && m.GetLabels()[LabelManagedBy] == managedBy {
				ref.Secret = m.GetName()
			}
		}
		out = append(out, ref)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// firstBoot is what a VM's guest gets: the Secret's keys.
type firstBoot struct {
	userData, networkData []byte
	ds                    seed.Datasource
	from                  string // "Instance NAME", or the VM itself
}

// syncVM reconciles one VirtualMachine.
func (t *term) syncVM(ctx context.Context, ns, name string) error {
	obj, ok := get(t.vms, ns, name)
	if !ok {
		t.forgetDeps(ns + "/" + name)
		return t.deleteSecrets(ctx, ns, name)
	}
	vm := obj.(*unstructured.Unstructured)
	fb, err := t.firstBoot(ctx, vm)
	if err != nil {
		var gone errGone
		if errors.As(err, &gone) {
			// Nothing to render any more: undo what was made for it.
			if err := t.unpatch(ctx, vm); err != nil {
				return err
			}
			return t.deleteSecrets(ctx, ns, name)
		}
		if es := spec.AsErrors(err); es != nil {
			// The last good Secret stays: a running guest keeps its data.
			t.recorder.Event(vm, corev1.EventTypeWarning, "Invalid", joinProblems(bare(es, nil)))
			return nil
		}
		return err
	}
	if fb == nil {
		return t.deleteSecrets(ctx, ns, name)
	}
	secret := name + SecretSuffix
	changed, err := t.writeSecret(ctx, vm, secret, fb)
	if err != nil {
		return err
	}
	patched := false
	if t.c.cfg.PatchVMs {
		if patched, err = t.patch(ctx, vm, secret, fb); err != nil {
			return err
		}
	}
	switch {
	case patched:
		t.recorder.Eventf(vm, corev1.EventTypeNormal, "Patched", "the VM's cloud-init volume now reads Secret %s (first-boot data from %s)", secret, fb.from)
	case changed && !t.c.cfg.PatchVMs:
		refs := "secretRef"
		if fb.networkData != nil {
			refs += " and networkDataSecretRef"
		}
		kind := "cloudInitNoCloud"
		if fb.ds == seed.ConfigDrive {
			kind = "cloudInitConfigDrive"
		}
		t.recorder.Eventf(vm, corev1.EventTypeNormal, "SecretReady", "first-boot data from %s is in Secret %s: reference it as the %s volume's %s", fb.from, secret, kind, refs)
	case changed:
		t.recorder.Eventf(vm, corev1.EventTypeNormal, "SecretUpdated", "Secret %s updated (first-boot data from %s)", secret, fb.from)
	}
	return nil
}

// errGone says the VM has no first-boot data for the controller to make
// any more (its Instance was deleted, or it names none and has no
// cloud-init data of its own).
type errGone struct{ why string }

func (e errGone) Error() string { return e.why }

// firstBoot renders the VM's first-boot data: from the Instance it names,
// else from its own cloud-init volume or Ignition annotation (as they were
// before any patch of ours), as KubeVirt would give them, minus its bugs.
func (t *term) firstBoot(ctx context.Context, vm *unstructured.Unstructured) (*firstBoot, error) {
	orig, err := restored(vm)
	if err != nil {
		return nil, spec.Errors{{Field: "metadata.annotations[" + AnnotationPatched + "]", Message: err.Error()}}
	}
	ns := vm.GetNamespace()
	vmKey := ns + "/" + vm.GetName()
	if name := v1alpha1.InstanceNamedBy(vm); name != "" {
		t.forgetDeps(vmKey)
		o, ok := get(t.instances, ns, name)
		if !ok {
			return nil, errGone{fmt.Sprintf("Instance %s/%s not found", ns, name)}
		}
		t.mu.Lock()
		l := t.loaded[ns+"/"+name]
		t.mu.Unlock()
		if l == nil || l.rv != rvOf(o) || l.doc == nil { // nil doc: a reference changed
			l = t.load(ctx, o.(*unstructured.Unstructured), l)
		}
		if len(l.problems) > 0 {
			return nil, append(spec.Errors{{Message: fmt.Sprintf("Instance %s is invalid; the VM keeps its last good data", name)}}, l.problems...)
		}
		ds := volumeDatasource(orig)
		if ds == "" {
			ds = render.Target{}.DatasourceFor(l.rec.Instance())
		}
		return renderFirstBoot(l.rec.Instance(), ds, "Instance "+name, t.c.reportTo)
	}
	if !hasFirstBootData(orig) {
		t.forgetDeps(vmKey)
		return nil, errGone{"no Instance named, no cloud-init volume, no Ignition annotation"}
	}
	doc, err := vmDocument(orig)
	if err != nil {
		return nil, err
	}
	res := &recorder{base: t.c.resolver, t: t, vm: vmKey}
	r, err := kubevirt.Convert(ctx, doc, platform.Options{Resolver: res, Namespace: ns})
	t.setDeps(vmKey, res.read)
	if err != nil {
		return nil, err
	}
	if r.Instance == nil {
		return nil, nil // a sysprep disc only: nothing for cloud-init
	}
	// No report: the server answers a guest by the Instance its VMI
	// names, and this VM names none, so a report would be refused
	// (after costing each of cloud-init's stages the webhook's retries).
	return renderFirstBoot(r.Instance, render.Target{}.DatasourceFor(r.Instance), "the VM's own cloud-init data", "")
}

func rvOf(o any) int64 {
	m, _ := metaOf(o)
	var rv int64
	fmt.Sscan(m.GetResourceVersion(), &rv)
	return rv
}

// renderFirstBoot renders the user data and network data the guest reads through
// KubeVirt's cloud-init volume of datasource ds: for Ignition, the config
// (Fedora CoreOS and RHCOS kubevirt images read it as the config drive's
// user data). With reportTo (a base URL; "" for none) the guest reports
// its first boot there, rendered as `vminit build --report-to` renders it.
func renderFirstBoot(inst *spec.Instance, ds seed.Datasource, from, reportTo string) (*firstBoot, error) {
	rep := render.Instance(inst, render.Target{Datasource: ds, ReportTo: reportTo})
	if !rep.OK() {
		return nil, rep.Errors
	}
	fb := &firstBoot{ds: ds, from: from}
	switch {
	case rep.Ignition != nil:
		fb.userData = rep.Ignition.Config
	case rep.Seed != nil:
		fb.userData, _ = rep.Seed.Lookup(ds.UserDataPath())
		if nd, ok := rep.Seed.Lookup(ds.NetworkConfigPath()); ok {
			fb.networkData = nd
		}
	}
	return fb, nil
}

// cloudInitKinds are KubeVirt's cloud-init volume types.
var cloudInitKinds = []string{"cloudInitNoCloud", "cloudInitConfigDrive"}

// cloudInitVolume returns the index of the VM's first cloud-init volume
// (as virt-launcher takes it) and its kind, or -1.
func cloudInitVolume(vm *unstructured.Unstructured) (int, string) {
	vols, _, _ := unstructured.NestedSlice(vm.Object, templateVolumes...)
	for i, v := range vols {
		m, _ := v.(map[string]any)
		for _, k := range cloudInitKinds {
			if _, ok := m[k]; ok {
				return i, k
			}
		}
	}
	return -1, ""
}

// volumeDatasource is the seed layout the VM's cloud-init volume takes,
// "" without one.
func volumeDatasource(vm *unstructured.Unstructured) seed.Datasource {
	switch _, k := cloudInitVolume(vm); k {
	case "cloudInitNoCloud":
		return seed.NoCloud
	case "cloudInitConfigDrive":
		return seed.ConfigDrive
	}
	return ""
}

func hasFirstBootData(vm *unstructured.Unstructured) bool {
	if i, _ := cloudInitVolume(vm); i >= 0 {
		return true
	}
	ann, _, _ := unstructured.NestedStringMap(vm.Object, templateAnnotations...)
	_, ok := ann[kubevirt.AnnotationIgnition]
	return ok
}

// vmDocument is the VM as platform/kubevirt reads it: what the user wrote
// (status and server-side metadata left out, which its strict decoding of
// KubeVirt's types would otherwise have to match).
func vmDocument(vm *unstructured.Unstructured) (*platform.Document, error) {
	m := map[string]any{"name": vm.GetName(), "namespace": vm.GetNamespace()}
	if a := vm.GetAnnotations(); len(a) > 0 {
		m["annotations"] = a
	}
	if l := vm.GetLabels(); len(l) > 0 {
		m["labels"] = l
	}
	b, err := json.Marshal(map[string]any{"apiVersion": vm.GetAPIVersion(), "kind": vm.GetKind(), "metadata": m, "spec": vm.Object["spec"]})
	if err != nil {
		return nil, err
	}
	docs, err := platform.Split("", b)
	if err != nil {
		return nil, err
	}
	return docs[0], nil
}

// recorder is a platform.Resolver that notes which Secrets a VM's data
// read, so that a change to one of them re-renders the VM.
type recorder struct {
	base platform.Resolver
	t    *term
	vm   string
	read []string
}

func (r *recorder) Data(ctx context.Context, kind, ns, name string) (map[string][]byte, error) {
	if kind != platform.KindSecret {
		return nil, errors.New("the controller does not read ConfigMaps (sysprep volumes are Windows answer files, not cloud-init data)")
	}
	r.read = append(r.read, ns+"/"+name)
	return r.base.Data(ctx, kind, ns, name)
}

func (t *term) setDeps(vm string, read []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deps.Set(vm, read...)
}

func (t *term) forgetDeps(vm string) { t.setDeps(vm, nil) }

// writeSecret creates or updates the VM's Secret; it writes only when the
// bytes, labels or owner differ, and never a Secret it did not make.
func (t *term) writeSecret(ctx context.Context, vm *unstructured.Unstructured, name string, fb *firstBoot) (bool, error) {
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: vm.GetNamespace(),
			Labels: map[string]string{LabelManagedBy: managedBy, LabelVirtualMachine: vm.GetName()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: vm.GetAPIVersion(), Kind: vm.GetKind(),
				Name: vm.GetName(), UID: vm.GetUID(), Controller: new(true)}}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"userdata": fb.userData},
	}
	if fb.networkData != nil {
		want.Data["networkdata"] = fb.networkData
	}
	client := t.c.kube.CoreV1().Secrets(vm.GetNamespace())
	cur, err := client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := client.Create(ctx, want, metav1.CreateOptions{FieldManager: "vminit-controller"}); err != nil {
			return false, err
		}
		t.c.metrics.secretWrites.Add(1)
		return true, nil
	case err != nil:
		return false, err
	}
	if cur.Labels[LabelManagedBy] != managedBy || cur.Labels[LabelVirtualMachine] != vm.GetName() {
		t.recorder.Eventf(vm, corev1.EventTypeWarning, "SecretExists", "Secret %s exists and was not made by vminit for this VM; it is left alone, and the VM's first-boot data is not written", name)
		return false, nil
	}
	if sameSecret(cur, want) {
		t.c.metrics.skipped.Add(1)
		return false, nil
	}
	next := cur.DeepCopy()
	next.Labels, next.OwnerReferences, next.Data, next.StringData, next.Type = want.Labels, want.OwnerReferences, want.Data, nil, want.Type
	if _, err := client.Update(ctx, next, metav1.UpdateOptions{FieldManager: "vminit-controller"}); err != nil {
		return false, err
	}
	t.c.metrics.secretWrites.Add(1)
	return true, nil
}

func sameSecret(cur, want *corev1.Secret) bool {
	if cur.Type != want.Type || len(cur.Data) != len(want.Data) || !maps.Equal(cur.Labels, want.Labels) {
		return false
	}
	for k, v := range want.Data {
		if !bytes.Equal(cur.Data[k], v) {
			return false
		}
	}
	if len(cur.OwnerReferences) != 1 {
		return false
	}
	o, w := cur.OwnerReferences[0], want.OwnerReferences[0]
	return o.UID == w.UID && o.Name == w.Name && o.Kind == w.Kind && o.Controller != nil && *o.Controller
}

// deleteSecrets deletes the Secrets the controller made for VM ns/vm.
func (t *term) deleteSecrets(ctx context.Context, ns, vm string) error {
	inf := informerFor(t.secrets, ns)
	if inf == nil {
		return nil
	}
	for _, o := range inf.GetStore().List() {
		m, ok := metaOf(o)
		if !ok || m.GetNamespace() != ns || m.GetLabels()[LabelManagedBy] != managedBy || m.GetLabels()[LabelVirtualMachine] != vm {
			continue
		}
		uid := m.GetUID()
		err := t.c.kube.CoreV1().Secrets(ns).Delete(ctx, m.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
		t.c.metrics.secretWrites.Add(1)
	}
	return nil
}

// patchRecord is what a patch replaced, kept in AnnotationPatched.
type patchRecord struct {
	// Volume is the name of the cloud-init volume the patch set.
	Volume string `json:"volume"`
	// Original is that volume as it was, nil when the patch added it
	// (with a disk of the same name).
	Original map[string]any `json:"original,omitempty"`
	// IgnitionData is the kubevirt.io/ignitiondata annotation the patch
	// removed (its config now comes from the Secret).
	IgnitionData *string `json:"ignitionData,omitempty"`
}

// patchVolume is the name of a cloud-init volume the patch adds.
const patchVolume = "vminit-cloudinit"

// restored returns the VM as it was before the controller patched it (vm
// itself when it was not).
func restored(vm *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	raw := vm.GetAnnotations()[AnnotationPatched]
	if raw == "" {
		return vm, nil
	}
	var p patchRecord
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return nil, fmt.Errorf("not what vminit wrote: %v", err)
	}
	out := vm.DeepCopy()
	vols, _, _ := unstructured.NestedSlice(out.Object, templateVolumes...)
	var kept []any
	for _, v := range vols {
		m, _ := v.(map[string]any)
		if m["name"] != p.Volume {
			kept = append(kept, v)
		} else if p.Original != nil {
			kept = append(kept, p.Original)
		}
	}
	setOrRemove(out, kept, templateVolumes...)
	if p.Original == nil {
		disks, _, _ := unstructured.NestedSlice(out.Object, templateDisks...)
		disks = slices.DeleteFunc(disks, func(d any) bool { m, _ := d.(map[string]any); return m["name"] == p.Volume })
		setOrRemove(out, disks, templateDisks...)
	}
	if p.IgnitionData != nil {
		unstructured.SetNestedField(out.Object, *p.IgnitionData, append(slices.Clone(templateAnnotations), kubevirt.AnnotationIgnition)...)
	}
	ann := out.GetAnnotations()
	delete(ann, AnnotationPatched)
	out.SetAnnotations(ann)
	return out, nil
}

func setOrRemove(u *unstructured.Unstructured, list []any, path ...string) {
	if len(list) == 0 {
		unstructured.RemoveNestedField(u.Object, path...)
		return
	}
	unstructured.SetNestedSlice(u.Object, list, path...)
}

// patch points the VM's cloud-init volume at the Secret (adding one when
// it has none) and reports whether it wrote.
func (t *term) patch(ctx context.Context, vm *unstructured.Unstructured, secret string, fb *firstBoot) (bool, error) {
	orig, err := restored(vm)
	if err != nil {
		return false, err
	}
	next := orig.DeepCopy()
	rec := patchRecord{Volume: patchVolume}
	source := map[string]any{"secretRef": map[string]any{"name": secret}}
	if fb.networkData != nil {
		source["networkDataSecretRef"] = map[string]any{"name": secret}
	}
	vols, _, _ := unstructured.NestedSlice(next.Object, templateVolumes...)
	if i, kind := cloudInitVolume(next); i >= 0 {
		m := vols[i].(map[string]any)
		rec.Volume, _ = m["name"].(string)
		rec.Original = runtime.DeepCopyJSON(m)
		vols[i] = map[string]any{"name": rec.Volume, kind: source}
	} else {
		kind := "cloudInitNoCloud"
		if fb.ds == seed.ConfigDrive {
			kind = "cloudInitConfigDrive"
		}
		vols = append(vols, map[string]any{"name": patchVolume, kind: source})
		disks, _, _ := unstructured.NestedSlice(next.Object, templateDisks...)
		disks = append(disks, map[string]any{"name": patchVolume, "disk": map[string]any{"bus": "virtio"}})
		unstructured.SetNestedSlice(next.Object, disks, templateDisks...)
	}
	unstructured.SetNestedSlice(next.Object, vols, templateVolumes...)
	ann, _, _ := unstructured.NestedStringMap(next.Object, templateAnnotations...)
	if ign, ok := ann[kubevirt.AnnotationIgnition]; ok {
		rec.IgnitionData = &ign
		delete(ann, kubevirt.AnnotationIgnition)
		unstructured.SetNestedStringMap(next.Object, ann, templateAnnotations...)
	}
	raw, _ := json.Marshal(rec)
	a := next.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationPatched] = string(raw)
	next.SetAnnotations(a)
	return t.updateVM(ctx, vm, next)
}

// unpatch puts back what patch replaced.
func (t *term) unpatch(ctx context.Context, vm *unstructured.Unstructured) error {
	if vm.GetAnnotations()[AnnotationPatched] == "" {
		return nil
	}
	orig, err := restored(vm)
	if err != nil {
		return err
	}
	_, err = t.updateVM(ctx, vm, orig)
	return err
}

// updateVM writes next when it differs from cur (metadata and spec).
func (t *term) updateVM(ctx context.Context, cur, next *unstructured.Unstructured) (bool, error) {
	a, _ := json.Marshal([]any{cur.GetAnnotations(), cur.Object["spec"]})
	b, _ := json.Marshal([]any{next.GetAnnotations(), next.Object["spec"]})
	if bytes.Equal(a, b) {
		return false, nil
	}
	_, err := t.c.dyn.Resource(v1alpha1.KubeVirtVirtualMachines).Namespace(cur.GetNamespace()).Update(ctx, next, metav1.UpdateOptions{FieldManager: "vminit-controller"})
	if err != nil {
		return false, err
	}
	t.c.metrics.vmWrites.Add(1)
	return true, nil
}
