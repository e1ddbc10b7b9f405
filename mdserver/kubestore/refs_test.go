package kubestore_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vminit/vminit/cmd/internal/controller"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver/kubestore"
	"github.com/vminit/vminit/seed"
)

// serve --kubernetes reads an Instance's secretKeyRef and configMapKeyRef
// in its own namespace only: a Secret of the same name in another is never
// used; the Instance is served once its Secret exists, and a change of the
// Secret or ConfigMap is served without a change of the object. The store
// watches no Secret: the controller, which does, tells it through the
// Instance's status.secrets.
func TestStoreResolvesRefs(t *testing.T) {
	s, dyn := start(t, false)
	createNS(t, s, "a", "b")
	ctx := ctxFor(t)
	cs := s.Clientset(t)
	put := func(ns, name string, data map[string]string) {
		t.Helper()
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
		if _, err := cs.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err == nil {
			return
		}
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("b", "ud", map[string]string{"user-data": "#cloud-config\nruncmd: [[echo, from-b]]\n"})
	if _, err := cs.CoreV1().ConfigMaps("a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "a"},
		Data: map[string]string{"conf": "x=1\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.Config{REST: s.Config(), Namespaces: []string{"a", "b"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(cctx) }()
	defer func() { stop(); <-done }()
	var logs testtools.SyncBuffer
	st, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Namespaces: []string{"a", "b"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	obj := object(t, "a", "web", "cloudInit:\n  userDataFrom:\n    secretKeyRef: {name: ud, key: user-data}\nfiles:\n  - path: /etc/app.conf\n    source:\n      configMapKeyRef: {name: app, key: conf}\n")
	if _, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("a").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	userData := func() string {
		rec, ok := st.Snapshot().ByName("a/web")
		if !ok {
			return ""
		}
		ud, err := seed.UserData(rec.Instance())
		if err != nil {
			t.Fatal(err)
		}
		return string(ud)
	}
	// b's Secret of that name is not a's: the object does not load, and
	// nothing is served.
	eventually(t, "a/web refused", func() bool {
		return strings.Contains(logs.String(), `spec.cloudInit.userDataFrom.secretKeyRef: secret \"ud\" not found in namespace \"a\"`)
	})
	if _, ok := st.Snapshot().ByName("a/web"); ok {
		t.Fatal("a/web served without its Secret")
	}
	put("a", "ud", map[string]string{"user-data": "#cloud-config\nruncmd: [[echo, from-a]]\n"})
	eventually(t, "a/web served with a's Secret", func() bool { return strings.Contains(userData(), "from-a") })
	if ud := userData(); strings.Contains(ud, "from-b") || !strings.Contains(ud, "x=1") {
		t.Errorf("user-data:\n%s", ud)
	}
	rec, _ := st.Snapshot().ByName("a/web")
	before := rec.Revision

	put("a", "ud", map[string]string{"user-data": "#cloud-config\nruncmd: [[echo, rotated]]\n"})
	eventually(t, "the changed Secret served", func() bool { return strings.Contains(userData(), "rotated") })
	if _, err := cs.CoreV1().ConfigMaps("a").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "a"},
		Data: map[string]string{"conf": "x=2\n"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the changed ConfigMap served", func() bool { return strings.Contains(userData(), "x=2") })
	if rec, _ := st.Snapshot().ByName("a/web"); rec.Revision == before {
		t.Errorf("revision %s unchanged though the Secret changed", before)
	}
}
