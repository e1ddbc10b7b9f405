package kubestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/firstboot"
)

// The Store shares first-boot statuses between replicas through the
// Instances' status (firstboot.Shared): WriteBoot applies status.firstBoot
// and the FirstBoot condition with server-side apply under
// v1alpha1.FieldManagerServer, and FollowBoots hands the tracker what the
// Reflector reads back, the other replicas' writes among it.
var _ firstboot.Shared = (*Store)(nil)

// lastEventEvery is how far status.firstBoot.lastEvent may lag behind
// the tracker's before a write is due for it alone: a running boot hears
// of its guest many times a minute, and each write goes to every watcher
// of Instances; a minute is plenty for a replica that reads it to tell a
// stalled boot (firstboot.DefaultStallAfter is 15).
const lastEventEvery = time.Minute

// maxEventMessage bounds the FirstBootFailed Event's message (the API
// keeps an events.k8s.io note to 1 KiB; a core Event is shown the same).
const maxEventMessage = 1024

// seenBoot is what an Instance object's status says of its first boot,
// as the Reflector last delivered it.
type seenBoot struct {
	uid  types.UID
	boot *v1alpha1.FirstBoot
	cond *metav1.Condition
}

// seenBootOf reads an Instance object's first-boot status.
func seenBootOf(u *unstructured.Unstructured) seenBoot {
	seen := seenBoot{uid: u.GetUID()}
	m, ok, _ := unstructured.NestedMap(u.Object, "status")
	if !ok {
		return seen
	}
	var st v1alpha1.InstanceStatus
	if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st) != nil {
		return seen
	}
	seen.boot = st.FirstBoot
	seen.cond = meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFirstBoot)
	return seen
}

// WriteBoot writes each status to its Instance: status.firstBoot and the
// FirstBoot condition, when what they show differs from what the object
// says (a status as another replica wrote it is not written again), and
// a FirstBootFailed Event when the boot turned failed. A status whose
// Instance is gone, or is another incarnation, is dropped. The errors of
// the writes that failed are returned together (Persist retries).
func (s *Store) WriteBoot(ctx context.Context, statuses []firstboot.Status) error {
	var errs []error
	for i := range statuses {
		if err := s.writeBoot(ctx, &statuses[i]); err != nil {
			errs = append(errs, fmt.Errorf("kubestore: first boot of %s: %w", statuses[i].Name, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Store) writeBoot(ctx context.Context, st *firstboot.Status) error {
	ns, name, ok := strings.Cut(st.Name, "/")
	s.mu.Lock()
	in := s.instances[st.Name]
	var seen seenBoot
	if in != nil {
		seen = in.seen
	}
	s.mu.Unlock()
	if !ok || in == nil || string(seen.uid) != st.UID {
		return nil // gone, or re-created: this boot is nobody's now
	}
	boot := FirstBootOf(st)
	cond := FirstBootCondition(st, seen.cond)
	if !bootChanged(seen.boot, boot) && sameCondition(seen.cond, &cond) {
		return nil
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.InstanceStatus{
		FirstBoot: boot, Conditions: []metav1.Condition{cond}})
	if err != nil {
		return err
	}
	obj.Object["status"] = status
	tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	written, err := s.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).ApplyStatus(tctx, name, obj,
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerServer, Force: true})
	switch {
	case apierrors.IsNotFound(err):
		return nil // deleted meanwhile
	case err != nil:
		return unavailable(err)
	case string(written.GetUID()) != st.UID:
		// Re-created between the check above and the write: the new
		// object got a status of the old one's boot. Nothing better than
		// clearing it can be done (an apply carries no UID precondition).
		return s.clearBoot(tctx, ns, name)
	}
	if st.State == firstboot.Failed && (seen.boot == nil || seen.boot.State != string(firstboot.Failed)) {
		return s.recordFailure(tctx, written, st)
	}
	return nil
}

// clearBoot removes what this field manager applied to an Instance's
// status (an empty apply gives up the fields it owned).
func (s *Store) clearBoot(ctx context.Context, ns, name string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
	_, err := s.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).ApplyStatus(ctx, name, obj,
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerServer, Force: true})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// bootChanged reports whether next shows something seen does not: any
// field but lastEvent, which counts only once it moved lastEventEvery.
func bootChanged(seen, next *v1alpha1.FirstBoot) bool {
	if seen == nil {
		return true
	}
	a, b := *seen, *next
	moved := a.LastEvent == nil || b.LastEvent != nil && b.LastEvent.Sub(a.LastEvent.Time) >= lastEventEvery
	a.LastEvent, b.LastEvent = nil, nil
	return moved || !sameJSON(&a, &b)
}

// sameCondition compares conditions as the API stores them.
func sameCondition(seen, next *metav1.Condition) bool {
	if seen == nil {
		return false
	}
	a := *seen
	a.ObservedGeneration = next.ObservedGeneration
	return sameJSON(&a, next)
}

// sameJSON compares values as the API stores them (times as RFC 3339 in
// UTC, whatever zone a decoder gave them).
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// eventsGVR is core/v1 Events, which the controller records too.
var eventsGVR = corev1.SchemeGroupVersion.WithResource("events")

// recordFailure records the FirstBootFailed Warning Event on the
// Instance: once per incarnation, whichever replica comes first, as its
// name derives from the object's UID.
func (s *Store) recordFailure(ctx context.Context, obj *unstructured.Unstructured, st *firstboot.Status) error {
	at := metav1.NewTime(st.Finished)
	if st.Finished.IsZero() {
		at = metav1.NewTime(st.LastEvent)
	}
	msg := st.FirstError()
	if msg == "" {
		msg = "first boot failed"
	}
	ev := &corev1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: FailureEventName(obj.GetUID()), Namespace: obj.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind,
			Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()},
		Reason: v1alpha1.ReasonFirstBootFailed, Message: clipMessage(msg, maxEventMessage), Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: v1alpha1.FieldManagerServer},
		FirstTimestamp: at, LastTimestamp: at, Count: 1,
		ReportingController: "vminit.dev/" + v1alpha1.FieldManagerServer, ReportingInstance: v1alpha1.FieldManagerServer,
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev)
	if err != nil {
		return err
	}
	_, err = s.dyn.Resource(eventsGVR).Namespace(obj.GetNamespace()).Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerServer})
	if apierrors.IsAlreadyExists(err) {
		return nil // another replica recorded it
	}
	return err
}

// FailureEventName is the name of the FirstBootFailed Event of the
// Instance incarnation uid: one per incarnation, the same on every
// replica.
func FailureEventName(uid types.UID) string { return "vminit-firstboot-failed." + string(uid) }

// clipMessage cuts s to n bytes on a rune boundary.
func clipMessage(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-len("…")], "") + "…"
}

// FirstBootOf is what status.firstBoot shows of st: neither its stages
// nor its events.
func FirstBootOf(st *firstboot.Status) *v1alpha1.FirstBoot {
	b := &v1alpha1.FirstBoot{State: string(st.State), Agent: st.Agent, Stage: st.Stage, Module: st.Module,
		FirstFetch: timeOrNil(st.FirstFetch), LastEvent: timeOrNil(st.LastEvent), Finished: timeOrNil(st.Finished)}
	for _, f := range st.Errors[:min(len(st.Errors), firstboot.MaxFailures)] {
		b.Errors = append(b.Errors, v1alpha1.FirstBootError{Stage: f.Stage, Module: f.Module, Unit: f.Unit, Message: f.Message})
	}
	return b
}

// StatusOf is the tracker's status of an Instance incarnation whose
// status.firstBoot is b: what a replica merges of another's write.
func StatusOf(key string, uid types.UID, b *v1alpha1.FirstBoot) firstboot.Status {
	st := firstboot.Status{Name: key, UID: string(uid), Agent: b.Agent, State: firstboot.State(b.State),
		Stage: b.Stage, Module: b.Module,
		FirstFetch: timeOf(b.FirstFetch), LastEvent: timeOf(b.LastEvent), Finished: timeOf(b.Finished)}
	for _, e := range b.Errors {
		st.Errors = append(st.Errors, firstboot.Failure{Stage: e.Stage, Module: e.Module, Unit: e.Unit, Message: e.Message})
	}
	return st
}

// FirstBootCondition is the FirstBoot condition for st; seen is the
// object's, whose lastTransitionTime stays while the status does not
// flip. A flip is dated by the boot's own clock (the event that made it),
// so replicas writing the same status write the same bytes.
func FirstBootCondition(st *firstboot.Status, seen *metav1.Condition) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionFirstBoot, Status: metav1.ConditionUnknown}
	switch st.State {
	case firstboot.Done:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonDone, "first boot done"
	case firstboot.Failed:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonFailed, st.FirstError()
	case firstboot.Pending:
		c.Reason, c.Message = v1alpha1.ReasonPending, "no server has answered the guest yet"
	case firstboot.Fetched:
		c.Reason, c.Message = v1alpha1.ReasonFetched, "the guest fetched its data; its agent has reported nothing yet"
	case firstboot.Stalled:
		c.Reason, c.Message = v1alpha1.ReasonStalled, "silent since "+st.LastEvent.UTC().Format(time.RFC3339)+where(st)
	default:
		c.Reason, c.Message = v1alpha1.ReasonRunning, strings.TrimPrefix(where(st), ", ")
	}
	if c.Message == "" {
		c.Message = strings.ToLower(c.Reason)
	}
	c.Message = clipMessage(c.Message, maxMessage)
	switch {
	case seen != nil && seen.Status == c.Status:
		c.LastTransitionTime = seen.LastTransitionTime
	case !st.Finished.IsZero() && st.State.Terminal():
		c.LastTransitionTime = metav1.NewTime(st.Finished)
	case !st.LastEvent.IsZero():
		c.LastTransitionTime = metav1.NewTime(st.LastEvent)
	default:
		c.LastTransitionTime = metav1.Now()
	}
	c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.Truncate(time.Second)) // as the API keeps it
	return c
}

// maxMessage bounds the condition's message (the API allows 32 KiB; a
// failure's message is at most firstboot.MaxMessage).
const maxMessage = 4096

// where is ", in stage/module" for a boot with a stage.
func where(st *firstboot.Status) string {
	switch {
	case st.Module != "":
		return ", in " + st.Stage + "/" + st.Module
	case st.Stage != "":
		return ", in " + st.Stage
	}
	return ""
}

func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewTime(t.UTC().Truncate(time.Second)) // as the API keeps it
	return &m
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// FollowBoots merges into t the first boots the Instances' status holds,
// and then every one the Reflector delivers (another replica's write, or
// this one's read back: Merge keeps only what is further on), until ctx
// ends or the store is closed. With ctx already ended it merges what the store holds and
// returns: a one-shot reader (`vminit instances status --kubeconfig`)
// opens the store, which lists, and calls it so.
func (s *Store) FollowBoots(ctx context.Context, t *firstboot.Tracker) error {
	s.mu.Lock()
	s.followers = append(s.followers, t)
	var all []firstboot.Status
	for key, in := range s.instances {
		if in.seen.boot != nil {
			all = append(all, StatusOf(key, in.seen.uid, in.seen.boot))
		}
	}
	s.mu.Unlock()
	for _, st := range all {
		t.Merge(st)
	}
	select {
	case <-ctx.Done():
	case <-s.stopped:
	}
	s.mu.Lock()
	for i, f := range s.followers {
		if f == t {
			s.followers = append(s.followers[:i], s.followers[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	return nil
}

// followBoot notes what an Instance object's status says of its first
// boot and hands a change to the followers. Called with s.mu held (the
// tracker's Merge takes only its own locks).
func (s *Store) followBoot(key string, in *instance, u *unstructured.Unstructured) {
	in.seen = seenBootOf(u)
	if in.seen.boot == nil {
		return
	}
	st := StatusOf(key, in.seen.uid, in.seen.boot)
	for _, t := range s.followers {
		t.Merge(st)
	}
}
