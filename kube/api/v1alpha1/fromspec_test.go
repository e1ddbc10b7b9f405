package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vminit/vminit/kube/api/v1alpha1"
	"github.com/vminit/vminit/spec"
)

// FromSpec inlines what the spec reads from files and keeps its Secret
// and ConfigMap references for the cluster to resolve.
func TestFromSpecKeepsClusterRefs(t *testing.T) {
	const hash = "$6$salt$IxDD3jeSOb5eB1CX5LBsqZFVkJdido3OUILO5Ifz5iwMuTS4XMS130MTSuDDl3aCI6WouIL9AjRbLCelDCy.g."
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hash.txt"), []byte(hash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := []byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: r
spec:
  users:
    - name: ops
      passwordHashFrom: {file: hash.txt}
  files:
    - path: /etc/token
      source:
        secretKeyRef: {name: tok, key: token}
  cloudInit:
    userDataFrom:
      configMapKeyRef: {name: ud, key: user-data}
`)
	inst, _, err := spec.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Resolve(dir); err != nil {
		t.Fatal(err)
	}
	obj := v1alpha1.FromSpec(inst)
	s := &obj.Spec
	if u := s.Users[0]; u.PasswordHash != hash || u.PasswordHashFrom != nil {
		t.Errorf("user: hash %q, from %+v; want the file's hash inlined", u.PasswordHash, u.PasswordHashFrom)
	}
	if src := s.Files[0].Source; src == nil || src.SecretKeyRef == nil || s.Files[0].ContentBase64 != "" {
		t.Errorf("file: %+v; want the Secret reference kept", s.Files[0])
	}
	if ci := s.CloudInit; ci.UserData != "" || ci.UserDataFrom == nil || ci.UserDataFrom.ConfigMapKeyRef == nil {
		t.Errorf("cloudInit: %+v; want the ConfigMap reference kept", ci)
	}
	if inst.Spec.Users[0].PasswordHashFrom == nil {
		t.Error("FromSpec changed the spec it was given")
	}
}
