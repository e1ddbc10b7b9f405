package controller_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/vminit/vminit/cmd/internal/controller"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/firstboot"
	"github.com/vminit/vminit/mdserver/kubestore"
)

// TestFirstBootBesideController: the metadata server (kubestore.WriteBoot,
// server-side apply under its own field manager) and the controller
// (UpdateStatus of the whole status) write one status: neither erases
// the other's fields or conditions, whichever writes last.
func TestFirstBootBesideController(t *testing.T) {
	e := setup(t, false)
	e.run(t, controller.Config{Namespaces: []string{"default"}})
	obj := e.create(t, "default", "web-1", "metadataServer: {addresses: [10.0.0.1]}\n")
	e.status(t, "default", "web-1", isTrue(v1alpha1.ConditionRendered))

	st, err := kubestore.Open(e.ctx, kubestore.Config{REST: e.s.Config(), Namespaces: []string{"default"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	uid := string(obj.GetUID())
	tr := firstboot.New(firstboot.Options{})
	tr.Fetch("default/web-1", uid, "cloud-init", "nocloud", "/meta-data")
	tr.Record("default/web-1", uid, "cloud-init", firstboot.Event{Kind: firstboot.KindStart, Name: "modules-config/config-ssh"})
	running := tr.Status("default/web-1", uid, "cloud-init")
	// The store writes only what its watch has seen the object of.
	waitFor(t, "the store's write", func() bool {
		if err := st.WriteBoot(e.ctx, []firstboot.Status{running}); err != nil {
			t.Fatal(err)
		}
		s := e.status(t, "default", "web-1", func(*v1alpha1.InstanceStatus) bool { return true })
		return s.FirstBoot != nil
	})

	// The controller writes its status (a new spec, a new hostname):
	// status.firstBoot and the FirstBoot condition stay as they were.
	e.setSpec(t, "default", "web-1", "hostname: renamed\nmetadataServer: {addresses: [10.0.0.1]}\n")
	s := e.status(t, "default", "web-1", func(s *v1alpha1.InstanceStatus) bool { return s.Hostname == "renamed" })
	if s.FirstBoot == nil || s.FirstBoot.State != "running" || s.FirstBoot.Module != "config-ssh" {
		t.Errorf("the controller's write erased status.firstBoot: %+v", s.FirstBoot)
	}
	if c := condition(s, v1alpha1.ConditionFirstBoot); c.Reason != v1alpha1.ReasonRunning || c.ObservedGeneration != 0 {
		t.Errorf("the controller's write changed the FirstBoot condition: %+v", c)
	}

	// The server writes a failure: the controller's conditions stay.
	tr.Record("default/web-1", uid, "cloud-init", firstboot.Event{Kind: firstboot.KindFinish, Name: "modules-final/config-scripts-user", Result: firstboot.ResultFail, Message: "exit 1"})
	tr.Record("default/web-1", uid, "cloud-init", firstboot.Event{Kind: firstboot.KindFinish, Name: "modules-final", Result: firstboot.ResultFail})
	if err := st.WriteBoot(e.ctx, []firstboot.Status{tr.Status("default/web-1", uid, "cloud-init")}); err != nil {
		t.Fatal(err)
	}
	s = e.status(t, "default", "web-1", func(s *v1alpha1.InstanceStatus) bool {
		return condition(s, v1alpha1.ConditionFirstBoot).Status == "False"
	})
	for _, typ := range []string{v1alpha1.ConditionValid, v1alpha1.ConditionRendered, v1alpha1.ConditionServed} {
		if c := condition(s, typ); c.Status != "True" {
			t.Errorf("the server's write changed %s: %+v", typ, c)
		}
	}
	if s.Hostname != "renamed" || len(s.Outputs) == 0 {
		t.Errorf("the server's write changed the controller's fields: %+v", s)
	}
}
