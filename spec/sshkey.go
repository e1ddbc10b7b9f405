package spec

import (
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/ssh"

	"github.com/vminit/vminit/internal/lib/yamlbound"
)

// AuthorizedKeyProblem reads key, one authorized_keys line, as sshd reads
// the file the guest agent writes it to, and says what is wrong with it:
// drop when sshd skips the line (the key logs nobody in: an error), else
// a line sshd takes but that looks odd (a warning). It is "" for a good
// key. It is the one rule for every SSH key vminit is given: the spec's
// own (spec.sshAuthorizedKeys, users[].sshAuthorizedKeys and the files and
// Secrets they come from) and those inside the raw configs the spec
// carries (a cloud-config's ssh_authorized_keys, an Ignition or Butane
// config's passwd.users[]), so that one key is judged the same wherever it
// is written.
func AuthorizedKeyProblem(key string) (problem string, drop bool) {
	if strings.ContainsAny(strings.TrimRight(key, "\n"), "\r\n") {
		return "one key per entry: this entry spans several lines", true
	}
	if _, ok := validKeys.Load(key); ok {
		return "", false
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(key))
	if err != nil {
		return "not an SSH public key (want an authorized_keys line such as \"ssh-ed25519 AAAA… user@host\"): sshd skips the line" + joinedType(key), true
	}
	// sshd compares the type the line names with the key's own (sshkey_read:
	// "type mismatch") and skips the line when they differ; x/crypto/ssh does not.
	if blob := base64.StdEncoding.EncodeToString(pub.Marshal()); strings.Contains(key, blob) {
		if f := strings.Fields(key[:strings.Index(key, blob)]); len(f) > 0 && f[len(f)-1] != pub.Type() {
			return fmt.Sprintf("the line names key type %s but holds a %s key, so sshd skips it", f[len(f)-1], pub.Type()), true
		}
	}
	switch pub.Type() {
	case keyAlgoDSA:
		return "a DSA (ssh-dss) key: OpenSSH 7.0 and later refuse DSA keys unless PubkeyAcceptedAlgorithms allows them, and 9.8 and later have no DSA at all; use an ed25519 or RSA key", false
	case ssh.KeyAlgoRSA:
		if ck, ok := pub.(ssh.CryptoPublicKey); ok {
			if rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey); ok && rk.N.BitLen() < 2048 {
				return fmt.Sprintf("a %d-bit RSA key: OpenSSH 9.1 and later refuse RSA keys under 1024 bits (RequiredRSASize), and under 2048 bits is weak", rk.N.BitLen()), false
			}
		}
	}
	if validKeyCount.Add(1) <= maxValidKeys {
		validKeys.Store(key, struct{}{})
	}
	return "", false
}

// keyAlgoDSA is the DSA key type, which x/crypto/ssh still parses but has
// deprecated: the keys vminit is given may still be DSA ones.
const keyAlgoDSA = "ssh-dss"

// joinedType names the commonest way to break a key: its type and its
// base64 run together (KubeVirt's user guide's Ignition example,
// "ssh-ed25519AAAA…").
func joinedType(key string) string {
	k := strings.TrimSpace(key)
	for _, t := range []string{ssh.KeyAlgoED25519, ssh.KeyAlgoRSA, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, keyAlgoDSA, ssh.KeyAlgoSKED25519, ssh.KeyAlgoSKECDSA256} {
		if strings.HasPrefix(k, t+"AAAA") {
			return ": no space between the key type " + t + " and the key"
		}
	}
	return ""
}

// checkSSHKey adds the problem of a key sshd would skip to c; a key that
// only looks odd is for AuthorizedKeyWarnings.
func checkSSHKey(c *ErrorList, field, key string) {
	if msg, drop := AuthorizedKeyProblem(key); drop {
		c.Add(field, "%s", msg)
	}
}

// AuthorizedKeyWarnings returns, for each of the spec's own SSH keys that
// sshd takes but that looks odd (AuthorizedKeyProblem), a warning naming
// its field. Validate reports the keys sshd would skip.
func (in *Instance) AuthorizedKeyWarnings() Errors {
	var ws Errors
	warn := func(field, key string) {
		if msg, drop := AuthorizedKeyProblem(key); msg != "" && !drop {
			ws = append(ws, &FieldError{Field: field, Message: msg})
		}
	}
	for i, k := range in.Spec.SSHAuthorizedKeys {
		warn(fmt.Sprintf("spec.sshAuthorizedKeys[%d]", i), k)
	}
	for i, u := range in.Spec.Users {
		for j, k := range u.SSHAuthorizedKeys {
			warn(fmt.Sprintf("spec.users[%d].sshAuthorizedKeys[%d]", i, j), k)
		}
	}
	return ws
}

// validKeys holds SSH keys that parsed with no problem, so that each is
// parsed once per process: a fleet's specs repeat the same few keys, and
// parsing one was a third of validating a spec. Only the first
// maxValidKeys are kept, which bounds the memory whatever the specs hold.
var (
	validKeys     sync.Map // string → struct{}
	validKeyCount atomic.Int64
)

const maxValidKeys = 4096

// The raw configs whose SSH keys RawKeyProblems reads.
const (
	RawCloudConfig = "cloud-config" // ssh_authorized_keys, users[].ssh_authorized_keys
	RawIgnition    = "ignition"     // passwd.users[].sshAuthorizedKeys
	RawButane      = "butane"       // passwd.users[].ssh_authorized_keys
)

// RawKeyProblem is the problem of one SSH key inside a raw config.
type RawKeyProblem struct {
	// Path is the key's place in the config: users[1].ssh_authorized_keys[0].
	Path    string
	Message string
	// Drop: sshd skips the line (an error); else it only looks odd.
	Drop bool
}

func (p RawKeyProblem) String() string { return p.Path + ": " + p.Message }

// RawKeyProblems judges the SSH keys inside a raw config of format (a
// #cloud-config document, an Ignition config, a Butane document) with
// AuthorizedKeyProblem: the keys the agent writes to authorized_keys as
// given, which nobody else looks into. A config that does not parse has
// none (its own check says why).
func RawKeyProblems(format, data string) []RawKeyProblem {
	var doc map[string]any
	if data == "" || yamlbound.Unmarshal([]byte(data), &doc, FieldYAML) != nil {
		return nil
	}
	var out []RawKeyProblem
	check := func(path string, keys any) {
		list, _ := keys.([]any)
		for i, k := range list {
			key, ok := k.(string)
			if !ok {
				continue // the agent's own schema says what is wrong
			}
			if msg, drop := AuthorizedKeyProblem(key); msg != "" {
				out = append(out, RawKeyProblem{Path: fmt.Sprintf("%s[%d]", path, i), Message: msg, Drop: drop})
			}
		}
	}
	users := func(doc map[string]any, prefix, key string) {
		list, _ := doc["users"].([]any)
		for i, u := range list {
			if m, ok := u.(map[string]any); ok {
				check(fmt.Sprintf("%susers[%d].%s", prefix, i, key), m[key])
			}
		}
	}
	switch format {
	case RawCloudConfig:
		check("ssh_authorized_keys", doc["ssh_authorized_keys"])
		users(doc, "", "ssh_authorized_keys")
	case RawIgnition, RawButane:
		key := map[string]string{RawIgnition: "sshAuthorizedKeys", RawButane: "ssh_authorized_keys"}[format]
		passwd, _ := doc["passwd"].(map[string]any)
		users(passwd, "passwd.", key)
	}
	return out
}
