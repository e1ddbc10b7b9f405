package cloudinit

import (
	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/internal/lib/yaml11"
	"github.com/vminit/vminit/spec"
)

// sshKeys is cloud-init's ssh_keys for spec.sshHostKeys: each key's
// <type>_private and the <type>_public derived from it (cc_ssh writes
// them to /etc/ssh/ssh_host_<type>_key and .pub, mode 0600 and 0644, and
// generates only the types not given). nil when the spec has none.
func sshKeys(s *spec.Spec) *yaml.Node {
	keys := s.SSHHostKeys.Keys()
	if len(keys) == 0 {
		return nil
	}
	m := yaml11.Mapping()
	for _, k := range keys {
		yaml11.AddPair(m, k.Type+"_private", yaml11.String(string(k.Private)))
		yaml11.AddPair(m, k.Type+"_public", yaml11.String(k.Public))
	}
	return m
}
