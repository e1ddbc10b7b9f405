package spec

import (
	"testing"
)

// refsDoc sets every field that takes a reference, in both of its forms.
const refsDoc = specHeader + `spec:
  users:
    - name: ops
      passwordHashFrom: {file: hash.txt}
      sshAuthorizedKeysFrom:
        secretKeyRef: {name: keys, key: authorized_keys}
  files:
    - path: /etc/app.conf
      source:
        configMapKeyRef: {name: app, key: app.conf}
    - path: /etc/token
      source:
        secretKeyRef:
          name: tok
          key: token
    - path: /etc/x
      source: {file: x.txt}
  cloudInit:
    userDataFrom:
      secretKeyRef: {name: ud, key: user-data}
  sshHostKeys:
    ed25519: {file: ssh_host_ed25519_key}
    ecdsa:
      secretKeyRef: {name: hk, key: ecdsa}
    rsa:
      secretKeyRef:
        name: hk
        key: rsa
`

// Every reference field decodes the same on the fast path as through
// yaml.v3, and the fast path takes the document (it is plain YAML; a
// flow mapping inside a flow mapping is not, and goes to yaml.v3).
func TestRefsDecodeOnBothPaths(t *testing.T) {
	checkFastDecode(t, []byte(refsDoc))
	inst, tree, err := decodeFast([]byte(refsDoc))
	if err != nil || inst == nil {
		t.Fatalf("the fast path did not take the document (tree %v, err %v)", tree != nil, err)
	}
	s := &inst.Spec
	u := &s.Users[0]
	for name, got := range map[string]bool{
		"passwordHashFrom.file":       u.PasswordHashFrom != nil && u.PasswordHashFrom.File == "hash.txt",
		"sshAuthorizedKeysFrom":       u.SSHAuthorizedKeysFrom != nil && *u.SSHAuthorizedKeysFrom.SecretKeyRef == KeyRef{"keys", "authorized_keys"},
		"files[0].configMapKeyRef":    s.Files[0].Source.ConfigMapKeyRef != nil && *s.Files[0].Source.ConfigMapKeyRef == KeyRef{"app", "app.conf"},
		"files[1].secretKeyRef":       s.Files[1].Source.SecretKeyRef != nil && s.Files[1].Source.SecretKeyRef.Key == "token",
		"files[2].file":               s.Files[2].Source.File == "x.txt",
		"userDataFrom":                s.CloudInit.UserDataFrom != nil && s.CloudInit.UserDataFrom.SecretKeyRef.Name == "ud",
		"sshHostKeys.ed25519.file":    s.SSHHostKeys != nil && s.SSHHostKeys.Ed25519.File == "ssh_host_ed25519_key",
		"sshHostKeys.ecdsa.secretRef": s.SSHHostKeys != nil && s.SSHHostKeys.ECDSA.SecretKeyRef.Key == "ecdsa",
		"sshHostKeys.rsa.secretRef":   s.SSHHostKeys != nil && s.SSHHostKeys.RSA.SecretKeyRef.Key == "rsa",
	} {
		if !got {
			t.Errorf("%s not decoded", name)
		}
	}
	// A misspelt or namespaced reference goes to the careful path, which
	// names it.
	checkFastDecode(t, []byte(specHeader+"spec:\n  files:\n    - path: /a\n      source: {secretKeyRef: {name: tok, key: token}}\n"))
	for _, bad := range []string{
		specHeader + "spec:\n  users:\n    - name: ops\n      passwordHashFrom: {secretKeyRef: {name: a, key: b, namespace: other}}\n",
		specHeader + "spec:\n  sshHostKeys:\n    dsa: {file: k}\n",
		specHeader + "spec:\n  sshHostKeys:\n    ed25519: \"-----BEGIN OPENSSH PRIVATE KEY-----\"\n",
	} {
		checkFastDecode(t, []byte(bad))
		if _, _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("decoded without a problem:\n%s", bad)
		}
	}
}
