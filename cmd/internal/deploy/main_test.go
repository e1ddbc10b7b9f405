package deploy

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the tests in the folder they test, deploy/ at the
// repository's root: they read its manifests, units and README by the
// paths a reader of that folder sees.
func TestMain(m *testing.M) {
	if err := os.Chdir("../../../deploy"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
