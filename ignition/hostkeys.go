package ignition

import (
	types "github.com/coreos/ignition/v2/config/v3_0/types"
)

// hostKeys writes spec.sshHostKeys where sshd reads them:
// /etc/ssh/ssh_host_<type>_key (mode 0600) and its .pub (0644), as
// ssh-keygen leaves them. The distributions' sshd-keygen then generates
// only the types not given.
func (r *renderer) hostKeys(cfg *types.Config) {
	for _, k := range r.inst.Spec.SSHHostKeys.Keys() {
		p := "/etc/ssh/ssh_host_" + k.Type + "_key"
		field := "spec.sshHostKeys." + k.Type
		if r.claim(p, field) {
			r.addFile(cfg, p, k.Private, 0o600, "", false)
		}
		if r.claim(p+".pub", field) {
			r.addFile(cfg, p+".pub", []byte(k.Public+"\n"), 0o644, "", false)
		}
	}
}
