package kubestore_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/kubestore"
)

// hostile is guest text a terminal acts on: an OSC window title, an OSC 52
// clipboard write, CSI sequences (8-bit too), a new line.
const hostile = "\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x1b\\\x1b[2J\x1b[1;31mexit 3\u009b0m\nsecond line"

// controlFree reports whether s is one line with nothing a terminal acts
// on.
func controlFree(s string) bool {
	return !strings.ContainsAny(s, "\x1b\x07\n\r\u009b\u009c\u009d") && !strings.Contains(s, "]52;") && !strings.Contains(s, "owned")
}

// TestFirstBootGuestTextBounded: a guest that reports 20 failures of
// 2 KiB with escape sequences in every field gets its Instance a
// status.firstBoot of a few one-line errors, clipped, and neither the
// FirstBoot condition nor the FirstBootFailed Event carries a control
// character; the tracker keeps the whole text.
func TestFirstBootGuestTextBounded(t *testing.T) {
	s, dyn := start(t, false)
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Create(ctxFor(t), object(t, "default", "bad", "hostname: bad\n"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := newReplica(t, s)
	id := string(u.GetUID())
	r.boots.Fetch("default/bad", id, "cloud-init", "nocloud", "/meta-data")
	rep := firstboot.Report{Failed: true}
	for i := range 20 {
		rep.Errors = append(rep.Errors, firstboot.Failure{Stage: hostile, Module: fmt.Sprintf("m%d%s", i, hostile),
			Message: hostile + " " + strings.Repeat("x", firstboot.MaxMessage)})
	}
	r.boots.Report("default/bad", id, "cloud-init", rep)
	c, st := firstBootCondition(t, dyn, "bad", v1alpha1.ReasonFailed)
	fb := st.FirstBoot
	if n := len(fb.Errors); n == 0 || n > 4 {
		t.Errorf("status.firstBoot holds %d errors, want 1 to 4", n)
	}
	for _, e := range fb.Errors {
		for _, f := range []string{e.Stage, e.Module, e.Unit, e.Message} {
			if len(f) > 256 || !controlFree(f) {
				t.Errorf("an error's field of %d bytes: %q", len(f), f)
			}
		}
	}
	raw, _ := json.Marshal(fb)
	if len(raw) > 5<<10 {
		t.Errorf("status.firstBoot is %d bytes", len(raw))
	}
	if !controlFree(c.Message) || !strings.Contains(c.Message, "exit 3 second line") {
		t.Errorf("the FirstBoot condition's message: %q", c.Message)
	}
	eventually(t, "the FirstBootFailed Event", func() bool {
		ev, err := s.Clientset(t).CoreV1().Events("default").Get(ctxFor(t), kubestore.FailureEventName(u.GetUID()), metav1.GetOptions{})
		if err != nil {
			return false
		}
		if !controlFree(ev.Message) || !strings.Contains(ev.Message, "exit 3 second line") {
			t.Errorf("the FirstBootFailed Event's message: %q", ev.Message)
		}
		return true
	})
	if got := r.boots.Status("default/bad", id, ""); len(got.Errors) != firstboot.MaxFailures || !strings.Contains(got.Errors[0].Message, hostile) {
		t.Errorf("the tracker keeps %d errors, the first %.40q", len(got.Errors), got.Errors[0].Message)
	}
}

// TestFirstBootWritesPaced: a guest that posts events for ever (a new
// module each time, never finishing) gets its Instance written when its
// state changes, not at each event: with BootWriteEvery an hour, 200
// events make 2 writes (fetched, running). What waits is not lost: the
// store writes it as it closes, and, with a short BootWriteEvery, once
// due without another event.
func TestFirstBootWritesPaced(t *testing.T) {
	s, dyn := start(t, false)
	res := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default")
	u, err := res.Create(ctxFor(t), object(t, "default", "loop", "hostname: loop\n"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := string(u.GetUID())
	w, err := res.Watch(ctxFor(t), metav1.ListOptions{FieldSelector: "metadata.name=loop", ResourceVersion: u.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	r := newReplicaWith(t, s, time.Hour, 5*time.Millisecond)
	r.boots.Fetch("default/loop", id, "cloud-init", "nocloud", "/meta-data")
	firstBootCondition(t, dyn, "loop", v1alpha1.ReasonFetched)
	const events = 200
	for i := range events {
		r.boots.Record("default/loop", id, "cloud-init", firstboot.Event{Kind: firstboot.KindStart, Name: fmt.Sprintf("modules-config/m%d", i)})
		if i%20 == 0 {
			time.Sleep(10 * time.Millisecond) // let Persist hand some over
		}
	}
	// As a server stops: Persist has ended, Flush hands over the rest,
	// and Close writes what waits.
	if err := r.boots.Flush(ctxFor(t), r.store); err != nil {
		t.Fatal(err)
	}
	r.store.Close()
	cur, st := instanceStatus(t, dyn, "loop")
	want := fmt.Sprintf("m%d", events-1)
	if st.FirstBoot == nil || st.FirstBoot.State != "running" || st.FirstBoot.Module != want {
		t.Errorf("after Close: %+v, want running in modules-config/%s", st.FirstBoot, want)
	}
	writes := 0
	for ev := range w.ResultChan() {
		if ev.Type == watch.Modified {
			writes++
		}
		if o, ok := ev.Object.(*unstructured.Unstructured); ok && o.GetResourceVersion() == cur.GetResourceVersion() {
			break
		}
	}
	// fetched, running, and the one Close wrote.
	if writes > 3 {
		t.Errorf("%d events made %d writes of the Instance, want at most 3", events, writes)
	}

	// With a second between writes, a deferred one is written when due.
	r2 := newReplicaWith(t, s, time.Second, 5*time.Millisecond)
	eventually(t, "the second store to see the status", func() bool {
		return r2.boots.Status("default/loop", id, "").Module == want
	})
	r2.boots.Record("default/loop", id, "cloud-init", firstboot.Event{Kind: firstboot.KindStart, Name: "modules-config/a"})
	eventually(t, "the stage written", func() bool {
		_, st := instanceStatus(t, dyn, "loop")
		return st.FirstBoot.Module == "a"
	})
	r2.boots.Record("default/loop", id, "cloud-init", firstboot.Event{Kind: firstboot.KindStart, Name: "modules-config/b"})
	eventually(t, "the deferred stage written when due", func() bool {
		_, st := instanceStatus(t, dyn, "loop")
		return st.FirstBoot.Module == "b"
	})
	if errs := r2.errors(); len(errs) > 0 {
		t.Errorf("Persist: %v", errs)
	}
}

// TestFirstBootReplicasMerge: two replicas take one guest's events in
// turn and write at once, each before it has read the other's write: the
// Instance's status keeps every error either heard, and a replica that
// writes a status older than the other's (a running boot after the other
// wrote it failed) does not take the object back.
func TestFirstBootReplicasMerge(t *testing.T) {
	s, dyn := start(t, false)
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Create(ctxFor(t), object(t, "default", "web", "hostname: web\n"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id, name := string(u.GetUID()), "default/web"
	a, b := newReplicaWith(t, s, time.Nanosecond, 0), newReplicaWith(t, s, time.Nanosecond, 0)
	write := func(r *replica, st firstboot.Status) {
		t.Helper()
		if err := r.store.WriteBoot(ctxFor(t), []firstboot.Status{st}); err != nil {
			t.Fatal(err)
		}
	}
	a.boots.Fetch(name, id, "cloud-init", "nocloud", "/meta-data")
	write(a, a.boots.Status(name, id, ""))
	// Each replica hears of one failed module, and writes it at once.
	for i, r := range []*replica{a, b, a} {
		r.boots.Record(name, id, "cloud-init", firstboot.Event{Kind: firstboot.KindFinish,
			Name: fmt.Sprintf("modules-config/m%d", i), Result: firstboot.ResultFail, Message: fmt.Sprintf("error %d", i)})
		write(r, r.boots.Status(name, id, ""))
	}
	stale := a.boots.Status(name, id, "") // a's, before it hears of the end
	b.boots.Record(name, id, "cloud-init", firstboot.Event{Kind: firstboot.KindFinish, Name: "modules-final", Result: firstboot.ResultFail})
	write(b, b.boots.Status(name, id, ""))
	write(a, stale)

	_, st := instanceStatus(t, dyn, "web")
	var got []string
	for _, e := range st.FirstBoot.Errors {
		got = append(got, e.Stage+"/"+e.Module+": "+e.Message)
	}
	if want := "modules-config/m0: error 0|modules-config/m1: error 1|modules-config/m2: error 2|modules-final/: "; strings.Join(got, "|") != want {
		t.Errorf("errors %q, want %q", strings.Join(got, "|"), want)
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFirstBoot)
	if st.FirstBoot.State != "failed" || c == nil || c.Reason != v1alpha1.ReasonFailed {
		t.Errorf("state %q, condition %+v: a stale write took the failure back", st.FirstBoot.State, c)
	}
	// Both trackers end with the failure.
	eventually(t, "both replicas to hold the failure", func() bool {
		return a.boots.Status(name, id, "").State == firstboot.Failed && b.boots.Status(name, id, "").State == firstboot.Failed
	})
}

// TestFirstBootOfBounded: what status.firstBoot shows of a hostile
// record, without an API server: 4 errors at most, one line each, no
// control character, 256-byte fields.
func TestFirstBootOfBounded(t *testing.T) {
	st := firstboot.Status{Name: "default/bad", State: firstboot.Failed, Stage: hostile, Module: hostile}
	for range firstboot.MaxFailures {
		st.Errors = append(st.Errors, firstboot.Failure{Stage: hostile, Module: hostile, Unit: hostile,
			Message: hostile + strings.Repeat("é", firstboot.MaxMessage)})
	}
	fb := kubestore.FirstBootOf(&st)
	if len(fb.Errors) > 4 {
		t.Errorf("%d errors", len(fb.Errors))
	}
	total := 0
	for _, f := range []string{fb.Stage, fb.Module} {
		if !controlFree(f) || len(f) > 256 {
			t.Errorf("a field of %d bytes: %.80q", len(f), f)
		}
	}
	for _, e := range fb.Errors {
		total += len(e.Message)
		for _, f := range []string{e.Stage, e.Module, e.Unit, e.Message} {
			if !controlFree(f) || len(f) > 256 || !utf8.ValidString(f) {
				t.Errorf("a field of %d bytes: %.80q", len(f), f)
			}
		}
	}
	if total > 1024 {
		t.Errorf("messages of %d bytes", total)
	}
	c := kubestore.FirstBootCondition(&st, nil)
	if !controlFree(c.Message) {
		t.Errorf("condition message %q", c.Message)
	}
}

// TestFirstBootConditionNoReport: the FirstBoot condition of a Windows
// guest's Instance (cloudbase-init sends no first-boot report), as a
// replica reads it back from status.firstBoot: Unknown, reason NoReport,
// the message naming the agent in the words every view uses, whether the
// guest fetched its data or not. A cloud-init boot written stalled stays
// Stalled.
func TestFirstBootConditionNoReport(t *testing.T) {
	for _, tc := range []struct {
		boot         v1alpha1.FirstBoot
		reason, want string
	}{
		{v1alpha1.FirstBoot{Agent: "cloudbase-init", State: "fetched"}, v1alpha1.ReasonNoReport, "cloudbase-init sends no first-boot report; the guest fetched its data"},
		{v1alpha1.FirstBoot{Agent: "cloudbase-init", State: "pending"}, v1alpha1.ReasonNoReport, "cloudbase-init sends no first-boot report; no server has answered the guest yet"},
		{v1alpha1.FirstBoot{Agent: "cloud-init", State: "stalled"}, v1alpha1.ReasonStalled, "silent since"},
	} {
		st := kubestore.StatusOf("default/vm", "u1", &tc.boot)
		c := kubestore.FirstBootCondition(&st, nil)
		if c.Status != metav1.ConditionUnknown || c.Reason != tc.reason || !strings.HasPrefix(c.Message, tc.want) {
			t.Errorf("%s %s: %s %s %q, want Unknown %s %q", tc.boot.Agent, tc.boot.State, c.Status, c.Reason, c.Message, tc.reason, tc.want)
		}
	}
}
