// Package secretfile reads the secrets vminit takes from files rather than
// from the command line, where any user's ps would show them: the admin
// API token, the HMAC and IMDSv2 token keys, the etcd password.
package secretfile

import (
	"fmt"
	"os"
	"strings"
)

// Key reads a token or key: the file's content without the white space
// around it (a token has none; the newline an editor or echo adds is
// dropped). It must be at least min bytes long; what names it in that
// error ("HMAC key").
func Key(path, what string, min int) (string, error) {
	b, err := os.ReadFile(path)
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
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
