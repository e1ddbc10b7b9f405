package controller_test

import (
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vminit/vminit/cmd/internal/controller"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/mdserver/kubestore"
	"github.com/vminit/vminit/seed"
)

// serve --kubernetes reads an Instance's secretKeyRef and configMapKeyRef
// in its own namespace only: a Secret of the same name in another is never
// used; the Instance is served once its Secret exists, and a change of the
// Secret or ConfigMap is served without a change of the object. The store
// watches no Secret: the controller, which does, tells it through the
// Instance's status.secrets. (It stands here, beside the controller's
// tests, since it runs both the store and the controller, and only cmd/
// may import the controller.)
func TestStoreResolvesRefs(t *testing.T) {
	e := setup(t, false)
	for _, ns := range []string{"a", "b"} {
		if _, err := e.kube.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cs := e.ctx, e.kube
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
	e.run(t, controller.Config{Namespaces: []string{"a", "b"}})
	var logs testtools.SyncBuffer
	st, err := kubestore.Open(ctx, kubestore.Config{REST: e.s.Config(), Namespaces: []string{"a", "b"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e.create(t, "a", "web", "cloudInit:\n  userDataFrom:\n    secretKeyRef: {name: ud, key: user-data}\nfiles:\n  - path: /etc/app.conf\n    source:\n      configMapKeyRef: {name: app, key: conf}\n")
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
	waitFor(t, "a/web refused", func() bool {
		return strings.Contains(logs.String(), `spec.cloudInit.userDataFrom.secretKeyRef: secret \"ud\" not found in namespace \"a\"`)
	})
	if _, ok := st.Snapshot().ByName("a/web"); ok {
		t.Fatal("a/web served without its Secret")
	}
	put("a", "ud", map[string]string{"user-data": "#cloud-config\nruncmd: [[echo, from-a]]\n"})
	waitFor(t, "a/web served with a's Secret", func() bool { return strings.Contains(userData(), "from-a") })
	if ud := userData(); strings.Contains(ud, "from-b") || !strings.Contains(ud, "x=1") {
		t.Errorf("user-data:\n%s", ud)
	}
	rec, _ := st.Snapshot().ByName("a/web")
	before := rec.Revision

	put("a", "ud", map[string]string{"user-data": "#cloud-config\nruncmd: [[echo, rotated]]\n"})
	waitFor(t, "the changed Secret served", func() bool { return strings.Contains(userData(), "rotated") })
	if _, err := cs.CoreV1().ConfigMaps("a").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "a"},
		Data: map[string]string{"conf": "x=2\n"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the changed ConfigMap served", func() bool { return strings.Contains(userData(), "x=2") })
	if rec, _ := st.Snapshot().ByName("a/web"); rec.Revision == before {
		t.Errorf("revision %s unchanged though the Secret changed", before)
	}
}
