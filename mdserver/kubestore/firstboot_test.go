package kubestore_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/kubestore"
	"github.com/vminit/vminit/mdserver/registry"
)

// replica is one server's store and tracker, persisting and following
// as `vminit serve` runs them.
type replica struct {
	store *kubestore.Store
	boots *firstboot.Tracker
	mu    sync.Mutex
	errs  []error
}

func newReplica(t *testing.T, s *kubetest.Server) *replica {
	t.Helper()
	return newReplicaWith(t, s, time.Nanosecond, 20*time.Millisecond)
}

// newReplicaWith is a replica whose store writes an Instance's first boot
// at most every writeEvery, and whose tracker persists every
// persistEvery (0: not at all; the test calls WriteBoot).
func newReplicaWith(t *testing.T, s *kubetest.Server, writeEvery, persistEvery time.Duration) *replica {
	t.Helper()
	st, err := kubestore.Open(ctxFor(t), kubestore.Config{REST: s.Config(), Namespaces: []string{"default"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), BootWriteEvery: writeEvery})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{store: st, boots: mdserver.NewTracker(firstboot.Options{})}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if persistEvery > 0 {
		wg.Go(func() { r.boots.Persist(ctx, st, persistEvery, r.onError) })
	}
	wg.Go(func() {
		if err := st.FollowBoots(ctx, r.boots); err != nil {
			r.onError(err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait(); st.Close() })
	return r
}

func (r *replica) onError(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *replica) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// instanceStatus reads an Instance's status.
func instanceStatus(t *testing.T, dyn dynamic.Interface, name string) (*unstructured.Unstructured, *v1alpha1.InstanceStatus) {
	t.Helper()
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := &v1alpha1.InstanceStatus{}
	m, _, _ := unstructured.NestedMap(u.Object, "status")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, st); err != nil {
		t.Fatal(err)
	}
	return u, st
}

// firstBootCondition waits until the Instance's FirstBoot condition has
// reason, and returns it and the status.
func firstBootCondition(t *testing.T, dyn dynamic.Interface, name, reason string) (metav1.Condition, *v1alpha1.InstanceStatus) {
	t.Helper()
	var c metav1.Condition
	var st *v1alpha1.InstanceStatus
	eventually(t, name+"'s FirstBoot condition "+reason, func() bool {
		_, st = instanceStatus(t, dyn, name)
		if p := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFirstBoot); p != nil {
			c = *p
		}
		return c.Reason == reason
	})
	return c, st
}

// TestFirstBootShared: two replicas (two stores, two trackers) share the
// first boots of their guests through the Instances' status: the
// FirstBoot condition follows fetched → running → done, and → failed
// with one FirstBootFailed Event; each replica learns what the other
// heard; a Windows guest's (cloudbase-init sends no report) is Unknown
// with reason NoReport, naming its agent; a deleted Instance's boot is
// dropped without an error, and a re-created one starts fresh.
func TestFirstBootShared(t *testing.T) {
	s, dyn := start(t, false)
	res := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default")
	uid := map[string]string{}
	for _, name := range []string{"web", "bad", "win"} {
		sp := "hostname: " + name + "\n"
		if name == "win" {
			sp += "agent: cloudbase-init\n"
		}
		u, err := res.Create(ctxFor(t), object(t, "default", name, sp), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uid[name] = string(u.GetUID())
	}
	a, b := newReplica(t, s), newReplica(t, s)
	const web = "default/web"

	// web's guest is answered by a, and posts its events to b.
	a.boots.Fetch(web, uid["web"], "cloud-init", "nocloud", "/meta-data")
	c, st := firstBootCondition(t, dyn, "web", v1alpha1.ReasonFetched)
	if c.Status != metav1.ConditionUnknown || st.FirstBoot.State != "fetched" || st.FirstBoot.FirstFetch == nil {
		t.Errorf("fetched: %+v %+v", c, st.FirstBoot)
	}
	fetched := c.LastTransitionTime
	eventually(t, "b to learn of a's fetch", func() bool { return b.boots.Status(web, uid["web"], "").State == firstboot.Fetched })
	b.boots.Record(web, uid["web"], "cloud-init", firstboot.Event{Kind: firstboot.KindStart, Name: "modules-config/config-ssh"})
	c, _ = firstBootCondition(t, dyn, "web", v1alpha1.ReasonRunning)
	if c.Status != metav1.ConditionUnknown || c.Message != "in modules-config/config-ssh" || !c.LastTransitionTime.Equal(&fetched) {
		t.Errorf("running: %+v (the status did not flip: its lastTransitionTime stays %v)", c, fetched)
	}
	eventually(t, "a to learn of b's event", func() bool { return a.boots.Status(web, uid["web"], "").State == firstboot.Running })
	b.boots.Record(web, uid["web"], "cloud-init", firstboot.Event{Kind: firstboot.KindFinish, Name: "modules-final", Result: firstboot.ResultSuccess})
	c, st = firstBootCondition(t, dyn, "web", v1alpha1.ReasonDone)
	if c.Status != metav1.ConditionTrue || st.FirstBoot.State != "done" || st.FirstBoot.Finished == nil {
		t.Errorf("done: %+v %+v", c, st.FirstBoot)
	}
	eventually(t, "a to learn web is done", func() bool { return a.boots.Status(web, uid["web"], "").State == firstboot.Done })

	// win's guest fetches its data and says no more: nobody can tell
	// whether its boot ends, and the condition says why.
	a.boots.Fetch("default/win", uid["win"], "cloudbase-init", "openstack", "/openstack/latest/meta_data.json")
	c, st = firstBootCondition(t, dyn, "win", v1alpha1.ReasonNoReport)
	if c.Status != metav1.ConditionUnknown || st.FirstBoot.State != "fetched" || c.Message != "cloudbase-init sends no first-boot report; the guest fetched its data" {
		t.Errorf("win: %+v %+v", c, st.FirstBoot)
	}

	// bad fails in a module; the Event is recorded once, though both
	// replicas write the failure.
	b.boots.Fetch("default/bad", uid["bad"], "cloud-init", "nocloud", "/meta-data")
	b.boots.Record("default/bad", uid["bad"], "cloud-init", firstboot.Event{Kind: firstboot.KindFinish, Name: "modules-final/config-scripts-user", Result: firstboot.ResultFail, Message: "exit status 3"})
	b.boots.Record("default/bad", uid["bad"], "cloud-init", firstboot.Event{Kind: firstboot.KindFinish, Name: "modules-final", Result: firstboot.ResultFail})
	c, st = firstBootCondition(t, dyn, "bad", v1alpha1.ReasonFailed)
	if c.Status != metav1.ConditionFalse || c.Message != "modules-final/config-scripts-user: exit status 3" ||
		len(st.FirstBoot.Errors) == 0 || st.FirstBoot.Errors[0].Module != "config-scripts-user" {
		t.Errorf("failed: %+v %+v", c, st.FirstBoot)
	}
	eventually(t, "a to learn bad failed", func() bool { return a.boots.Status("default/bad", uid["bad"], "").State == firstboot.Failed })
	if err := a.store.WriteBoot(ctxFor(t), []firstboot.Status{a.boots.Status("default/bad", uid["bad"], "")}); err != nil {
		t.Fatal(err)
	}
	var failures []string
	eventually(t, "the FirstBootFailed Event", func() bool {
		evs, err := s.Clientset(t).CoreV1().Events("default").List(ctxFor(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		failures = nil
		for _, ev := range evs.Items {
			if ev.Reason == v1alpha1.ReasonFirstBootFailed {
				failures = append(failures, ev.InvolvedObject.Name+": "+ev.Message)
			}
		}
		return len(failures) > 0
	})
	if strings.Join(failures, "|") != "bad: modules-final/config-scripts-user: exit status 3" {
		t.Errorf("FirstBootFailed Events: %q", failures)
	}
	// The object holds no event log.
	u, _ := instanceStatus(t, dyn, "bad")
	if fb, _, _ := unstructured.NestedMap(u.Object, "status", "firstBoot"); fb["events"] != nil || fb["stages"] != nil {
		t.Errorf("status.firstBoot holds the event log: %v", fb)
	}

	// web is deleted and created again: the new incarnation's status
	// starts empty, and the old one's boot is written nowhere.
	if err := res.Delete(ctxFor(t), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a to see web gone", func() bool { _, ok := a.store.Snapshot().ByName(web); return !ok })
	if err := a.store.WriteBoot(ctxFor(t), []firstboot.Status{a.boots.Status(web, uid["web"], "")}); err != nil {
		t.Errorf("a status of a deleted Instance: %v", err)
	}
	u, err := res.Create(ctxFor(t), object(t, "default", "web", "hostname: web\n"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a to see web again", func() bool { r, ok := a.store.Snapshot().ByName(web); return ok && r.UID == string(u.GetUID()) })
	if err := a.store.WriteBoot(ctxFor(t), []firstboot.Status{a.boots.Status(web, uid["web"], "")}); err != nil {
		t.Errorf("a status of a former incarnation: %v", err)
	}
	if _, st := instanceStatus(t, dyn, "web"); st.FirstBoot != nil {
		t.Errorf("the re-created Instance got its former incarnation's first boot: %+v", st.FirstBoot)
	}
	for _, r := range []*replica{a, b} {
		if errs := r.errors(); len(errs) > 0 {
			t.Errorf("Persist or FollowBoots failed: %v", errs)
		}
	}
}

// TestFirstBootWritesOnlyChanges: a status whose shown fields did not
// change is not written again, however often WriteBoot is called (each
// write goes to every watcher of Instances), and a status write does not
// make the stores decode and check the spec again; a one-shot reader
// (FollowBoots with an ended context) gets what is stored.
func TestFirstBootWritesOnlyChanges(t *testing.T) {
	s, dyn := start(t, false)
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Create(ctxFor(t), object(t, "default", "web", "hostname: web\n"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var checked atomic.Int64
	watcher, err := kubestore.Open(ctxFor(t), kubestore.Config{REST: s.Config(), Namespaces: []string{"default"},
		Checks: registry.Checks{Content: func(*registry.Record) error { checked.Add(1); return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	r := newReplica(t, s)
	boots := firstboot.New(firstboot.Options{})
	id := string(u.GetUID())
	boots.Fetch("default/web", id, "ignition", "ignition", "/config.ign")
	boots.Report("default/web", id, "ignition", firstboot.Report{Message: "running"})
	done := boots.Status("default/web", id, "")
	eventually(t, "the write", func() bool {
		if err := r.store.WriteBoot(ctxFor(t), []firstboot.Status{done}); err != nil {
			t.Fatal(err)
		}
		_, st := instanceStatus(t, dyn, "web")
		return st.FirstBoot != nil
	})
	eventually(t, "the store to see its write", func() bool { return r.boots.Status("default/web", id, "").State == firstboot.Done })
	before, _ := instanceStatus(t, dyn, "web")
	done.LastEvent = done.LastEvent.Add(time.Second) // an event that changes nothing shown
	for range 3 {
		if err := r.store.WriteBoot(ctxFor(t), []firstboot.Status{done}); err != nil {
			t.Fatal(err)
		}
	}
	if after, _ := instanceStatus(t, dyn, "web"); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("written again with nothing shown changed: resourceVersion %s → %s", before.GetResourceVersion(), after.GetResourceVersion())
	}

	// `vminit instances status --kubeconfig`: open, follow once, close.
	once, err := kubestore.Open(ctxFor(t), kubestore.Config{REST: s.Config(), Namespaces: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer once.Close()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	read := firstboot.New(firstboot.Options{})
	if err := once.FollowBoots(ended, read); err != nil {
		t.Fatal(err)
	}
	if got := read.Status("default/web", id, ""); got.State != firstboot.Done || got.Agent != "ignition" || got.FirstFetch.IsZero() {
		t.Errorf("read once: %+v", got)
	}
	seen := firstboot.New(firstboot.Options{})
	eventually(t, "the watcher to see the write", func() bool {
		if err := watcher.FollowBoots(ended, seen); err != nil {
			t.Fatal(err)
		}
		return seen.Status("default/web", id, "").State == firstboot.Done
	})
	if n := checked.Load(); n != 1 {
		t.Errorf("the spec was checked %d times for one version and status writes", n)
	}

	// FollowBoots returns when its store is closed.
	following := make(chan error, 1)
	go func() { following <- watcher.FollowBoots(context.Background(), seen) }()
	watcher.Close()
	select {
	case err := <-following:
		if err != nil {
			t.Errorf("FollowBoots: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("FollowBoots still runs after Close")
	}
}
