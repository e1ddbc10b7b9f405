package spec_test

import (
	"strings"
	"testing"

	"github.com/vminit/vminit/spec"
)

// TestNTPValidation: each time server is a host name or an IP address,
// and spec.ntp names at least one.
func TestNTPValidation(t *testing.T) {
	_, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  ntp: {servers: [\"not a host\", 192.0.2.1, \"2001:db8::1\"], pools: [pool.ntp.org, -bad]}\n"), "")
	for _, want := range []string{
		`5: spec.ntp.servers[0]: "not a host" is neither a host name nor an IP address`,
		`spec.ntp.pools[1]: "-bad" is neither a host name nor an IP address`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "192.0.2.1") {
		t.Errorf("an IP address refused: %v", err)
	}
	if _, err := spec.Parse([]byte("apiVersion: vminit.dev/v1alpha1\nkind: Instance\nmetadata: {name: a}\nspec:\n  ntp: {}\n"), ""); err == nil || !strings.Contains(err.Error(), "spec.ntp: names no servers or pools") {
		t.Errorf("empty ntp: %v", err)
	}
}
