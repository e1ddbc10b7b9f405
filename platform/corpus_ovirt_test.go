package platform_test

import (
	"testing"

	"github.com/vminit/vminit/platform"
)

// TestCorpusOVirt runs the oVirt corpus: the REST bodies the oVirt SDKs'
// examples (Python, Go) and the oVirt Ansible collection's modules send,
// and those the REST API's own documentation shows. The password salt is
// the --password-salt flag that vminit's refusal of oVirt's plain-text
// root_password asks for.
func TestCorpusOVirt(t *testing.T) {
	runCorpus(t, corpusPlatform{
		Dir:  "ovirt",
		Opts: platform.Options{PasswordSalt: "corpussalt"},
	})
}
