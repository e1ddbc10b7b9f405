package kubestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vminit/vminit/internal/lib/termtext"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/spec"
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
// Instance is gone, or is another incarnation, is dropped.
//
// What is written is what the object shows merged with st (mergeBoot):
// the errors of both, and the state furthest on, applied with the
// object's resourceVersion as a precondition, so that replicas taking
// one guest's events in turn never write over each other's. A write that
// changes the state is applied at once; one that changes only the stage,
// module or errors waits until Config.BootWriteEvery has passed since
// the Instance's last (the store writes it then, or at Close): a guest
// cannot make its Instance, which every watcher of Instances receives,
// change more often. The errors of the writes that failed are returned
// together (Persist retries).
func (s *Store) WriteBoot(ctx context.Context, statuses []firstboot.Status) error {
	var errs []error
	for i := range statuses {
		if err := s.writeBoot(ctx, &statuses[i], false); err != nil {
			errs = append(errs, fmt.Errorf("kubestore: first boot of %s: %w", statuses[i].Name, err))
		}
	}
	return errors.Join(errs...)
}

// bootWrites paces the first-boot writes of each Instance.
type bootWrites struct {
	mu sync.Mutex
	// last is when each Instance's status was last applied (entries
	// older than BootWriteEvery are dropped: they pace nothing).
	last map[string]time.Time
	// pending are the statuses whose write waits, the latest of each.
	pending map[string]firstboot.Status
	wake    chan struct{} // a write was deferred
}

// deferWrite keeps st to write once due.
func (w *bootWrites) deferWrite(st *firstboot.Status) {
	w.mu.Lock()
	w.pending[st.Name] = *st
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// retry keeps st to write again once due, unless a newer status of the
// same Instance waits already.
func (w *bootWrites) retry(st *firstboot.Status) {
	w.mu.Lock()
	if _, ok := w.pending[st.Name]; !ok {
		w.pending[st.Name] = *st
	}
	w.mu.Unlock()
}

// due is how long until the Instance name may be written again (≤ 0:
// now).
func (w *bootWrites) due(name string, every time.Duration, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[name]
	if !ok {
		return 0
	}
	return every - now.Sub(last)
}

// wrote notes an apply of name's status, which supersedes what waited.
func (w *bootWrites) wrote(name string, at time.Time) {
	w.mu.Lock()
	w.last[name] = at
	delete(w.pending, name)
	w.mu.Unlock()
}

// take removes and returns, by name, the pending statuses due at now
// (all of them with every 0).
func (w *bootWrites) take(every time.Duration, now time.Time) []firstboot.Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []firstboot.Status
	for name, st := range w.pending {
		if last, ok := w.last[name]; !ok || every == 0 || now.Sub(last) >= every {
			out = append(out, st)
			delete(w.pending, name)
		}
	}
	for name, at := range w.last {
		if _, waiting := w.pending[name]; !waiting && now.Sub(at) >= every {
			delete(w.last, name)
		}
	}
	slices.SortFunc(out, func(a, b firstboot.Status) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// next is how long from now until the first pending status is due
// (an hour when none waits).
func (w *bootWrites) next(every time.Duration, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := time.Hour
	for name := range w.pending {
		next = min(next, max(every-now.Sub(w.last[name]), 0))
	}
	return next
}

// flushBoots writes the deferred statuses as they fall due, until ctx
// ends (Close writes what still waits).
func (s *Store) flushBoots(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due := s.boots.take(s.cfg.BootWriteEvery, time.Now())
		for i := range due {
			if err := s.writeBoot(ctx, &due[i], true); err != nil {
				if ctx.Err() == nil { // else cut by Close, which writes it
					s.log.Warn("kubestore: a first-boot status not written; retrying", "instance", due[i].Name, "err", err)
					s.boots.wrote(due[i].Name, time.Now()) // tried again when due again
				}
				s.boots.retry(&due[i])
			}
		}
		timer.Reset(s.boots.next(s.cfg.BootWriteEvery, time.Now()))
		select {
		case <-ctx.Done():
			return
		case <-s.boots.wake:
		case <-timer.C:
		}
	}
}

// flushPending writes every status that still waits (Close).
func (s *Store) flushPending(ctx context.Context) {
	due := s.boots.take(0, time.Now())
	for i := range due {
		if err := s.writeBoot(ctx, &due[i], true); err != nil {
			s.log.Warn("kubestore: a first-boot status not written as the store closed", "instance", due[i].Name, "err", err)
		}
	}
}

// maxApplyTries bounds the applies of one status that another writer's
// change of the object (a conflict) makes read and merge again.
const maxApplyTries = 4

// writeBoot writes st (see WriteBoot); due says that its time has come
// (a deferred write), so it is not deferred again.
func (s *Store) writeBoot(ctx context.Context, st *firstboot.Status, due bool) error {
	ns, name, ok := strings.Cut(st.Name, "/")
	s.mu.Lock()
	in := s.instances[st.Name]
	var seen seenBoot
	var rv int64
	if in != nil {
		seen, rv = in.seen, in.rv
	}
	s.mu.Unlock()
	if !ok || in == nil || string(seen.uid) != st.UID {
		return nil // gone, or re-created: this boot is nobody's now
	}
	res := s.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
	for try := 1; ; try++ {
		boot := mergeBoot(seen.boot, FirstBootOf(st))
		shown := StatusOf(st.Name, seen.uid, boot)
		cond := FirstBootCondition(&shown, seen.cond)
		if !bootChanged(seen.boot, boot) && sameCondition(seen.cond, &cond) {
			return nil
		}
		if !due && seen.boot != nil && seen.boot.State == boot.State && s.boots.due(st.Name, s.cfg.BootWriteEvery, time.Now()) > 0 {
			s.boots.deferWrite(st)
			return nil
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": v1alpha1.Kind,
			// The resourceVersion merged with is a precondition: a
			// change meanwhile (another replica's write) is read and
			// merged, not written over.
			"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": strconv.FormatInt(rv, 10)},
		}}
		status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.InstanceStatus{
			FirstBoot: boot, Conditions: []metav1.Condition{cond}})
		if err != nil {
			return err
		}
		obj.Object["status"] = status
		tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		written, err := res.ApplyStatus(tctx, name, obj, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerServer, Force: true})
		if apierrors.IsConflict(err) && try < maxApplyTries {
			var cur *unstructured.Unstructured
			cur, err = res.Get(tctx, name, metav1.GetOptions{})
			cancel()
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return unavailable(err)
			case string(cur.GetUID()) != st.UID:
				return nil // re-created: this boot is nobody's now
			}
			seen = seenBootOf(cur)
			rv, _ = strconv.ParseInt(cur.GetResourceVersion(), 10, 64)
			continue
		}
		defer cancel()
		switch {
		case apierrors.IsNotFound(err):
			return nil // deleted meanwhile
		case err != nil:
			return unavailable(err)
		}
		s.boots.wrote(st.Name, time.Now())
		if boot.State == string(firstboot.Failed) && (seen.boot == nil || seen.boot.State != string(firstboot.Failed)) {
			return s.recordFailure(tctx, written, &shown)
		}
		return nil
	}
}

// mergeBoot is what an Instance's status.firstBoot should show once next
// (this replica's, FirstBootOf) is written over seen (what the object
// shows, another replica's write among it; nil: nothing): the state,
// stage and module of whichever is further on (a later state, or the
// same one heard of later; next on a tie), the earliest first fetch and
// the latest event, and the errors of both, seen's first, within the
// bounds FirstBootOf keeps.
func mergeBoot(seen, next *v1alpha1.FirstBoot) *v1alpha1.FirstBoot {
	if seen == nil {
		return next
	}
	out := *next
	if bootRank(seen) > bootRank(next) || bootRank(seen) == bootRank(next) && later(seen.LastEvent, next.LastEvent) {
		out.State, out.Stage, out.Module, out.Finished = seen.State, seen.Stage, seen.Module, seen.Finished
	}
	if out.Agent == "" {
		out.Agent = seen.Agent
	}
	if seen.FirstFetch != nil && (out.FirstFetch == nil || seen.FirstFetch.Before(out.FirstFetch)) {
		out.FirstFetch = seen.FirstFetch
	}
	if later(seen.LastEvent, out.LastEvent) {
		out.LastEvent = seen.LastEvent
	}
	var errs []v1alpha1.FirstBootError
	for _, e := range append(slices.Clone(seen.Errors), next.Errors...) {
		if e = clipError(e); !slices.Contains(errs, e) {
			errs = append(errs, e)
		}
	}
	out.Errors = boundErrors(errs)
	return &out
}

// bootRank orders what a status.firstBoot shows as Tracker.Merge orders
// states: pending, fetched, running, then done or failed; a stalled boot
// ranks where it stalled.
func bootRank(b *v1alpha1.FirstBoot) int {
	switch firstboot.State(b.State) {
	case firstboot.Fetched:
		return 1
	case firstboot.Running:
		return 2
	case firstboot.Stalled:
		if b.Stage != "" {
			return 2
		}
		return 1
	case firstboot.Done, firstboot.Failed:
		return 3
	}
	return 0
}

// later reports whether a is after b (a nil time is before any).
func later(a, b *metav1.Time) bool {
	return a != nil && (b == nil || a.After(b.Time))
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
		Reason: v1alpha1.ReasonFirstBootFailed, Message: clipMessage(termtext.Line(msg), maxEventMessage), Type: corev1.EventTypeWarning,
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

// What status.firstBoot keeps of a boot's errors: every Instance goes to
// every watcher of Instances and sits in every informer's cache, so it
// carries the first few, each field one line (termtext.Line) and
// clipped, their messages within a total; the servers keep the rest
// (GET /v1/instances/{name}/boot, `vminit instances status NAME`). The
// errors of a status take at most maxBootErrors × 3 × maxBootName +
// maxBootErrorBytes bytes (4 KiB).
const (
	maxBootErrors     = 4
	maxBootName       = 256 // bytes of a stage, module or unit (firstboot.MaxName)
	maxBootMessage    = 256 // bytes of an error's message
	maxBootErrorBytes = 1024
)

// FirstBootOf is what status.firstBoot shows of st: neither its stages
// nor its events, and its first errors within the bounds above; every
// text the guest gave on one line without control characters.
func FirstBootOf(st *firstboot.Status) *v1alpha1.FirstBoot {
	b := &v1alpha1.FirstBoot{State: string(st.State), Agent: termtext.Line(st.Agent),
		Stage: clipMessage(termtext.Line(st.Stage), maxBootName), Module: clipMessage(termtext.Line(st.Module), maxBootName),
		FirstFetch: timeOrNil(st.FirstFetch), LastEvent: timeOrNil(st.LastEvent), Finished: timeOrNil(st.Finished)}
	var errs []v1alpha1.FirstBootError
	for _, f := range st.Errors[:min(len(st.Errors), maxBootErrors)] {
		errs = append(errs, clipError(v1alpha1.FirstBootError{Stage: f.Stage, Module: f.Module, Unit: f.Unit, Message: f.Message}))
	}
	b.Errors = boundErrors(errs)
	return b
}

// clipError makes each field of e one clipped line.
func clipError(e v1alpha1.FirstBootError) v1alpha1.FirstBootError {
	return v1alpha1.FirstBootError{Stage: clipMessage(termtext.Line(e.Stage), maxBootName),
		Module: clipMessage(termtext.Line(e.Module), maxBootName), Unit: clipMessage(termtext.Line(e.Unit), maxBootName),
		Message: clipMessage(termtext.Line(e.Message), maxBootMessage)}
}

// boundErrors keeps the first of errs within maxBootErrors and
// maxBootErrorBytes.
func boundErrors(errs []v1alpha1.FirstBootError) []v1alpha1.FirstBootError {
	var out []v1alpha1.FirstBootError
	total := 0
	for _, e := range errs {
		if len(out) == maxBootErrors || total+len(e.Message) > maxBootErrorBytes {
			break
		}
		total += len(e.Message)
		out = append(out, e)
	}
	return out
}

// StatusOf is the tracker's status of an Instance incarnation whose
// status.firstBoot is b: what a replica merges of another's write.
func StatusOf(key string, uid types.UID, b *v1alpha1.FirstBoot) firstboot.Status {
	st := firstboot.Status{Name: key, UID: string(uid), Agent: b.Agent, State: firstboot.State(b.State),
		Stage: b.Stage, Module: b.Module, NoReport: !spec.ReportsFirstBoot(b.Agent),
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
	switch {
	case st.NoReport && !st.State.Terminal():
		// Unknown for good: the server hears only its fetches.
		c.Reason, c.Message = v1alpha1.ReasonNoReport, st.Unreported()+"; "+msgFetched
		if st.State == firstboot.Pending {
			c.Message = st.Unreported() + "; " + msgPending
		}
	case st.State == firstboot.Done:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonDone, "first boot done"
	case st.State == firstboot.Failed:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonFailed, st.FirstError()
	case st.State == firstboot.Pending:
		c.Reason, c.Message = v1alpha1.ReasonPending, msgPending
	case st.State == firstboot.Fetched:
		c.Reason, c.Message = v1alpha1.ReasonFetched, msgFetched+"; its agent has reported nothing yet"
	case st.State == firstboot.Stalled:
		c.Reason, c.Message = v1alpha1.ReasonStalled, "silent since "+st.LastEvent.UTC().Format(time.RFC3339)+where(st)
	default:
		c.Reason, c.Message = v1alpha1.ReasonRunning, strings.TrimPrefix(where(st), ", ")
	}
	if c.Message == "" {
		c.Message = strings.ToLower(c.Reason)
	}
	c.Message = clipMessage(termtext.Line(c.Message), maxMessage) // guest text, which kubectl describe prints
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

// The condition's words for a boot pending and fetched.
const (
	msgPending = "no server has answered the guest yet"
	msgFetched = "the guest fetched its data"
)

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
// this one's read back: Merge takes the union with what it holds), until ctx
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
