package spec

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// TestAuthorizedKeyProblemAgreesWithSSH: the keys AuthorizedKeyProblem
// calls dropped are the lines OpenSSH's own reader (ssh-keygen -l, which
// reads an authorized_keys file with sshd's sshkey_read) skips, and the
// rest it reads. The first is the key of KubeVirt's user
// guide's base64 Ignition example (platform/testdata/corpus).
func TestAuthorizedKeyProblemAgreesWithSSH(t *testing.T) {
	keygen := testtools.Require(t, "ssh-keygen")
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	ed, _ := ssh.NewPublicKey(edPriv.Public())
	edLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ed)))
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, _ := ssh.NewPublicKey(&rsaPriv.PublicKey)
	blob := strings.Fields(edLine)[1]
	for _, c := range []struct {
		name, key string
		drop, odd bool
	}{
		{"user guide", "ssh-ed25519AAAAC3NzaC1lZDI1NTE5AAAAIPL3axFGHI3db9iJWkPXVbYzD7OaWTtHuqmxLvj+DztB user@example", true, false},
		{"user guide, spaced", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPL3axFGHI3db9iJWkPXVbYzD7OaWTtHuqmxLvj+DztB user@example", false, false},
		{"ed25519", edLine + " me@host", false, false},
		{"options", `from="10.0.0.0/8",no-pty ` + edLine, false, false},
		{"type mismatch", "ssh-rsa " + blob + " me@host", true, false},
		{"truncated", "ssh-ed25519 " + blob[:40], true, false},
		{"private key", "-----BEGIN OPENSSH PRIVATE KEY-----", true, false},
		{"rsa 1024", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(rsaKey))), false, true},
		{"dsa", dsaKey, false, true},
	} {
		msg, drop := AuthorizedKeyProblem(c.key)
		if drop != c.drop || (msg != "" && !drop) != c.odd {
			t.Errorf("%s: AuthorizedKeyProblem = %q, drop %v; want drop %v, odd %v", c.name, msg, drop, c.drop, c.odd)
		}
		f := filepath.Join(t.TempDir(), "authorized_keys")
		if err := os.WriteFile(f, []byte(c.key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(keygen, "-l", "-f", f).CombinedOutput()
		if (err != nil) != drop {
			t.Errorf("%s: vminit says drop %v (%s); ssh-keygen -l: %v %s", c.name, drop, msg, err, out)
		}
	}
}

// dsaKey is a DSA key (x/crypto/ssh and crypto/dsa deprecate making one).
const dsaKey = "ssh-dss AAAAB3NzaC1kc3MAAACBAP1/U4EddRIpUt9KnC7s5Of2EbdSPO9EAMMeP4C2USZpRV1AIlH7WT2NWPq/xfW6MPbLm1Vs14E7gB00b/JmYLdrmVClpJ+f6AR7ECLCT7up1/63xhv4O1fnxqimFQ8E+4P208UewwI1VBNaFpEy9nXzrith1yrv8iIDGZ3RSAHHAAAAFQCXYFCPFSMLzLKSuYKi64QL8Fgc9QAAAIEA9+GghdabPd7LvKtcNrhXuXmUr7v6OuqC+VdMCz0HgmdRWVeOutRZT+ZxBxCBgLRJFnEj6EwoFhO3zwkyjMim4TwWeotUfI0o4KOuHiuzpnWRbqN/C/ohNWLx+2J6ASQ7zKTxvqhRkImog9/hWuWfBpKLZl6Ae1UlZAFMO/7PSSoAAACBAPXHsA7gkQwB05jeGFQvMJmyACu1jkAZtfyiXoZXnBKVHzV34jZWZAGMQAoIs7LfTpfh2vG91tXK0yXxf2nbG3H/ouUOY3n+5UuiO/wyf5plx01AitGcXU9YUoGmx+Jb63i3NLzibI0HbQo3pb8ocIfBMqqwOrmpbwAl0i4IjU/X user@host"
