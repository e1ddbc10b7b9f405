package cloudinit

import (
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/internal/testing/hostkeytest"
)

const hostKeysSpec = `apiVersion: vminit.dev/v1alpha1
kind: Instance
metadata:
  name: pinned
spec:
  sshHostKeys:
    ed25519: {file: ssh_host_ed25519_key}
    ecdsa: {file: ssh_host_ecdsa_key}
    rsa: {file: ssh_host_rsa_key}
`

// spec.sshHostKeys become cloud-init's ssh_keys: the document passes
// cloud-init's schema, and cc_ssh would write each private key as given
// and the public half ssh-keygen derives, at the host key paths.
func TestSSHHostKeys(t *testing.T) {
	keys := hostkeytest.New(t, "")
	files := map[string][]byte{}
	for typ, k := range keys {
		files["ssh_host_"+typ+"_key"] = k.Private
	}
	cc, err := CloudConfig(loadSpec(t, hostKeysSpec, files))
	if err != nil {
		t.Fatal(err)
	}
	if err := cloudinittest.Schema(t, cc); err != nil {
		t.Fatalf("%v\n%s", err, cc)
	}
	var got map[string]struct {
		Path string `json:"path"`
		Data string `json:"data"`
	}
	cloudinittest.Run(t, `
import json, sys
from cloudinit import util
from cloudinit.config import cc_ssh
doc = util.load_yaml(json.load(sys.stdin))
out = {}
for k, v in doc["ssh_keys"].items():
    out[k] = {"path": cc_ssh.CONFIG_KEY_TO_FILE[k][0], "data": v}
json.dump(out, sys.stdout)
`, string(cc), &got)
	for typ, k := range keys {
		priv, pub := got[typ+"_private"], got[typ+"_public"]
		if priv.Path != "/etc/ssh/ssh_host_"+typ+"_key" || priv.Data != string(k.Private) {
			t.Errorf("%s_private: %s, %d bytes; want the key as given at /etc/ssh/ssh_host_%s_key", typ, priv.Path, len(priv.Data), typ)
		}
		if pub.Path != "/etc/ssh/ssh_host_"+typ+"_key.pub" || pub.Data != k.Public {
			t.Errorf("%s_public: %s %q; want ssh-keygen's %q", typ, pub.Path, pub.Data, k.Public)
		}
	}
}
