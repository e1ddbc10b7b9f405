package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vminit/vminit/internal/lib/parallel"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/kuberules"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/spec"
)

// loaded is an Instance's spec document, loaded and checked as `vminit
// validate` would.
type loaded struct {
	doc []byte
	rv  int64
	// rec is the document as a metadata server loads it
	// (registry.DecodeDocument), nil when it does not load; good is the
	// last version that loaded, which a server keeps serving meanwhile
	// (and whose addresses it still claims).
	rec, good *registry.Record
	// problems are every error of spec.Parse and render.Instance;
	// warnings check's warnings.
	problems, warnings spec.Errors
	// outputs are the rendered files' digests, and rendered what the
	// Rendered condition says of them ("" when nothing rendered). The
	// files themselves are not kept: 10,000 Instances' seeds would be
	// most of the controller's memory.
	outputs  []v1alpha1.Output
	rendered string
	// refs are the Secrets and ConfigMaps the document refers to
	// (kuberules.RefKey), read or missing: a change of one loads it again.
	refs map[string]bool
}

// load reads an Instance object, and the Secrets and ConfigMaps it refers
// to in its namespace. prev is the last load of the same key: an object
// whose document has not changed (a status write, a label added) is not
// loaded again, unless referenceChanged made prev stale.
func (t *term) load(ctx context.Context, u *unstructured.Unstructured, prev *loaded) *loaded {
	rv, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	sp, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec")
	doc, err := v1alpha1.SpecDocumentOf(u.GetName(), u.GetLabels(), sp)
	l := &loaded{doc: doc, rv: rv}
	if prev != nil {
		l.good = prev.good
	}
	if err != nil {
		l.problems = spec.Errors{{Message: err.Error()}}
		return l
	}
	if prev != nil && bytes.Equal(prev.doc, doc) {
		l := *prev
		l.rv = rv
		return &l
	}
	refs := kuberules.NewRefs(ctx, t.c.resolver, u.GetNamespace())
	rec, err := registry.DecodeDocumentWith(spec.Loader{Refs: refs, IdentifiedByPlatform: true}, doc, "")
	l.refs = refs.Deps()
	if err != nil {
		l.problems = bare(spec.AsErrors(err), err)
		return l
	}
	l.rec, l.good = rec, rec
	r := render.Instance(rec.Instance(), render.Target{})
	l.problems, l.warnings = bare(r.Errors, nil), bare(r.Warnings, nil)
	secret := readsSecret(l.refs)
	switch {
	case !r.OK():
	case r.Ignition != nil:
		l.outputs = []v1alpha1.Output{output("config.ign", r.Ignition.Config, secret)}
		l.rendered = fmt.Sprintf("Ignition config, spec %s", r.Ignition.Version)
		if !secret {
			l.rendered += fmt.Sprintf(", %d bytes", len(r.Ignition.Config))
		}
	case r.Seed != nil:
		for _, f := range r.Seed.Files {
			l.outputs = append(l.outputs, output(f.Path, f.Data, secret))
		}
		l.rendered = fmt.Sprintf("cloud-init %s seed, %d files", r.Seed.Datasource, len(r.Seed.Files))
	}
	if secret {
		l.rendered += " (with values from Secrets: no digests in status.outputs)"
	}
	return l
}

// readsSecret says whether a document's references (loaded.refs) read a
// Secret. Its rendered files then publish no digest and no size: who may
// read the Instance is a wider set than who may read the Secret, and a
// sha256 of bytes that hold a short password, token or key lets the
// former test guesses of it offline (the rest of the file is known from
// the Instance's spec). The rule is the Instance's, not each file's:
// which files a value reaches is the renderer's business (a password
// hash in user-data, keys in meta_data.json on ConfigDrive, everything in
// the one Ignition config), and a guess wrong here would publish a
// digest of a secret. A keyed HMAC would keep change detection, but its
// key would have to outlive the controller's restarts (else every
// restart rewrites every status) and be one more secret to keep; the
// Secrets' versions in status.secrets already say when they change.
func readsSecret(refs map[string]bool) bool {
	for ref := range refs {
		if kind, _, _, ok := kuberules.ParseRefKey(ref); ok && kind == spec.RefSecret {
			return true
		}
	}
	return false
}

// bare drops file names and lines: the document is the object's, made
// here, and its lines are nobody's.
func bare(es spec.Errors, err error) spec.Errors {
	if es == nil && err != nil {
		return spec.Errors{{Message: err.Error()}}
	}
	out := make(spec.Errors, len(es))
	for i, e := range es {
		c := *e
		c.File, c.Line = "", 0
		out[i] = &c
	}
	return out
}

func (t *term) instanceChanged(obj any) {
	m, ok := metaOf(obj)
	if !ok {
		return
	}
	t.queue.Add(key{kindInstance, m.GetNamespace(), m.GetName()})
	// The VMs that name it render from it.
	for ns, inf := range t.vms {
		if ns != metav1.NamespaceAll && ns != m.GetNamespace() {
			continue
		}
		vms, _ := inf.GetIndexer().ByIndex(indexInstance, m.GetNamespace()+"/"+m.GetName())
		for _, vm := range vms {
			if vm, ok := metaOf(vm); ok {
				t.queue.Add(key{kindVM, vm.GetNamespace(), vm.GetName()})
			}
		}
	}
}

// loadAll loads every cached Instance on every core and claims their
// addresses, then queues every object.
func (t *term) loadAll(ctx context.Context) {
	var objs []*unstructured.Unstructured
	for _, inf := range t.instances {
		for _, o := range inf.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				objs = append(objs, u)
			}
		}
	}
	ls := parallel.Map(len(objs), 0, func(i int) *loaded { return t.load(ctx, objs[i], nil) })
	t.mu.Lock()
	for i, u := range objs {
		k := u.GetNamespace() + "/" + u.GetName()
		t.setRefDeps(k, ls[i])
		t.loaded[k] = ls[i]
		t.claims.SetSpec(k, ls[i].addresses())
	}
	t.mu.Unlock()
	for _, u := range objs {
		t.queue.Add(key{kindInstance, u.GetNamespace(), u.GetName()})
	}
	for _, inf := range t.vms {
		for _, o := range inf.GetStore().List() {
			if m, ok := metaOf(o); ok {
				t.queue.Add(key{kindVM, m.GetNamespace(), m.GetName()})
			}
		}
	}
}

// addresses are those the spec a server serves lists.
func (l *loaded) addresses() []netip.Addr {
	if l == nil || l.good == nil {
		return nil
	}
	return l.good.Addresses
}

// applyServed claims the addresses of key's version l (nil: the object is
// gone) and queues the other Instances whose Served that may change.
func (t *term) applyServed(k string, l *loaded) {
	t.mu.Lock()
	t.setRefDeps(k, l)
	if l == nil {
		delete(t.loaded, k)
	} else {
		t.loaded[k] = l
	}
	affected := t.claims.SetSpec(k, l.addresses())
	t.mu.Unlock()
	t.requeue(slices.DeleteFunc(affected, func(a string) bool { return a == k }))
}

// requeue queues the Instances keys names (namespace/name).
func (t *term) requeue(keys []string) {
	for _, r := range keys {
		ns, name, _ := strings.Cut(r, "/")
		t.queue.Add(key{kindInstance, ns, name})
	}
}

// vmiChanged claims a VMI's addresses for the Instance it counts for.
func (t *term) vmiChanged(obj any, gone bool) {
	m, ok := metaOf(obj)
	if !ok {
		return
	}
	u, _ := obj.(*unstructured.Unstructured)
	if gone {
		u = nil
	}
	t.mu.Lock()
	affected := t.claims.SetVMI(m.GetNamespace()+"/"+m.GetName(), u)
	t.mu.Unlock()
	t.requeue(affected)
}

// served is the Served condition of key's version l: what the metadata
// servers' rule (kuberules.Claims) makes of it.
func (t *term) served(k string, l *loaded) metav1.Condition {
	t.mu.Lock()
	res := t.claims.Resolve(k)
	t.mu.Unlock()
	c := metav1.Condition{Type: v1alpha1.ConditionServed}
	at := listed(res.Addresses)
	switch {
	case l.rec == nil:
		c.Status, c.Reason = metav1.ConditionFalse, "Invalid"
		c.Message = "the spec does not load, so the metadata server does not serve this version"
		if l.good != nil {
			c.Message += " (it keeps serving the last version that loaded, at " + at + ")"
		}
	case len(res.Problems) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, "AddressRefused"
		if len(res.Conflicts) > 0 {
			c.Reason = "Conflict"
		}
		c.Message = joinProblems(append(spec.Errors{{Message: "served at " + at + ", but not at every address it claims:"}}, res.Problems...))
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "Served", "served to "+at
		if len(res.Addresses) == 0 {
			c.Message = "served at " + at
		}
	}
	return c
}

// syncInstance reconciles one Instance: load, check, render, status.
func (t *term) syncInstance(ctx context.Context, ns, name string) error {
	k := ns + "/" + name
	obj, ok := get(t.instances, ns, name)
	if !ok {
		t.applyServed(k, nil)
		return nil
	}
	u := obj.(*unstructured.Unstructured)
	t.mu.Lock()
	prev := t.loaded[k]
	t.mu.Unlock()
	l := t.load(ctx, u, prev)
	if prev == nil || prev.rv != l.rv || !bytes.Equal(prev.doc, l.doc) {
		t.applyServed(k, l)
	}
	if t.c.cfg.KubeVirt {
		var err error
		if u, err = t.labelNodes(ctx, u); err != nil || u == nil {
			return err
		}
	}
	cur, _ := statusOf(u)
	next := t.status(u, l, cur)
	if statusEqual(cur, next) {
		t.c.metrics.skipped.Add(1)
		return nil
	}
	out := u.DeepCopy()
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(next)
	if err != nil {
		return err
	}
	out.Object["status"] = st
	_, err = t.c.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).UpdateStatus(ctx, out, metav1.UpdateOptions{FieldManager: "vminit-controller"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err // a conflict: the informer delivers the newer version, and the retry uses it
	}
	t.c.metrics.statusWrites.Add(1)
	t.events(u, cur, next, l)
	return nil
}

// statusOf reads an object's status.
func statusOf(u *unstructured.Unstructured) (*v1alpha1.InstanceStatus, error) {
	st := &v1alpha1.InstanceStatus{}
	m, ok, _ := unstructured.NestedMap(u.Object, "status")
	if !ok {
		return st, nil
	}
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, st)
	return st, err
}

// status is the status the object should have; cur keeps the conditions'
// transition times where their status did not change. What the metadata
// server writes (status.firstBoot, the FirstBoot condition) is carried
// over as it is: the controller's UpdateStatus replaces the whole status.
func (t *term) status(u *unstructured.Unstructured, l *loaded, cur *v1alpha1.InstanceStatus) *v1alpha1.InstanceStatus {
	next := &v1alpha1.InstanceStatus{ObservedGeneration: u.GetGeneration(), Conditions: slices.Clone(cur.Conditions),
		FirstBoot: cur.FirstBoot}
	valid := metav1.Condition{Type: v1alpha1.ConditionValid, Status: metav1.ConditionTrue, Reason: "Valid", Message: "every check vminit validate runs passed"}
	rendered := metav1.Condition{Type: v1alpha1.ConditionRendered, Status: metav1.ConditionFalse, Reason: "Invalid", Message: "nothing is rendered from an invalid spec"}
	if len(l.warnings) > 0 {
		valid.Message = "valid, with warnings: " + joinProblems(l.warnings)
	}
	if len(l.problems) > 0 {
		valid.Status, valid.Reason = metav1.ConditionFalse, "Invalid"
		if missingRef(l.problems) {
			valid.Reason = v1alpha1.ReasonMissingReference
		}
		valid.Message = joinProblems(l.problems)
	}
	if l.rec != nil {
		s := &l.rec.Instance().Spec
		next.Hostname, next.Agent = s.Hostname, s.Agent
	}
	if len(l.problems) == 0 && l.rendered != "" {
		rendered.Status, rendered.Reason, rendered.Message = metav1.ConditionTrue, "Rendered", l.rendered
		next.Outputs = l.outputs
	}
	meta.SetStatusCondition(&next.Conditions, valid)
	meta.SetStatusCondition(&next.Conditions, rendered)
	meta.SetStatusCondition(&next.Conditions, t.served(u.GetNamespace()+"/"+u.GetName(), l))
	for i := range next.Conditions {
		if next.Conditions[i].Type != v1alpha1.ConditionFirstBoot { // the server's: of no generation
			next.Conditions[i].ObservedGeneration = u.GetGeneration()
		}
	}
	next.VirtualMachines = t.virtualMachines(u.GetNamespace(), u.GetName())
	next.Secrets = t.secretVersions(l)
	return next
}

// secretVersions are the Secrets l refers to, sorted, with the
// resourceVersion the informer holds of each: written to the status,
// they are how the metadata servers, which may not watch Secrets, learn
// that one changed (a change re-loads l first: refs.go).
func (t *term) secretVersions(l *loaded) []v1alpha1.SecretVersion {
	var out []v1alpha1.SecretVersion
	for _, ref := range slices.Sorted(maps.Keys(l.refs)) {
		kind, ns, name, ok := kuberules.ParseRefKey(ref)
		if !ok || kind != spec.RefSecret {
			continue
		}
		sv := v1alpha1.SecretVersion{Name: name}
		if obj, ok := get(t.secrets, ns, name); ok {
			if m, ok := metaOf(obj); ok {
				sv.ResourceVersion = m.GetResourceVersion()
			}
		}
		out = append(out, sv)
	}
	return out
}

// listed is where an instance is served, for a condition's message: at
// most maxListed addresses.
func listed(addrs []netip.Addr) string {
	if len(addrs) == 0 {
		return "no address (by name only, through a trusted proxy)"
	}
	var out []string
	for i, a := range addrs {
		if i == maxListed {
			out = append(out, fmt.Sprintf("and %d more", len(addrs)-i))
			break
		}
		out = append(out, a.String())
	}
	return strings.Join(out, ", ")
}

// maxMessage bounds a condition's message (the API allows 32 KiB), and
// maxListed the addresses it lists.
const (
	maxMessage = 8 << 10
	maxListed  = 32
)

// joinProblems lists problems as validate prints them, one per line.
func joinProblems(es spec.Errors) string {
	var b strings.Builder
	for i, e := range es {
		line := e.Error()
		if b.Len()+len(line) > maxMessage {
			fmt.Fprintf(&b, "\n… and %d more", len(es)-i)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
	}
	return b.String()
}

// output is one rendered file as status.outputs lists it: with its
// digest and size, or without either when secret (readsSecret).
func output(name string, data []byte, secret bool) v1alpha1.Output {
	if secret {
		return v1alpha1.Output{Name: name, FromSecret: true}
	}
	sum := sha256.Sum256(data)
	return v1alpha1.Output{Name: name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

// statusEqual compares statuses as the API stores them.
func statusEqual(a, b *v1alpha1.InstanceStatus) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// events records what changed, on the Instance.
func (t *term) events(u *unstructured.Unstructured, cur, next *v1alpha1.InstanceStatus, l *loaded) {
	was := meta.FindStatusCondition(cur.Conditions, v1alpha1.ConditionValid)
	now := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionValid)
	switch {
	case now.Status == metav1.ConditionFalse && (was == nil || was.Message != now.Message):
		t.recorder.Event(u, corev1.EventTypeWarning, "Invalid", now.Message)
	case now.Status == metav1.ConditionTrue && !slices.Equal(cur.Outputs, next.Outputs):
		r := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionRendered)
		t.recorder.Event(u, corev1.EventTypeNormal, "Rendered", r.Message)
	}
	wasS := meta.FindStatusCondition(cur.Conditions, v1alpha1.ConditionServed)
	nowS := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionServed)
	if (nowS.Reason == "Conflict" || nowS.Reason == "AddressRefused") && (wasS == nil || wasS.Message != nowS.Message) {
		t.recorder.Event(u, corev1.EventTypeWarning, nowS.Reason, nowS.Message)
	}
}
