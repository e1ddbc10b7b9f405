package spec_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/spec"
)

// hostKey is a fresh private key in OpenSSH's PEM format, and its public
// half as an authorized_keys line.
func hostKey(t *testing.T, typ string) (private []byte, public string) {
	t.Helper()
	var key any
	switch typ {
	case "ed25519":
		_, key, _ = ed25519.GenerateKey(rand.Reader)
	case "ecdsa":
		key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
}

const (
	testHash = "$6$salt$IxDD3jeSOb5eB1CX5LBsqZFVkJdido3OUILO5Ifz5iwMuTS4XMS130MTSuDDl3aCI6WouIL9AjRbLCelDCy.g."
	testKey  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGv9cE0Wnh5ZkzKJ+GPbOyQcWgXn1i3G2Vm3ptoOk8Ej ops@example"
)

// refsTree is a spec directory holding hash.txt, keys.txt, user-data and
// ssh_host_ed25519_key, with secret (and a link to it, out) one level up.
func refsTree(t *testing.T) (dir, public string) {
	t.Helper()
	top := t.TempDir()
	dir = filepath.Join(top, "specs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	private, public := hostKey(t, "ed25519")
	for p, data := range map[string]string{
		"secret": "$6$top$secret", "specs/hash.txt": testHash + "\n", "specs/keys.txt": "# ops\n" + testKey + "\n\n",
		"specs/user-data": "#cloud-config\nruncmd: [[true]]\n", "specs/ssh_host_ed25519_key": string(private),
	} {
		if err := os.WriteFile(filepath.Join(top, p), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../secret", filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	return dir, public
}

// refsSpec is a spec whose fields take their values from files (%s: the
// password hash's, the authorized keys', the user data's, the host
// key's).
const refsSpec = `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: refs
spec:
  users:
    - name: ops
      passwordHashFrom: {file: %q}
      sshAuthorizedKeysFrom: {file: %q}
  cloudInit:
    userDataFrom: {file: %q}
  sshHostKeys:
    ed25519: {file: %q}
`

func loadRefs(t *testing.T, dir string, files ...any) (*spec.Instance, error) {
	t.Helper()
	p := filepath.Join(dir, "instance.yaml")
	if err := os.WriteFile(p, fmt.Appendf(nil, refsSpec, files...), 0o600); err != nil {
		t.Fatal(err)
	}
	return spec.Load(p)
}

// On the command line each reference takes a file beside the spec, whose
// value fills the field.
func TestFileRefsFill(t *testing.T) {
	dir, public := refsTree(t)
	inst, err := loadRefs(t, dir, "hash.txt", "keys.txt", "user-data", "ssh_host_ed25519_key")
	if err != nil {
		t.Fatal(err)
	}
	u := inst.Spec.Users[0]
	if u.PasswordHash != testHash || *u.LockPassword {
		t.Errorf("password hash %q, locked %v; want the file's hash, unlocked", u.PasswordHash, *u.LockPassword)
	}
	if len(u.SSHAuthorizedKeys) != 1 || u.SSHAuthorizedKeys[0] != testKey {
		t.Errorf("keys %q; want the file's one key", u.SSHAuthorizedKeys)
	}
	if !strings.HasPrefix(inst.Spec.CloudInit.UserData, "#cloud-config\nruncmd") {
		t.Errorf("user data %q", inst.Spec.CloudInit.UserData)
	}
	keys := inst.Spec.SSHHostKeys.Keys()
	if len(keys) != 1 || keys[0].Type != "ed25519" || keys[0].Public != public || !strings.Contains(string(keys[0].Private), "OPENSSH PRIVATE KEY") {
		t.Errorf("host keys %+v; want the ed25519 key with public half %s", keys, public)
	}
}

// A reference's file is confined as files[].source.file is: every escape
// is refused, naming the field.
func TestFileRefsConfined(t *testing.T) {
	dir, _ := refsTree(t)
	ok := []any{"hash.txt", "keys.txt", "user-data", "ssh_host_ed25519_key"}
	fields := []string{"spec.users[0].passwordHashFrom.file", "spec.users[0].sshAuthorizedKeysFrom.file", "spec.cloudInit.userDataFrom.file", "spec.sshHostKeys.ed25519.file"}
	for i, field := range fields {
		for _, escape := range []string{"../secret", "out", "/etc/shadow", filepath.Join(dir, "..", "secret")} {
			files := append([]any(nil), ok...)
			files[i] = escape
			_, err := loadRefs(t, dir, files...)
			if err == nil || !strings.Contains(err.Error(), field+": ") || !strings.Contains(err.Error(), "is outside "+dir) {
				t.Errorf("%s: %s: got %v; want it refused as outside %s", field, escape, err, dir)
			}
			if err != nil && strings.Contains(err.Error(), "$6$top$secret") {
				t.Errorf("%s: %s: the error quotes the file outside: %v", field, escape, err)
			}
		}
	}
}

// fakeRefs holds one namespace's Secret and ConfigMap keys.
type fakeRefs map[string]string // kind/name/key → value

func (f fakeRefs) Key(kind, name, key string) ([]byte, error) {
	v, ok := f[kind+"/"+name+"/"+key]
	if !ok {
		return nil, fmt.Errorf("%s %q has no key %q", kind, name, key)
	}
	return []byte(v), nil
}

const clusterRefsSpec = `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: refs
spec:
  users:
    - name: ops
      passwordHashFrom:
        secretKeyRef: {name: ops, key: hash}
  files:
    - path: /etc/app.conf
      source:
        configMapKeyRef: {name: app, key: conf}
  sshHostKeys:
    ed25519:
      secretKeyRef: {name: hk, key: %s}
`

// Secret and ConfigMap references are read through the Loader's Refs;
// without one, each is a problem naming its field and what to pass; a
// missing key is a problem naming the field, with the resolver's words.
func TestClusterRefs(t *testing.T) {
	private, public := hostKey(t, "ed25519")
	ecdsaKey, _ := hostKey(t, "ecdsa")
	refs := fakeRefs{"Secret/ops/hash": testHash, "ConfigMap/app/conf": "x=1\n", "Secret/hk/ed25519": string(private), "Secret/hk/ecdsa": string(ecdsaKey)}
	inst, err := spec.Loader{Refs: refs}.Parse(fmt.Appendf(nil, clusterRefsSpec, "ed25519"), "")
	if err != nil {
		t.Fatal(err)
	}
	if inst.Spec.Users[0].PasswordHash != testHash || string(inst.Spec.Files[0].Data()) != "x=1\n" || inst.Spec.SSHHostKeys.Keys()[0].Public != public {
		t.Errorf("references not filled in: %+v", inst.Spec)
	}

	_, err = spec.Parse(fmt.Appendf(nil, clusterRefsSpec, "ed25519"), "")
	for _, field := range []string{"spec.users[0].passwordHashFrom.secretKeyRef", "spec.files[0].source.configMapKeyRef", "spec.sshHostKeys.ed25519.secretKeyRef"} {
		if err == nil || !strings.Contains(err.Error(), field+": ") || !strings.Contains(err.Error(), "--kubeconfig") || !errors.Is(err, spec.ErrNoRefs) {
			t.Errorf("without Refs: %v; want %s refused, saying to pass --kubeconfig", err, field)
		}
	}

	_, err = spec.Loader{Refs: refs}.Parse(fmt.Appendf(nil, clusterRefsSpec, "missing"), "")
	if err == nil || !strings.Contains(err.Error(), `spec.sshHostKeys.ed25519.secretKeyRef: Secret "hk" has no key "missing"`) {
		t.Errorf("missing key: %v", err)
	}

	_, err = spec.Loader{Refs: refs}.Parse(fmt.Appendf(nil, clusterRefsSpec, "ecdsa"), "")
	if err == nil || !strings.Contains(err.Error(), "spec.sshHostKeys.ed25519: the private key is a ecdsa-sha2-nistp256 key, not ssh-ed25519") {
		t.Errorf("an ECDSA key as the ed25519 key: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("the error quotes the private key: %v", err)
	}
}

// What a reference may not be: both it and the field it fills, a
// ConfigMap for a secret, a file in a document sent over an API, no
// source at all, a host key that is no key.
func TestRefsRefused(t *testing.T) {
	const head = "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: r\nspec:\n"
	refs := fakeRefs{"ConfigMap/c/k": testHash, "Secret/s/k": "not a key"}
	for _, c := range []struct{ doc, want string }{
		{"  users:\n    - name: a\n      passwordHash: " + testHash + "\n      passwordHashFrom:\n        secretKeyRef: {name: s, key: k}\n",
			"spec.users[0].passwordHashFrom: set either passwordHash or passwordHashFrom, not both"},
		{"  users:\n    - name: a\n      passwordHashFrom:\n        configMapKeyRef: {name: c, key: k}\n",
			"spec.users[0].passwordHashFrom.configMapKeyRef: a secret belongs in a Secret"},
		{"  users:\n    - name: a\n      passwordHashFrom: {file: hash.txt}\n",
			"spec.users[0].passwordHashFrom.file: not allowed in a document sent over an API"},
		{"  cloudInit:\n    userDataFrom: {}\n", "spec.cloudInit.userDataFrom: required"},
		{"  files:\n    - path: /a\n      source:\n        configMapKeyRef: {name: c, key: k}\n        secretKeyRef: {name: s, key: k}\n", "spec.files[0].source: set exactly one"},
		{"  sshHostKeys:\n    rsa:\n      secretKeyRef: {name: s, key: k}\n", "spec.sshHostKeys.rsa: not an SSH private key"},
		{"  users:\n    - name: a\n      passwordHashFrom:\n        secretKeyRef: {name: s, key: k}\n",
			"spec.users[0].passwordHashFrom: not a crypt(3) hash"},
	} {
		_, err := spec.Loader{Refs: refs}.Parse([]byte(head+c.doc), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v; want %q", c.doc, err, c.want)
		}
	}
}

// ForAPI makes a loaded spec fit to send: file references' values inlined,
// Secret and ConfigMap references kept and their values left out, so
// that the receiver, resolving them in its namespace, loads the same
// instance; the spec it was given is unchanged.
func TestForAPI(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"hash.txt": testHash + "\n", "x.txt": "x\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIONt2I6iEtv+xHflGoJXSrd2rBDr+0iYXnkjzE2Dueal alice@example.com"
	refs := fakeRefs{"Secret/keys/k": other + "\n", "Secret/tok/t": "token", "Secret/ud/u": "#cloud-config\nruncmd: [[true]]\n"}
	doc := []byte(`apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: api
spec:
  users:
    - name: ops
      passwordHashFrom: {file: hash.txt}
      sshAuthorizedKeys: ['` + testKey + `']
      sshAuthorizedKeysFrom:
        secretKeyRef: {name: keys, key: k}
  files:
    - path: /etc/x
      source: {file: x.txt}
    - path: /etc/token
      source:
        secretKeyRef: {name: tok, key: t}
  cloudInit:
    userDataFrom:
      secretKeyRef: {name: ud, key: u}
`)
	inst, err := spec.Loader{Refs: refs}.Parse(doc, dir)
	if err != nil {
		t.Fatal(err)
	}
	api, changed := inst.ForAPI()
	s := &api.Spec
	u := s.Users[0]
	switch {
	case !changed:
		t.Error("not changed")
	case u.PasswordHash != testHash || u.PasswordHashFrom != nil:
		t.Errorf("password: %q, %+v; want the file's hash inline", u.PasswordHash, u.PasswordHashFrom)
	case len(u.SSHAuthorizedKeys) != 1 || u.SSHAuthorizedKeysFrom == nil:
		t.Errorf("keys %q from %+v; want the inline key, and the Secret's left to it", u.SSHAuthorizedKeys, u.SSHAuthorizedKeysFrom)
	case s.Files[0].Source != nil || s.Files[0].ContentBase64 != "eAo=":
		t.Errorf("file: %+v; want its content inline", s.Files[0])
	case s.Files[1].Source == nil || s.Files[1].ContentBase64 != "":
		t.Errorf("secret file: %+v; want the reference kept", s.Files[1])
	case s.CloudInit.UserData != "" || s.CloudInit.UserDataFrom == nil:
		t.Errorf("user data: %+v; want the reference kept, its value out", s.CloudInit)
	}
	if len(inst.Spec.Users[0].SSHAuthorizedKeys) != 2 || inst.Spec.Files[0].Source == nil {
		t.Error("ForAPI changed the spec it was given")
	}
	sent, err := yaml.Marshal(api)
	if err != nil {
		t.Fatal(err)
	}
	back, err := spec.Loader{Refs: refs}.Parse(sent, "")
	if err != nil {
		t.Fatalf("the receiver refuses it: %v\n%s", err, sent)
	}
	b := &back.Spec
	if b.Users[0].PasswordHash != testHash || len(b.Users[0].SSHAuthorizedKeys) != 2 || string(b.Files[0].Data()) != "x\n" ||
		string(b.Files[1].Data()) != "token" || b.CloudInit.UserData != inst.Spec.CloudInit.UserData {
		t.Errorf("the receiver loads another instance:\n%s", sent)
	}
}

// A file of more keys than a list holds is refused, naming the field,
// without parsing them all.
func TestKeyLinesBounded(t *testing.T) {
	dir := t.TempDir()
	keys := strings.Repeat(testKey+"\n", spec.MaxListEntries+1)
	if err := os.WriteFile(filepath.Join(dir, "keys.txt"), []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "instance.yaml")
	doc := "apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: k\nspec:\n  users:\n    - name: a\n      sshAuthorizedKeysFrom: {file: keys.txt}\n"
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := spec.Load(p)
	if err == nil || !strings.Contains(err.Error(), "spec.users[0].sshAuthorizedKeysFrom: more than 10000 keys (line 10001)") {
		t.Errorf("got %v", err)
	}
}

// The default user's keys come from a file or a Secret as a user's do:
// added after spec.sshAuthorizedKeys; a Secret's
// reference is kept for the receiver of ForAPI, a file's inlined.
func TestDefaultUserKeysFrom(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keys.txt"), []byte("# ops\n"+testKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIONt2I6iEtv+xHflGoJXSrd2rBDr+0iYXnkjzE2Dueal alice@example.com"
	refs := fakeRefs{"Secret/keys/k": other + "\nssh-ed25519AAAA\n"}
	for _, c := range []struct {
		ref, want, wantErr string
		api                bool // ForAPI keeps the reference
	}{
		{"{file: keys.txt}", testKey, "", false},
		{"{secretKeyRef: {name: keys, key: k}}", other, "spec.sshAuthorizedKeysFrom: line 2: not an SSH public key", true},
	} {
		doc := []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: k\nspec:\n  sshAuthorizedKeysFrom: " + c.ref + "\n")
		inst, err := spec.Loader{Refs: refs}.Parse(doc, dir)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: %v, want %q", c.ref, err, c.wantErr)
			}
			refs["Secret/keys/k"] = other + "\n"
			if inst, err = (spec.Loader{Refs: refs}).Parse(doc, dir); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", c.ref, err)
		}
		if k := inst.Spec.SSHAuthorizedKeys; len(k) != 1 || k[0] != c.want {
			t.Errorf("%s: keys %q, want %q", c.ref, k, c.want)
		}
		api, _ := inst.ForAPI()
		if kept := api.Spec.SSHAuthorizedKeysFrom != nil; kept != c.api || kept && len(api.Spec.SSHAuthorizedKeys) != 0 || !kept && len(api.Spec.SSHAuthorizedKeys) != 1 {
			t.Errorf("%s: ForAPI: keys %q from %+v", c.ref, api.Spec.SSHAuthorizedKeys, api.Spec.SSHAuthorizedKeysFrom)
		}
	}
	doc := []byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata:\n  name: k\nspec:\n  users: [{name: ops}]\n  cloudInit: {noDefaultUser: true}\n  sshAuthorizedKeysFrom: {file: keys.txt}\n")
	if _, err := spec.Parse(doc, dir); err == nil || !strings.Contains(err.Error(), "spec.sshAuthorizedKeysFrom: go to the image's default user") {
		t.Errorf("noDefaultUser with the default user's keys from a file: %v", err)
	}
}
