package cloudinittest_test

import (
	"testing"

	"github.com/vminit/vminit/internal/testing/cloudinittest"
)

// A test asks cloud-init itself what it makes of generated data. (Not run
// as an example: it needs a *testing.T and cloud-init's Python.)
func ExampleRun() {
	var t *testing.T // the test's *testing.T
	var keys []string
	cloudinittest.Run(t, `
import json, sys
from cloudinit import sources
json.dump(sources.normalize_pubkey_data(json.load(sys.stdin)), sys.stdout)
`, map[string]string{"0": "ssh-ed25519 AAAA… alice@example.com"}, &keys)
}
