// Package hostkeytest makes SSH host keys for tests with the real
// ssh-keygen, so that the public halves vminit derives are compared with
// OpenSSH's own.
package hostkeytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/internal/testing/testtools"
)

// Key is one host key ssh-keygen wrote.
type Key struct {
	// File is the private key's path (under t.TempDir()), Private its
	// bytes; Public is the .pub file's key without its comment.
	File    string
	Private []byte
	Public  string
}

// Types are the host key types a spec takes, as ssh-keygen -t names them.
var Types = []string{"rsa", "ecdsa", "ed25519"}

// New writes a key of each type (ssh-keygen -t TYPE -N ""), named
// ssh_host_TYPE_key, into dir (a new temporary directory when "").
func New(t testing.TB, dir string) map[string]Key {
	t.Helper()
	keygen := testtools.Require(t, "ssh-keygen")
	if dir == "" {
		dir = t.TempDir()
	}
	keys := map[string]Key{}
	for _, typ := range Types {
		p := filepath.Join(dir, "ssh_host_"+typ+"_key")
		args := []string{"-q", "-t", typ, "-N", "", "-C", "", "-f", p}
		if typ == "rsa" {
			args = append(args, "-b", "2048")
		}
		if out, err := exec.Command(keygen, args...).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen -t %s: %v: %s", typ, err, out)
		}
		private, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := os.ReadFile(p + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(pub))
		keys[typ] = Key{File: p, Private: private, Public: f[0] + " " + f[1]}
	}
	return keys
}
