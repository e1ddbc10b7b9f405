package controller_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vminit/vminit/cmd/internal/controller"
	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

const (
	hashA = "$6$vminitTestSalt$bxoxYrnKoMYX7SNV.Nxk54vzUsBV9eSOhZtT4XP8XaipbIH8rFb4WkkeVTUwN7ya1I90C069s2n6lDSIK14JS1"
	hashB = "$6$salt$IxDD3jeSOb5eB1CX5LBsqZFVkJdido3OUILO5Ifz5iwMuTS4XMS130MTSuDDl3aCI6WouIL9AjRbLCelDCy.g."
)

// userDataOf is the sha256 of the user-data `vminit build` makes for the
// Instance db with user ops of password hash hash.
func userDataOf(t *testing.T, hash string) string {
	t.Helper()
	inst, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: db}\nspec:\n  users:\n    - name: ops\n      passwordHash: '"+hash+"'\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	sd, err := seed.Build(inst, seed.NoCloud, seed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sd.Files {
		if f.Path == "user-data" {
			return sha(f.Data)
		}
	}
	t.Fatal("no user-data")
	return ""
}

func outputSHA(st *v1alpha1.InstanceStatus, name string) string {
	for _, o := range st.Outputs {
		if o.Name == name {
			return o.SHA256
		}
	}
	return ""
}

// An Instance's secretKeyRef is read in its own namespace only: a Secret
// of that name in another namespace is never used (not even when the
// object tries to name that namespace); a missing Secret or key is the
// Valid condition's MissingReference naming it; creating the key renders
// the Instance, and changing the Secret renders it again.
func TestSecretRefs(t *testing.T) {
	e := setup(t, false)
	for _, ns := range []string{"a", "b"} {
		if _, err := e.kube.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(ns string, data map[string]string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ops", Namespace: ns}, StringData: data}
		if _, err := e.kube.CoreV1().Secrets(ns).Update(e.ctx, s, metav1.UpdateOptions{}); err == nil {
			return
		}
		if _, err := e.kube.CoreV1().Secrets(ns).Create(e.ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("b", map[string]string{"hash": hashB}) // another namespace's
	e.run(t, controller.Config{})
	// The object tries to name namespace b: the API server prunes the
	// field (the schema has none), and a is read.
	e.create(t, "a", "db", "users:\n  - name: ops\n    passwordHashFrom:\n      secretKeyRef: {name: ops, key: hash, namespace: b}\n")
	missing := func(want string) {
		t.Helper()
		st := e.status(t, "a", "db", func(st *v1alpha1.InstanceStatus) bool {
			v := condition(st, v1alpha1.ConditionValid)
			return v.Reason == v1alpha1.ReasonMissingReference && strings.Contains(v.Message, want)
		})
		v := condition(st, v1alpha1.ConditionValid)
		if !strings.Contains(v.Message, "spec.users[0].passwordHashFrom.secretKeyRef: ") || len(st.Outputs) != 0 {
			t.Errorf("Valid %+v, outputs %v", v, st.Outputs)
		}
	}
	missing(`secret "ops" not found in namespace "a"`)

	put("a", map[string]string{"other": "x"})
	missing(`secret "ops" in namespace "a" has no key "hash"`)

	put("a", map[string]string{"hash": hashA})
	want := userDataOf(t, hashA)
	st := e.status(t, "a", "db", func(st *v1alpha1.InstanceStatus) bool { return outputSHA(st, "user-data") == want })
	if v := condition(st, v1alpha1.ConditionValid); v.Status != metav1.ConditionTrue {
		t.Errorf("Valid %+v", v)
	}

	// status.secrets names the Secret with the version read: what tells
	// the metadata servers, which may not watch Secrets, of a change.
	sec, err := e.kube.CoreV1().Secrets("a").Get(e.ctx, "ops", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.status(t, "a", "db", func(st *v1alpha1.InstanceStatus) bool {
		return len(st.Secrets) == 1 && st.Secrets[0] == v1alpha1.SecretVersion{Name: "ops", ResourceVersion: sec.ResourceVersion}
	})

	// A rotated hash: the same object, rendered again, its new version
	// in status.secrets.
	put("a", map[string]string{"hash": hashB})
	want = userDataOf(t, hashB)
	st = e.status(t, "a", "db", func(st *v1alpha1.InstanceStatus) bool { return outputSHA(st, "user-data") == want })
	if sec2, _ := e.kube.CoreV1().Secrets("a").Get(e.ctx, "ops", metav1.GetOptions{}); len(st.Secrets) != 1 || st.Secrets[0].ResourceVersion == sec.ResourceVersion {
		t.Errorf("status.secrets %+v after the Secret changed to version %s", st.Secrets, sec2.ResourceVersion)
	}
}
