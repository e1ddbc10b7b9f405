package controller_test

import (
	"encoding/json"
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

// seedOf is the files `vminit build` makes (NoCloud) for the Instance
// name of spec specYAML (indented as an Instance object's spec).
func seedOf(t *testing.T, name, specYAML string) map[string][]byte {
	t.Helper()
	inst, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: "+name+"}\nspec:\n"+specYAML), "")
	if err != nil {
		t.Fatal(err)
	}
	sd, err := seed.Build(inst, seed.NoCloud, seed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range sd.Files {
		out[f.Path] = f.Data
	}
	return out
}

// secretRead is when the Instance rendered from the version of Secret
// name that sec is.
func secretRead(sec *corev1.Secret) func(*v1alpha1.InstanceStatus) bool {
	return func(st *v1alpha1.InstanceStatus) bool {
		return condition(st, v1alpha1.ConditionRendered).Status == metav1.ConditionTrue &&
			len(st.Secrets) == 1 && st.Secrets[0] == v1alpha1.SecretVersion{Name: sec.Name, ResourceVersion: sec.ResourceVersion}
	}
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
	sec, err := e.kube.CoreV1().Secrets("a").Get(e.ctx, "ops", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// status.secrets names the Secret with the version read: what tells
	// the metadata servers, which may not watch Secrets, of a change.
	st := e.status(t, "a", "db", secretRead(sec))
	if v := condition(st, v1alpha1.ConditionValid); v.Status != metav1.ConditionTrue {
		t.Errorf("Valid %+v", v)
	}

	// A rotated hash: the same object, rendered again, its new version
	// in status.secrets.
	put("a", map[string]string{"hash": hashB})
	sec2, err := e.kube.CoreV1().Secrets("a").Get(e.ctx, "ops", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.status(t, "a", "db", secretRead(sec2))
}

// TestSecretOutputsNoDigest: status.outputs publishes no digest nor size
// of files that carry a Secret's value (a password hash, a file, user
// data, for cloud-init and Ignition), nor does the Rendered condition or
// Event: whoever reads Instances could test guesses of the secret
// against them. An Instance whose values are inline or in a ConfigMap
// keeps its digests.
func TestSecretOutputsNoDigest(t *testing.T) {
	e := setup(t, false)
	if _, err := e.kube.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const token = "hunter2"
	if _, err := e.kube.CoreV1().Secrets("a").Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ops", Namespace: "a"},
		StringData: map[string]string{"hash": hashA, "token": token}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().ConfigMaps("a").Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "motd", Namespace: "a"},
		Data: map[string]string{"motd": "hello"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.run(t, controller.Config{})

	inline := "  users:\n    - name: ops\n      passwordHash: '" + hashA + "'\n  files:\n    - path: /etc/token\n      content: " + token + "\n"
	fromSecret := "  users:\n    - name: ops\n      passwordHashFrom: {secretKeyRef: {name: ops, key: hash}}\n  files:\n    - path: /etc/token\n      source: {secretKeyRef: {name: ops, key: token}}\n"
	e.create(t, "a", "db", strings.ReplaceAll(fromSecret, "\n  ", "\n")[2:])
	e.create(t, "a", "fcos", "agent: ignition\nfiles:\n  - path: /etc/token\n    source: {secretKeyRef: {name: ops, key: token}}\n")
	e.create(t, "a", "plain", strings.ReplaceAll(inline, "\n  ", "\n")[2:])
	e.create(t, "a", "cm", "files:\n  - path: /etc/motd\n    source: {configMapKeyRef: {name: motd, key: motd}}\n")

	// What a reader of the Instance must not find: the digest of the
	// user-data the Secret's values are rendered into, as `vminit build`
	// writes it.
	secretFiles := seedOf(t, "db", inline)
	for _, name := range []string{"db", "fcos"} {
		st := e.status(t, "a", name, isTrue(v1alpha1.ConditionRendered))
		if len(st.Outputs) == 0 {
			t.Fatalf("%s: no outputs", name)
		}
		for _, o := range st.Outputs {
			if !o.FromSecret || o.SHA256 != "" || o.Size != 0 {
				t.Errorf("%s: output %+v of an Instance that reads a Secret", name, o)
			}
		}
		u, err := e.instances("a").Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status, _ := json.Marshal(u.Object["status"])
		published := string(status)
		for _, ev := range e.events(t, "a", name, "Rendered") {
			published += ev.Message
		}
		if strings.Contains(published, sha(secretFiles["user-data"])) {
			t.Errorf("%s: the status or an Event holds the sha256 of the user-data that holds the Secret's values", name)
		}
		if strings.Contains(published, token) || strings.Contains(published, hashA) {
			t.Errorf("%s: the status or an Event holds a Secret's value: %s", name, published)
		}
	}

	// Without a Secret, the digests stay: inline values (which every
	// reader of the Instance reads anyway), a ConfigMap's.
	want := sha(seedOf(t, "plain", inline)["user-data"])
	st := e.status(t, "a", "plain", isTrue(v1alpha1.ConditionRendered))
	if got := outputSHA(st, "user-data"); got != want {
		t.Errorf("plain: user-data sha256 %q, want %q; outputs %+v", got, want, st.Outputs)
	}
	st = e.status(t, "a", "cm", isTrue(v1alpha1.ConditionRendered))
	for _, o := range st.Outputs {
		if o.FromSecret || o.SHA256 == "" {
			t.Errorf("cm: output %+v", o)
		}
	}
}

func outputSHA(st *v1alpha1.InstanceStatus, name string) string {
	for _, o := range st.Outputs {
		if o.Name == name {
			return o.SHA256
		}
	}
	return ""
}
