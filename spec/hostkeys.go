package spec

import (
	"crypto/rsa"
	"errors"
	"strings"

	"golang.org/x/crypto/ssh"
)

// SSHHostKeys are the guest's SSH host keys, given so that an operator can
// put their public halves in known_hosts before the VM first boots
// (`vminit render --known-hosts`) instead of trusting the first
// connection. They are private keys, so they are taken by reference only
// (a file beside the spec, or a Secret key), never written inline; the
// public half is derived from each.
type SSHHostKeys struct {
	// Ed25519, ECDSA and RSA are each an OpenSSH or PEM private key of
	// that type, without a passphrase.
	Ed25519 *ValueFrom `yaml:"ed25519,omitempty" json:"ed25519,omitempty"`
	ECDSA   *ValueFrom `yaml:"ecdsa,omitempty" json:"ecdsa,omitempty"`
	RSA     *ValueFrom `yaml:"rsa,omitempty" json:"rsa,omitempty"`

	// keys are the keys read, in hostKeyTypes' order: filled by Load.
	keys []HostKey `json:"-"`
}

// HostKey is one host key read for a spec.
type HostKey struct {
	// Type is "rsa", "ecdsa" or "ed25519": the name in
	// /etc/ssh/ssh_host_<type>_key and cloud-init's <type>_private.
	Type string
	// Private is the private key as given.
	Private []byte
	// Public is its public half as an authorized_keys line
	// ("ssh-ed25519 AAAA…"), without a comment.
	Public string
}

// hostKeyTypes are the types of host keys, in the order they are listed
// and rendered, and the SSH public key types each accepts.
var hostKeyTypes = []struct {
	name  string
	ssh   []string
	field func(*SSHHostKeys) *ValueFrom
}{
	{"rsa", []string{ssh.KeyAlgoRSA}, func(k *SSHHostKeys) *ValueFrom { return k.RSA }},
	{"ecdsa", []string{ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521}, func(k *SSHHostKeys) *ValueFrom { return k.ECDSA }},
	{"ed25519", []string{ssh.KeyAlgoED25519}, func(k *SSHHostKeys) *ValueFrom { return k.Ed25519 }},
}

// minRSABits is the smallest RSA host key accepted: OpenSSH refuses
// smaller ones.
const minRSABits = 2048

// Keys returns the host keys read, in the order rsa, ecdsa, ed25519. It is
// empty before Load (or for a nil k).
func (k *SSHHostKeys) Keys() []HostKey {
	if k == nil {
		return nil
	}
	return k.keys
}

// refFields lists the host keys' references; reading one parses it and
// checks its type.
func (k *SSHHostKeys) refFields() []refField {
	if k == nil {
		return nil
	}
	var out []refField
	for _, t := range hostKeyTypes {
		ref := t.field(k)
		if ref == nil {
			continue
		}
		out = append(out, refField{field: "spec.sshHostKeys." + t.name, ref: ref, secret: true, apply: func(c *ErrorList, field string, v []byte) {
			pub, err := hostPublicKey(v, t.ssh)
			if err != nil {
				c.Add(field, "%v", err)
				return
			}
			k.add(HostKey{Type: t.name, Private: v, Public: pub})
		}})
	}
	return out
}

// add keeps key in hostKeyTypes' order.
func (k *SSHHostKeys) add(key HostKey) {
	rank := func(name string) int {
		for i, t := range hostKeyTypes {
			if t.name == name {
				return i
			}
		}
		return len(hostKeyTypes)
	}
	i := 0
	for i < len(k.keys) && rank(k.keys[i].Type) < rank(key.Type) {
		i++
	}
	k.keys = append(k.keys[:i], append([]HostKey{key}, k.keys[i:]...)...)
}

// hostPublicKey parses a private host key and returns its public half as
// an authorized_keys line, or says why it cannot serve as a host key of
// one of the types want. The error never quotes the key.
func hostPublicKey(private []byte, want []string) (string, error) {
	signer, err := ssh.ParsePrivateKey(private)
	var missing *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return "", errors.New("the private key is protected by a passphrase, which sshd cannot give: give it without one")
	case err != nil:
		return "", errors.New("not an SSH private key (want an OpenSSH or PEM private key, as ssh-keygen writes it)")
	}
	pub := signer.PublicKey()
	ok := false
	for _, w := range want {
		ok = ok || pub.Type() == w
	}
	if !ok {
		return "", errors.New("the private key is a " + pub.Type() + " key, not " + strings.Join(want, " or "))
	}
	if cpk, isCrypto := pub.(ssh.CryptoPublicKey); isCrypto {
		if r, isRSA := cpk.CryptoPublicKey().(*rsa.PublicKey); isRSA && r.N.BitLen() < minRSABits {
			return "", errors.New("an RSA host key needs at least 2048 bits")
		}
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), nil
}

// KnownHosts returns the known_hosts lines of the instance's host keys
// (after Load), in Keys' order: its host name, FQDN and the addresses its
// metadata server entry lists, then the public key. Empty when it has no
// host keys.
func (in *Instance) KnownHosts() []string {
	s := &in.Spec
	var names []string
	for _, n := range []string{s.Hostname, s.FQDN} {
		if n != "" {
			names = append(names, n)
		}
	}
	if s.MetadataServer != nil {
		names = append(names, s.MetadataServer.Addresses...)
	}
	hosts := strings.Join(names, ",")
	var out []string
	for _, k := range s.SSHHostKeys.Keys() {
		out = append(out, hosts+" "+k.Public)
	}
	return out
}
