package kubestore_test

import (
	"log/slog"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vminit/vminit/internal/testing/kubetest"
	"github.com/vminit/vminit/internal/testing/laughs"
	"github.com/vminit/vminit/internal/testing/testtools"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/mdserver/kubestore"
)

// TestLaughsObjectRefused: a tenant's Instance whose user data is the
// issue's attack (1 GB of aliases) is logged as refused with its field,
// and the store goes on serving the other tenants, where `serve
// --kubernetes` ran out of memory, on every restart, while the object
// persisted.
func TestLaughsObjectRefused(t *testing.T) {
	s, dyn := start(t, false)
	ctx := ctxFor(t)
	res := dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default")
	bad := object(t, "default", "laughs", "metadataServer: {addresses: [10.0.0.2]}")
	unstructured.SetNestedField(bad.Object, laughs.Issue(), "spec", "cloudInit", "userData")
	for _, o := range []*unstructured.Unstructured{bad, object(t, "default", "web", "metadataServer: {addresses: [10.0.0.1]}")} {
		if _, err := res.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var logs testtools.SyncBuffer
	st, err := kubestore.Open(ctx, kubestore.Config{REST: s.Config(), Namespaces: []string{"default"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Checks: mdserver.StoreChecks(mdserver.Options{}), Addresses: kubetest.Tenants})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eventually(t, "web served", func() bool { return addrOf(st.Snapshot(), "10.0.0.1") == "default/web" })
	eventually(t, "the attack logged", func() bool { return strings.Contains(logs.String(), "object=default/laughs") })
	if l := logs.String(); !strings.Contains(l, "spec.cloudInit.userData") || !strings.Contains(l, "aliases expand the document past 16777216 bytes") {
		t.Errorf("log of the attack:\n%s", l)
	}
	if addrOf(st.Snapshot(), "10.0.0.2") != "" {
		t.Error("the attack is served")
	}
}
