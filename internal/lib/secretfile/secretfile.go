// Package secretfile reads the secrets vminit takes from files rather than
// from the command line, where any user's ps would show them: the admin
// API token, the HMAC and IMDSv2 token keys, the etcd password. They are
// read as every input is (package inputfile): without blocking, from a
// regular file only (a FIFO would hang start-up where no signal ends it),
// MaxSize bytes at most.
package secretfile

import (
	"fmt"
	"strings"

	"github.com/vminit/vminit/internal/lib/inputfile"
)

// MaxSize bounds a secret file: tokens, keys and passwords are bytes.
const MaxSize = 64 << 10

// Key reads a token or key: the file's content without the white space
// around it (a token has none; the newline an editor or echo adds is
// dropped). It must be at least min bytes long; what names it in that
// error ("HMAC key").
func Key(path, what string, min int) (string, error) {
	b, err := inputfile.Read(path, MaxSize)
	if err != nil {
		return "", err
	}
	k := strings.TrimSpace(string(b))
	if len(k) < min {
		return "", fmt.Errorf("%s: the %s is %d bytes; use at least %d (e.g. head -c 32 /dev/urandom | base64)", path, what, len(k), min)
	}
	return k, nil
}

// Password reads a password: the file's content without its trailing line
// ending, and nothing else removed (spaces may belong to a password).
func Password(path string) (string, error) {
	b, err := inputfile.Read(path, MaxSize)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
